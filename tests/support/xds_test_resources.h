// Real xDS resources (lite envoy protos) for tests that script the fake
// control plane: a valid EDS cluster, one that is NACKed, endpoints.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "envoy/config/route/v3/route.pb.h"
#include "support/fake_control_plane.h"

namespace uxds::testing {

inline constexpr char kCdsType[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
inline constexpr char kEdsType[] =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
inline constexpr char kLdsType[] = "type.googleapis.com/envoy.config.listener.v3.Listener";
inline constexpr char kRdsType[] = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

// One route of RouteConfig(): requests whose path starts with `prefix` go to
// `cluster`.
struct TestRoute {
  std::string prefix;
  std::string cluster;
  // A42: a header hash policy on this header when set.
  std::string hash_header = {};
};

// An EDS cluster whose endpoints come from ADS under `service_name`.
ResponseResource ValidCluster(const std::string& name, const std::string& service_name);
// A29: the same, its connections secured by an UpstreamTlsContext: roots
// from certificate provider instance `ca_instance`, the identity from
// `identity_instance` (none when empty), and the server's SANs matched
// against `san_matchers` ("exact:localhost", "prefix:spiffe://td/", ...).
ResponseResource SecureCluster(const std::string& name, const std::string& service_name,
                               const std::string& ca_instance, const std::string& identity_instance,
                               const std::vector<std::string>& san_matchers = {});
// An EDS cluster without eds_cluster_config: NACKed.
ResponseResource InvalidCluster(const std::string& name);
// One locality (zone z1, weight 1) with one endpoint ip:port.
ResponseResource Endpoints(const std::string& cluster_name, const std::string& ip, int port);
// The same, in a locality (zone "z1") without load_balancing_weight (A27:
// ignored).
ResponseResource EndpointsWithoutLocalityWeight(const std::string& cluster_name,
                                                const std::string& ip, int port);

// A client Listener (api_listener) whose HttpConnectionManager (router
// filter only) gets its routes from RDS resource `route_config_name`.
ResponseResource ApiListener(const std::string& name, const std::string& route_config_name);
// The same with the RouteConfiguration inlined (RouteConfigProto's routes).
ResponseResource ApiListenerWithRoutes(const std::string& name, const std::string& domain,
                                       const std::vector<TestRoute>& routes);
// The same with any inlined RouteConfiguration (header matchers, weighted
// clusters, ...), and the HttpConnectionManager's
// common_http_protocol_options.max_stream_duration when given (A31).
ResponseResource ApiListenerWithRouteConfig(
    const std::string& name, const envoy::config::route::v3::RouteConfiguration& config,
    std::optional<std::chrono::milliseconds> max_stream_duration = std::nullopt);
// The same with the HTTP fault filter (A33) named "fault", configured by
// `fault` (a serialized envoy.extensions.filters.http.fault.v3.HTTPFault),
// before the router.
ResponseResource ApiListenerWithFaultFilter(
    const std::string& name, const envoy::config::route::v3::RouteConfiguration& config,
    const std::string& fault);
// A RouteConfiguration with one virtual host for `domain`.
ResponseResource RouteConfig(const std::string& name, const std::string& domain,
                             const std::vector<TestRoute>& routes);
// An EDS cluster with the RING_HASH LB policy (A42), ring sizes as given.
ResponseResource RingHashCluster(const std::string& name, const std::string& service_name,
                                 uint64_t min_ring_size = 1024, uint64_t max_ring_size = 4096);
// An EDS cluster whose load_balancing_policy is pick_first (A62).
ResponseResource PickFirstCluster(const std::string& name, const std::string& service_name,
                                  bool shuffle_address_list = false);
// An EDS cluster with the LEAST_REQUEST LB policy (A48).
ResponseResource LeastRequestCluster(const std::string& name, const std::string& service_name,
                                     uint32_t choice_count = 2);
// An EDS cluster whose load_balancing_policy is wrr_locality over
// ring_hash (ring_hash_child) or round_robin.
ResponseResource WrrLocalityCluster(const std::string& name, const std::string& service_name,
                                    bool ring_hash_child);
// One locality (zone z1, weight 1) with one endpoint per "ip:port".
ResponseResource EndpointsAt(const std::string& cluster_name,
                             const std::vector<std::string>& addresses);
// An aggregate cluster (A37) over `children`, in priority order.
ResponseResource AggregateCluster(const std::string& name,
                                  const std::vector<std::string>& children);
// A LOGICAL_DNS cluster resolving host:port.
ResponseResource LogicalDnsCluster(const std::string& name, const std::string& host, int port);

}  // namespace uxds::testing
