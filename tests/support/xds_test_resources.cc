#include "support/xds_test_resources.h"

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/clusters/aggregate/v3/cluster.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/extensions/load_balancing_policies/pick_first/v3/pick_first.pb.h"
#include "envoy/extensions/load_balancing_policies/ring_hash/v3/ring_hash.pb.h"
#include "envoy/extensions/load_balancing_policies/round_robin/v3/round_robin.pb.h"
#include "envoy/extensions/load_balancing_policies/wrr_locality/v3/wrr_locality.pb.h"
#include "envoy/extensions/transport_sockets/tls/v3/tls.pb.h"

namespace uxds::testing {
namespace {

// An EDS cluster whose endpoints come from ADS under `service_name`.
envoy::config::cluster::v3::Cluster EdsCluster(const std::string& name,
                                               const std::string& service_name) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name(name);
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  cluster.mutable_eds_cluster_config()->set_service_name(service_name);
  return cluster;
}

}  // namespace

ResponseResource ValidCluster(const std::string& name, const std::string& service_name) {
  envoy::config::cluster::v3::Cluster cluster = EdsCluster(name, service_name);
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

ResponseResource SecureCluster(const std::string& name, const std::string& service_name,
                               const std::string& ca_instance, const std::string& identity_instance,
                               const std::vector<std::string>& san_matchers) {
  envoy::config::cluster::v3::Cluster cluster = EdsCluster(name, service_name);
  envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext tls;
  auto* common = tls.mutable_common_tls_context();
  auto* validation = common->mutable_validation_context();
  validation->mutable_ca_certificate_provider_instance()->set_instance_name(ca_instance);
  for (const std::string& matcher : san_matchers) {
    const size_t colon = matcher.find(':');
    const std::string kind = matcher.substr(0, colon);
    const std::string value = matcher.substr(colon + 1);
    auto* m = validation->add_match_subject_alt_names();
    if (kind == "exact") m->set_exact(value);
    if (kind == "prefix") m->set_prefix(value);
    if (kind == "suffix") m->set_suffix(value);
    if (kind == "contains") m->set_contains(value);
  }
  if (!identity_instance.empty()) {
    common->mutable_tls_certificate_provider_instance()->set_instance_name(identity_instance);
  }
  auto* socket = cluster.mutable_transport_socket();
  socket->set_name("envoy.transport_sockets.tls");
  socket->mutable_typed_config()->set_type_url(
      "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext");
  socket->mutable_typed_config()->set_value(tls.SerializeAsString());
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

ResponseResource InvalidCluster(const std::string& name) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name(name);
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

ResponseResource Endpoints(const std::string& cluster_name, const std::string& ip, int port) {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name(cluster_name);
  auto* locality = assignment.add_endpoints();
  locality->mutable_locality()->set_zone("z1");
  locality->mutable_load_balancing_weight()->set_value(1);
  auto* address =
      locality->add_lb_endpoints()->mutable_endpoint()->mutable_address()->mutable_socket_address();
  address->set_address(ip);
  address->set_port_value(port);
  return ResponseResource(kEdsType, assignment.SerializeAsString());
}

ResponseResource EndpointsWithoutLocalityWeight(const std::string& cluster_name,
                                                const std::string& ip, int port) {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name(cluster_name);
  auto* locality = assignment.add_endpoints();
  locality->mutable_locality()->set_zone("z1");
  auto* address =
      locality->add_lb_endpoints()->mutable_endpoint()->mutable_address()->mutable_socket_address();
  address->set_address(ip);
  address->set_port_value(port);
  return ResponseResource(kEdsType, assignment.SerializeAsString());
}

namespace {

using envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

void FillRouteConfig(envoy::config::route::v3::RouteConfiguration& config, const std::string& name,
                     const std::string& domain, const std::vector<TestRoute>& routes) {
  config.set_name(name);
  auto* vhost = config.add_virtual_hosts();
  vhost->set_name("vhost");
  vhost->add_domains(domain);
  for (const TestRoute& route : routes) {
    auto* added = vhost->add_routes();
    added->mutable_match()->set_prefix(route.prefix);
    added->mutable_route()->set_cluster(route.cluster);
    if (!route.hash_header.empty()) {
      added->mutable_route()->add_hash_policy()->mutable_header()->set_header_name(
          route.hash_header);
    }
  }
}

ResponseResource ListenerWith(const std::string& name, const HttpConnectionManager& hcm) {
  HttpConnectionManager with_router = hcm;
  auto* router = with_router.add_http_filters();
  router->set_name("router");
  router->mutable_typed_config()->PackFrom(envoy::extensions::filters::http::router::v3::Router());
  envoy::config::listener::v3::Listener listener;
  listener.set_name(name);
  listener.mutable_api_listener()->mutable_api_listener()->PackFrom(with_router);
  return ResponseResource(kLdsType, listener.SerializeAsString());
}

}  // namespace

ResponseResource ApiListener(const std::string& name, const std::string& route_config_name) {
  HttpConnectionManager hcm;
  hcm.mutable_rds()->mutable_config_source()->mutable_ads();
  hcm.mutable_rds()->set_route_config_name(route_config_name);
  return ListenerWith(name, hcm);
}

ResponseResource ApiListenerWithRoutes(const std::string& name, const std::string& domain,
                                       const std::vector<TestRoute>& routes) {
  HttpConnectionManager hcm;
  FillRouteConfig(*hcm.mutable_route_config(), name + "-routes", domain, routes);
  return ListenerWith(name, hcm);
}

ResponseResource ApiListenerWithRouteConfig(
    const std::string& name, const envoy::config::route::v3::RouteConfiguration& config,
    std::optional<std::chrono::milliseconds> max_stream_duration) {
  HttpConnectionManager hcm;
  *hcm.mutable_route_config() = config;
  if (max_stream_duration.has_value()) {
    auto* duration = hcm.mutable_common_http_protocol_options()->mutable_max_stream_duration();
    duration->set_seconds(max_stream_duration->count() / 1000);
    duration->set_nanos(static_cast<int32_t>(max_stream_duration->count() % 1000 * 1000000));
  }
  return ListenerWith(name, hcm);
}

ResponseResource ApiListenerWithFaultFilter(
    const std::string& name, const envoy::config::route::v3::RouteConfiguration& config,
    const std::string& fault) {
  HttpConnectionManager hcm;
  *hcm.mutable_route_config() = config;
  auto* filter = hcm.add_http_filters();
  filter->set_name("fault");
  filter->mutable_typed_config()->set_type_url(
      "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault");
  filter->mutable_typed_config()->set_value(fault);
  return ListenerWith(name, hcm);
}

ResponseResource RouteConfig(const std::string& name, const std::string& domain,
                             const std::vector<TestRoute>& routes) {
  envoy::config::route::v3::RouteConfiguration config;
  FillRouteConfig(config, name, domain, routes);
  return ResponseResource(kRdsType, config.SerializeAsString());
}

ResponseResource RingHashCluster(const std::string& name, const std::string& service_name,
                                 uint64_t min_ring_size, uint64_t max_ring_size) {
  envoy::config::cluster::v3::Cluster cluster = EdsCluster(name, service_name);
  cluster.set_lb_policy(envoy::config::cluster::v3::Cluster::RING_HASH);
  cluster.mutable_ring_hash_lb_config()->mutable_minimum_ring_size()->set_value(min_ring_size);
  cluster.mutable_ring_hash_lb_config()->mutable_maximum_ring_size()->set_value(max_ring_size);
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

ResponseResource EndpointsAt(const std::string& cluster_name,
                             const std::vector<std::string>& addresses) {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name(cluster_name);
  auto* locality = assignment.add_endpoints();
  locality->mutable_locality()->set_zone("z1");
  locality->mutable_load_balancing_weight()->set_value(1);
  for (const std::string& host_port : addresses) {
    const size_t colon = host_port.rfind(':');
    auto* address = locality->add_lb_endpoints()
                        ->mutable_endpoint()
                        ->mutable_address()
                        ->mutable_socket_address();
    address->set_address(host_port.substr(0, colon));
    address->set_port_value(static_cast<uint32_t>(std::stoul(host_port.substr(colon + 1))));
  }
  return ResponseResource(kEdsType, assignment.SerializeAsString());
}

ResponseResource AggregateCluster(const std::string& name,
                                  const std::vector<std::string>& children) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name(name);
  envoy::extensions::clusters::aggregate::v3::ClusterConfig config;
  for (const std::string& child : children) config.add_clusters(child);
  cluster.mutable_cluster_type()->set_name("envoy.clusters.aggregate");
  cluster.mutable_cluster_type()->mutable_typed_config()->PackFrom(config);
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

ResponseResource WrrLocalityCluster(const std::string& name, const std::string& service_name,
                                    bool ring_hash_child) {
  envoy::config::cluster::v3::Cluster cluster = EdsCluster(name, service_name);
  envoy::extensions::load_balancing_policies::wrr_locality::v3::WrrLocality wrr;
  auto* child =
      wrr.mutable_endpoint_picking_policy()->add_policies()->mutable_typed_extension_config();
  if (ring_hash_child) {
    child->set_name("ring_hash");
    envoy::extensions::load_balancing_policies::ring_hash::v3::RingHash ring;
    ring.mutable_minimum_ring_size()->set_value(1024);
    child->mutable_typed_config()->PackFrom(ring);
  } else {
    child->set_name("round_robin");
    child->mutable_typed_config()->PackFrom(
        envoy::extensions::load_balancing_policies::round_robin::v3::RoundRobin());
  }
  auto* policy =
      cluster.mutable_load_balancing_policy()->add_policies()->mutable_typed_extension_config();
  policy->set_name("wrr_locality");
  policy->mutable_typed_config()->PackFrom(wrr);
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

ResponseResource PickFirstCluster(const std::string& name, const std::string& service_name,
                                  bool shuffle_address_list) {
  envoy::config::cluster::v3::Cluster cluster = EdsCluster(name, service_name);
  envoy::extensions::load_balancing_policies::pick_first::v3::PickFirst pick_first;
  pick_first.set_shuffle_address_list(shuffle_address_list);
  auto* policy =
      cluster.mutable_load_balancing_policy()->add_policies()->mutable_typed_extension_config();
  policy->set_name("pick_first");
  policy->mutable_typed_config()->PackFrom(pick_first);
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

ResponseResource LeastRequestCluster(const std::string& name, const std::string& service_name,
                                     uint32_t choice_count) {
  envoy::config::cluster::v3::Cluster cluster = EdsCluster(name, service_name);
  cluster.set_lb_policy(envoy::config::cluster::v3::Cluster::LEAST_REQUEST);
  cluster.mutable_least_request_lb_config()->mutable_choice_count()->set_value(choice_count);
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

ResponseResource LogicalDnsCluster(const std::string& name, const std::string& host, int port) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name(name);
  cluster.set_type(envoy::config::cluster::v3::Cluster::LOGICAL_DNS);
  auto* address = cluster.mutable_load_assignment()
                      ->add_endpoints()
                      ->add_lb_endpoints()
                      ->mutable_endpoint()
                      ->mutable_address()
                      ->mutable_socket_address();
  address->set_address(host);
  address->set_port_value(port);
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

}  // namespace uxds::testing
