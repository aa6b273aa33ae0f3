#include "channel_test_resources.h"

#include "envoy/config/endpoint/v3/endpoint.pb.h"

namespace uxds::testing {

namespace {

envoy::config::route::v3::RouteConfiguration RoutesFor(const std::string& name) {
  envoy::config::route::v3::RouteConfiguration config;
  config.set_name(name + "-routes");
  auto* vhost = config.add_virtual_hosts();
  vhost->set_name("vhost");
  vhost->add_domains("*");
  return config;
}

}  // namespace

ResponseResource ApiListenerWithHeaderRoutes(const std::string& name,
                                             const std::vector<HeaderRoute>& routes,
                                             const std::string& default_cluster) {
  envoy::config::route::v3::RouteConfiguration config = RoutesFor(name);
  auto* vhost = config.mutable_virtual_hosts(0);
  for (const HeaderRoute& route : routes) {
    auto* added = vhost->add_routes();
    added->mutable_match()->set_prefix("");
    auto* header = added->mutable_match()->add_headers();
    header->set_name(route.header);
    header->set_exact_match(route.value);
    added->mutable_route()->set_cluster(route.cluster);
  }
  auto* fallback = vhost->add_routes();
  fallback->mutable_match()->set_prefix("");
  fallback->mutable_route()->set_cluster(default_cluster);
  return ApiListenerWithRouteConfig(name, config);
}

ResponseResource ApiListenerWithWeightedClusters(
    const std::string& name, const std::vector<std::pair<std::string, uint32_t>>& clusters) {
  envoy::config::route::v3::RouteConfiguration config = RoutesFor(name);
  auto* route = config.mutable_virtual_hosts(0)->add_routes();
  route->mutable_match()->set_prefix("");
  for (const auto& [cluster, weight] : clusters) {
    auto* entry = route->mutable_route()->mutable_weighted_clusters()->add_clusters();
    entry->set_name(cluster);
    entry->mutable_weight()->set_value(weight);
  }
  return ApiListenerWithRouteConfig(name, config);
}

ResponseResource EndpointsByPriority(const std::string& cluster_name,
                                     const std::vector<std::vector<std::string>>& priorities) {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name(cluster_name);
  for (size_t priority = 0; priority < priorities.size(); ++priority) {
    auto* locality = assignment.add_endpoints();
    locality->mutable_locality()->set_zone("z" + std::to_string(priority));
    locality->mutable_load_balancing_weight()->set_value(1);
    locality->set_priority(static_cast<uint32_t>(priority));
    for (const std::string& host_port : priorities[priority]) {
      const size_t colon = host_port.rfind(':');
      auto* address = locality->add_lb_endpoints()
                          ->mutable_endpoint()
                          ->mutable_address()
                          ->mutable_socket_address();
      address->set_address(host_port.substr(0, colon));
      address->set_port_value(static_cast<uint32_t>(std::stoul(host_port.substr(colon + 1))));
    }
  }
  return ResponseResource(kEdsType, assignment.SerializeAsString());
}

}  // namespace uxds::testing
