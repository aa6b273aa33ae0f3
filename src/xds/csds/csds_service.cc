#include "xds/csds/csds_service.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "http2/server_call.h"

namespace uxds::csds {
namespace {

using envoy::service::status::v3::ClientStatusRequest;
using envoy::service::status::v3::ClientStatusResponse;
using google::protobuf::internal::WireFormatLite;

// ClientStatusRequest.node_matchers: our trimmed csds.proto leaves the field
// out (uxds matches no nodes), so it is looked for on the wire.
constexpr int kNodeMatchersFieldNumber = 1;

// True if the serialized message has a top-level field `field_number`.
bool HasField(const std::string& message, int field_number) {
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(message.data()),
                                               static_cast<int>(message.size()));
  while (uint32_t tag = input.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == field_number) return true;
    if (!WireFormatLite::SkipField(&input, tag)) return false;
  }
  return false;
}

Task<Status> StreamClientStatus(std::shared_ptr<CsdsClientRegistry> clients,
                                http2::ServerCall& call) {
  while (std::optional<std::string> request = co_await call.Read()) {
    StatusOr<std::string> response =
        co_await AnswerClientStatusRequest(*clients, call.loop(), std::move(*request));
    if (!response.ok()) co_return response.status();
    UXDS_CO_RETURN_IF_ERROR(co_await call.Write(*response));
  }
  if (call.cancelled()) co_return CancelledError("call cancelled");
  co_return OkStatus();
}

}  // namespace

Task<StatusOr<std::string>> AnswerClientStatusRequest(CsdsClientRegistry& clients, Loop& loop,
                                                      std::string serialized_request) {
  ClientStatusRequest request;
  if (!request.ParseFromString(serialized_request)) {
    co_return InvalidArgumentError("ClientStatusRequest: message does not parse");
  }
  if (HasField(serialized_request, kNodeMatchersFieldNumber)) {
    co_return InvalidArgumentError(
        "ClientStatusRequest.node_matchers: node matching is not supported");
  }
  StatusOr<ClientStatusResponse> response =
      co_await clients.Fetch(loop, request.exclude_resource_contents());
  if (!response.ok()) co_return response.status();
  co_return response->SerializeAsString();
}

void RegisterCsdsService(http2::ServiceRegistry& registry,
                         std::shared_ptr<CsdsClientRegistry> clients) {
  registry.Register(
      kFetchClientStatusPath,
      http2::MakeUnaryHandler(
          [clients](http2::ServerCall& call, std::string request) -> Task<StatusOr<std::string>> {
            return AnswerClientStatusRequest(*clients, call.loop(), std::move(request));
          }));
  registry.Register(kStreamClientStatusPath,
                    [clients = std::move(clients)](http2::ServerCall& call) -> Task<Status> {
                      return StreamClientStatus(clients, call);
                    });
}

}  // namespace uxds::csds
