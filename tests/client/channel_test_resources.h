// xDS resources the Channel's end-to-end tests need beyond
// tests/support/xds_test_resources.h: header routes, weighted clusters,
// endpoints in several priorities.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "support/xds_test_resources.h"

namespace uxds::testing {

// A route whose header `header` must equal `value` (A28 exact_match).
struct HeaderRoute {
  std::string header;
  std::string value;
  std::string cluster;
};

// A client Listener (inline routes, virtual host "*"): the header routes
// in order, then every other request to `default_cluster`.
ResponseResource ApiListenerWithHeaderRoutes(const std::string& name,
                                             const std::vector<HeaderRoute>& routes,
                                             const std::string& default_cluster);
// A client Listener whose one route splits calls over weighted clusters
// (cluster name, weight).
ResponseResource ApiListenerWithWeightedClusters(
    const std::string& name, const std::vector<std::pair<std::string, uint32_t>>& clusters);
// One locality (weight 1) per priority, index = priority, with one endpoint
// per "ip:port".
ResponseResource EndpointsByPriority(const std::string& cluster_name,
                                     const std::vector<std::vector<std::string>>& priorities);

}  // namespace uxds::testing
