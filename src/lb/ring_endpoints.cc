// The ring_hash policy's input list (see uxds/ring_hash.h).
#include <map>

#include "runtime/socket_address.h"
#include "uxds/ring_hash.h"

namespace uxds {

std::vector<RingEndpoint> BuildRingEndpoints(std::span<const RingHashAddress> addresses,
                                             std::vector<size_t>* kept) {
  std::vector<RingEndpoint> endpoints;
  std::map<std::string_view, size_t> by_address;
  if (kept != nullptr) kept->clear();
  for (size_t i = 0; i < addresses.size(); ++i) {
    const RingHashAddress& a = addresses[i];
    const uint64_t weight = a.weight == 0 ? 1 : a.weight;
    auto [it, inserted] = by_address.emplace(a.address, endpoints.size());
    if (!inserted) {
      // NOTES.md: a duplicate adds its weight to the first occurrence.
      endpoints[it->second].weight += weight;
      continue;
    }
    // A76: the endpoint's hash key, else its address.
    endpoints.push_back(RingEndpoint{a.hash_key.empty() ? a.address : a.hash_key, weight});
    if (kept != nullptr) kept->push_back(i);
  }
  return endpoints;
}

StatusOr<std::string> RingHashAddressText(std::string_view host_port) {
  StatusOr<SocketAddress> address = SocketAddress::Parse(host_port);
  if (!address.ok()) return address.status();
  return address->ToString();
}

}  // namespace uxds
