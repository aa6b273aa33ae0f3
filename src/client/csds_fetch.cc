// FetchClientStatus: A40's FetchClientStatus over a Channel.
#include <utility>

#include "envoy/service/status/v3/csds.pb.h"
#include "uxds/csds_client.h"

namespace uxds {
namespace {

constexpr char kFetchClientStatusMethod[] =
    "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus";

namespace status_v3 = envoy::service::status::v3;

CsdsResourceStatus ResourceFromProto(const status_v3::ClientConfig::GenericXdsConfig& config) {
  CsdsResourceStatus resource;
  resource.type_url = config.type_url();
  resource.name = config.name();
  // A40's ClientResourceStatus and XdsCacheState share their values; a
  // value from a newer server than we know reads as REQUESTED.
  const int status = static_cast<int>(config.client_status());
  if (status >= static_cast<int>(XdsCacheState::kRequested) &&
      status <= static_cast<int>(XdsCacheState::kTimeout)) {
    resource.state = static_cast<XdsCacheState>(status);
  }
  resource.version = config.version_info();
  if (config.has_error_state()) {
    resource.error = config.error_state().details();
    resource.failed_version = config.error_state().version_info();
  }
  return resource;
}

}  // namespace

Task<StatusOr<std::vector<CsdsClientStatus>>> FetchClientStatus(Channel& channel,
                                                                CallOptions options) {
  status_v3::ClientStatusRequest request;
  // Only the states are wanted: the resources could be large.
  request.set_exclude_resource_contents(true);
  StatusOr<UnaryResponse> reply = co_await channel.UnaryCall(
      kFetchClientStatusMethod, request.SerializeAsString(), std::move(options));
  if (!reply.ok()) co_return reply.status();
  status_v3::ClientStatusResponse response;
  if (!response.ParseFromString(reply->message)) {
    co_return InternalError("ClientStatusResponse from " + reply->peer + " does not parse");
  }
  std::vector<CsdsClientStatus> clients;
  clients.reserve(response.config_size());
  for (const status_v3::ClientConfig& config : response.config()) {
    CsdsClientStatus client;
    client.client_scope = config.client_scope();
    client.node_id = config.node().id();
    client.resources.reserve(config.generic_xds_configs_size());
    for (const auto& generic : config.generic_xds_configs()) {
      client.resources.push_back(ResourceFromProto(generic));
    }
    clients.push_back(std::move(client));
  }
  co_return clients;
}

std::string_view ShortTypeName(std::string_view type_url) {
  const size_t dot = type_url.rfind('.');
  return dot == std::string_view::npos ? type_url : type_url.substr(dot + 1);
}

}  // namespace uxds
