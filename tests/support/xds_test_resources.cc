#include "support/xds_test_resources.h"

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"

namespace uxds::testing {

ResponseResource ValidCluster(const std::string& name, const std::string& service_name) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name(name);
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  cluster.mutable_eds_cluster_config()->set_service_name(service_name);
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

}  // namespace uxds::testing
