#include "xds_fuzz_resources.h"

#include <string>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "uxds/xds_resources.h"

namespace uxds::fuzz {
namespace {

using envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

// A client Listener (api_listener) with the router filter; `rds` empty
// leaves the HttpConnectionManager without routes: invalid.
std::string Listener(const std::string& name, const std::string& rds) {
  HttpConnectionManager hcm;
  if (!rds.empty()) {
    hcm.mutable_rds()->mutable_config_source()->mutable_ads();
    hcm.mutable_rds()->set_route_config_name(rds);
  }
  auto* router = hcm.add_http_filters();
  router->set_name("router");
  router->mutable_typed_config()->PackFrom(envoy::extensions::filters::http::router::v3::Router());
  envoy::config::listener::v3::Listener listener;
  listener.set_name(name);
  listener.mutable_api_listener()->mutable_api_listener()->PackFrom(hcm);
  return listener.SerializeAsString();
}

// An EDS cluster; without a service name it has no eds_cluster_config:
// invalid.
std::string Cluster(const std::string& name, const std::string& service_name) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name(name);
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  if (!service_name.empty()) {
    cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
    cluster.mutable_eds_cluster_config()->set_service_name(service_name);
  }
  return cluster.SerializeAsString();
}

// One locality with `copies` endpoints at 10.0.0.<host>:80; two copies of
// one address are invalid.
std::string Endpoints(const std::string& name, int host, int copies) {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name(name);
  auto* locality = assignment.add_endpoints();
  locality->mutable_locality()->set_zone("z1");
  locality->mutable_load_balancing_weight()->set_value(1);
  for (int i = 0; i < copies; ++i) {
    auto* address = locality->add_lb_endpoints()
                        ->mutable_endpoint()
                        ->mutable_address()
                        ->mutable_socket_address();
    address->set_address("10.0.0." + std::to_string(host));
    address->set_port_value(80);
  }
  return assignment.SerializeAsString();
}

}  // namespace

std::string_view TypeUrl(int type) { return ResourceType(type).type_url(); }

const XdsResourceType& ResourceType(int type) {
  switch (type) {
    case 0:
      return ListenerResourceType::Get();
    case 1:
      return ClusterResourceType::Get();
    default:
      return EndpointResourceType::Get();
  }
}

std::string PoolName(int type, int name) {
  return std::string(1, "lce"[type]) + std::to_string(name);
}

std::string UnrequestedName(int type) { return std::string(1, "lce"[type]) + "-unrequested"; }

std::string ValidResource(int type, const std::string& name, int variant) {
  switch (type) {
    case 0:
      return Listener(name, "route-" + std::to_string(variant));
    case 1:
      return Cluster(name, "service-" + std::to_string(variant));
    default:
      return Endpoints(name, variant + 1, 1);
  }
}

std::string InvalidResource(int type, const std::string& name) {
  switch (type) {
    case 0:
      return Listener(name, "");
    case 1:
      return Cluster(name, "");
    default:
      return Endpoints(name, 1, 2);
  }
}

}  // namespace uxds::fuzz
