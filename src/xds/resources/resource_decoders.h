// Decoders of the four xDS resource types: serialized resource (the value of
// the google.protobuf.Any in a DiscoveryResponse) -> plain struct, validated
// with gRPC's rules. Run once per resource on the control thread; nothing
// downstream touches protobuf classes.
//
// An invalid resource gives INVALID_ARGUMENT listing every problem with its
// field path, in gRPC's shape, e.g.
//   errors validating Cluster resource: [field:ring_hash_lb_config.maximum_ring_size
//   error:must be in the range of 1 to 8388608]
// and the resource name whenever the bytes parsed far enough to read it, so
// the client can NACK that one resource and keep its siblings (A46).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "uxds/resources/cluster.h"
#include "uxds/resources/endpoint.h"
#include "uxds/resources/listener.h"
#include "uxds/resources/route_config.h"
#include "uxds/status.h"
#include "uxds/xds_resource_type.h"

namespace uxds {

template <typename Resource>
struct DecodedResource {
  // Set if the name could be read (the bytes parsed).
  std::optional<std::string> name;
  StatusOr<Resource> resource;
};

// type.googleapis.com/envoy.config.cluster.v3.Cluster
DecodedResource<ClusterResource> DecodeCluster(const XdsDecodeContext& context,
                                               std::string_view serialized);
// type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment; the
// name is cluster_name.
DecodedResource<EndpointResource> DecodeEndpoints(const XdsDecodeContext& context,
                                                  std::string_view serialized);
// type.googleapis.com/envoy.config.route.v3.RouteConfiguration
DecodedResource<RouteConfigResource> DecodeRouteConfig(const XdsDecodeContext& context,
                                                       std::string_view serialized);
// type.googleapis.com/envoy.config.listener.v3.Listener
DecodedResource<ListenerResource> DecodeListener(const XdsDecodeContext& context,
                                                 std::string_view serialized);

}  // namespace uxds
