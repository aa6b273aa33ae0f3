// uxds::FilterChainSelector: the public face of FilterChainMatcher.
#include "uxds/filter_chain_selector.h"

#include "runtime/socket_address.h"
#include "server/filter_chain_matcher.h"

namespace uxds {

Status FilterChainSelector::CheckIp(std::string_view ip) {
  return SocketAddress::FromIpAndPort(ip, 0).status();
}

FilterChainSelector::FilterChainSelector(const ListenerResource::TcpListener& listener)
    : matcher_(std::make_unique<FilterChainMatcher>(listener)) {}

FilterChainSelector::~FilterChainSelector() = default;

StatusOr<const FilterChain*> FilterChainSelector::Select(const Endpoint& destination,
                                                         const Endpoint& source) const {
  StatusOr<SocketAddress> local = SocketAddress::FromIpAndPort(destination.ip, destination.port);
  if (!local.ok()) return local.status().WithContext("destination");
  StatusOr<SocketAddress> peer = SocketAddress::FromIpAndPort(source.ip, source.port);
  if (!peer.ok()) return peer.status().WithContext("source");
  return matcher_->Select(ConnectionAddresses{*local, *peer});
}

}  // namespace uxds
