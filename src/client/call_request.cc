#include "client/call_request.h"

#include "client/compiled_routes.h"

namespace uxds::client_internal {

CallHeaders::CallHeaders(std::span<const std::pair<std::string, std::string>> metadata) {
  if (metadata.size() <= kInlineHeaders) {
    for (const auto& [name, value] : metadata) inline_[size_++] = PickHeader{name, value};
    return;
  }
  spilled_.reserve(metadata.size());
  for (const auto& [name, value] : metadata) spilled_.push_back(PickHeader{name, value});
}

CallRequest::Value CallRequest::LookUp(const CompiledRoutes& routes, uint32_t index) {
  // A28: "-bin" headers, gRPC's reserved "grpc-" names and pseudo-headers
  // are never visible; content-type is always "application/grpc".
  if (index == CompiledRoutes::kNeverVisible) return {};
  if (index == CompiledRoutes::kContentType) {
    static constexpr std::string_view kGrpc = "application/grpc";
    return {kGrpc.data(), kGrpc.size()};
  }
  const std::string_view name = routes.header_names_[index];
  Value value;
  std::string* joined = nullptr;
  for (const PickHeader& header : headers_) {
    if (header.name != name) continue;
    if (!value.present()) {
      // A present empty value still has a non-null pointer.
      value = {header.value.data() != nullptr ? header.value.data() : "", header.value.size()};
      continue;
    }
    // A28: several values of one name are matched joined with ','.
    if (joined == nullptr) joined = &joined_.emplace_front(value.view());
    joined->push_back(',');
    joined->append(header.value);
    value = {joined->data(), joined->size()};
  }
  if (index < kMemoized) {
    looked_up_ |= 1u << index;
    values_[index] = value;
  }
  return value;
}

}  // namespace uxds::client_internal
