// Real xDS resources (lite envoy protos) for tests that script the fake
// control plane: a valid EDS cluster, one that is NACKed, endpoints.
#pragma once

#include <string>

#include "support/fake_control_plane.h"

namespace uxds::testing {

inline constexpr char kCdsType[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
inline constexpr char kEdsType[] =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

// An EDS cluster whose endpoints come from ADS under `service_name`.
ResponseResource ValidCluster(const std::string& name, const std::string& service_name);
// An EDS cluster without eds_cluster_config: NACKed.
ResponseResource InvalidCluster(const std::string& name);
// One locality (zone z1, weight 1) with one endpoint ip:port.
ResponseResource Endpoints(const std::string& cluster_name, const std::string& ip, int port);

}  // namespace uxds::testing
