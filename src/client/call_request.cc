#include "client/call_request.h"

#include <algorithm>

#include "client/compiled_routes.h"
#include "runtime/bytes_equal.h"

namespace uxds::client_internal {

namespace {

bool SameName(const std::string& a, const std::string& b) {
  return a.size() == b.size() && BytesEqual(a.data(), b.data(), a.size());
}

}  // namespace

void CallRequest::Join(const char*& data, size_t& size, std::string*& joined,
                       std::string_view more) {
  if (joined == nullptr) joined = &joined_.emplace_front(data, size);
  joined->push_back(',');
  joined->append(more);
  data = joined->data();
  size = joined->size();
}

void CallRequest::FindInterned(const CompiledRoutes& routes) {
  found_ = true;
  const size_t count = std::min<size_t>(routes.header_names_.size(), kMemoized);
  if (count == 0) return;
  for (size_t i = 0; i < count; ++i) values_[i] = Found{nullptr, 0, nullptr};
  // One pass: most metadata entries are told apart from every interned
  // name by their name's length alone.
  const uint64_t sizes = routes.memoized_name_sizes_;
  for (const auto& [name, value] : metadata_) {
    if (((sizes >> CompiledRoutes::SizeBit(name.size())) & 1) == 0) continue;
    for (size_t i = 0; i < count; ++i) {
      if (!SameName(routes.header_names_[i], name)) continue;
      Found& found = values_[i];
      // A std::string's data() is never null: a present empty value is
      // still present.
      if (found.data == nullptr) {
        found = Found{value.data(), value.size(), nullptr};
      } else {
        Join(found.data, found.size, found.joined, value);
      }
      break;
    }
  }
}

CallRequest::Value CallRequest::LookUp(const CompiledRoutes& routes, uint32_t index) {
  // A28: "-bin" headers, gRPC's reserved "grpc-" names and pseudo-headers
  // are never visible; content-type is always "application/grpc".
  if (index == CompiledRoutes::kNeverVisible) return {};
  if (index == CompiledRoutes::kContentType) {
    static constexpr std::string_view kGrpc = "application/grpc";
    return {kGrpc.data(), kGrpc.size()};
  }
  const std::string& wanted = routes.header_names_[index];
  const char* data = nullptr;
  size_t size = 0;
  std::string* joined = nullptr;
  for (const auto& [name, value] : metadata_) {
    if (!SameName(wanted, name)) continue;
    if (data == nullptr) {
      data = value.data();
      size = value.size();
    } else {
      Join(data, size, joined, value);
    }
  }
  return {data, size};
}

}  // namespace uxds::client_internal
