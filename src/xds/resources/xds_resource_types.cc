// The XdsResourceType adapters around the resource decoders.
#include "uxds/bootstrap.h"
#include "uxds/xds_resources.h"
#include "xds/resources/resource_decoders.h"

namespace uxds {
namespace {

template <typename Resource>
XdsResourceType::DecodeResult ToDecodeResult(DecodedResource<Resource> decoded) {
  if (!decoded.resource.ok()) {
    return {std::move(decoded.name), decoded.resource.status()};
  }
  return {std::move(decoded.name),
          XdsResourceData(std::make_shared<const Resource>(*std::move(decoded.resource)))};
}

}  // namespace

const XdsDecodeContext& StandaloneDecodeContext() {
  static const Bootstrap* const bootstrap = [] {
    auto* b = new Bootstrap();
    b->xds_servers.emplace_back();
    b->xds_servers.back().server_uri = "standalone.invalid:443";
    return b;
  }();
  static const XdsDecodeContext context{*bootstrap, bootstrap->xds_servers.front()};
  return context;
}

const ClusterResourceType& ClusterResourceType::Get() {
  static const ClusterResourceType* const type = new ClusterResourceType();
  return *type;
}

XdsResourceType::DecodeResult ClusterResourceType::Decode(const XdsDecodeContext& context,
                                                          std::string_view serialized) const {
  return ToDecodeResult(DecodeCluster(context, serialized));
}

const EndpointResourceType& EndpointResourceType::Get() {
  static const EndpointResourceType* const type = new EndpointResourceType();
  return *type;
}

XdsResourceType::DecodeResult EndpointResourceType::Decode(const XdsDecodeContext& context,
                                                           std::string_view serialized) const {
  return ToDecodeResult(DecodeEndpoints(context, serialized));
}

const ListenerResourceType& ListenerResourceType::Get() {
  static const ListenerResourceType* const type = new ListenerResourceType();
  return *type;
}

XdsResourceType::DecodeResult ListenerResourceType::Decode(const XdsDecodeContext& context,
                                                           std::string_view serialized) const {
  return ToDecodeResult(DecodeListener(context, serialized));
}

const RouteConfigResourceType& RouteConfigResourceType::Get() {
  static const RouteConfigResourceType* const type = new RouteConfigResourceType();
  return *type;
}

XdsResourceType::DecodeResult RouteConfigResourceType::Decode(const XdsDecodeContext& context,
                                                              std::string_view serialized) const {
  return ToDecodeResult(DecodeRouteConfig(context, serialized));
}

}  // namespace uxds
