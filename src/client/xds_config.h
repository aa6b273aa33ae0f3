// XdsConfig: one consistent view of every xDS resource a channel uses (A74):
// its Listener, RouteConfiguration and virtual host, and each cluster the
// routes name (with aggregate clusters expanded, A37) with its endpoints.
// Immutable once published; LB policies and the router read it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "uxds/status.h"
#include "uxds/xds_resources.h"

namespace uxds {

struct XdsConfig {
  std::shared_ptr<const ListenerResource> listener;
  // Populated whether the RouteConfiguration came from RDS or was inlined.
  std::shared_ptr<const RouteConfigResource> route_config;
  // The virtual host for the channel's authority; points into route_config.
  const RouteConfigResource::VirtualHost* virtual_host = nullptr;

  struct ClusterConfig {
    std::shared_ptr<const ClusterResource> cluster;
    // EDS and LOGICAL_DNS clusters (A37: one priority, one locality, an
    // endpoint per resolved address in the resolver's order). Without
    // endpoints (an EDS or DNS error) `endpoints` is null and the note says
    // why.
    struct EndpointConfig {
      std::shared_ptr<const EndpointResource> endpoints;
      // A88: the ambient errors of the Listener, the RouteConfiguration and
      // this cluster's own Cluster and endpoints; "xDS node ID:<id>" when
      // there are none. Failed picks put it in their status message.
      std::string resolution_note;
    };
    // Aggregate clusters (A37): the leaf clusters, depth-first in priority
    // order, each once; clusters that do not exist are left out (A74).
    struct AggregateConfig {
      std::vector<std::string> leaf_clusters;
    };
    std::variant<EndpointConfig, AggregateConfig> children;
  };
  // Every cluster the routes name, plus every cluster an aggregate cluster
  // names (directly or not). A non-OK status: the Cluster does not exist, or
  // had an error before any valid version, or its aggregate graph is too
  // deep (A37: an aggregate cluster at depth 16 fails every aggregate
  // cluster above it), or it is an aggregate cluster with no leaves.
  std::map<std::string, StatusOr<ClusterConfig>, std::less<>> clusters;
};

}  // namespace uxds
