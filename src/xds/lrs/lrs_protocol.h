// The LoadReportingService messages (envoy.service.load_stats.v3, A27's
// load reporting): the requests a client sends and the responses it obeys.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/config/core/v3/base.pb.h"
#include "uxds/status.h"
#include "xds/lrs/load_stats.h"

namespace uxds::xds_internal {

inline constexpr std::string_view kLrsMethod =
    "/envoy.service.load_stats.v3.LoadReportingService/StreamLoadStats";
// gRPC announces that it obeys LoadStatsResponse.send_all_clusters.
inline constexpr std::string_view kClientFeatureLrsSendAllClusters =
    "envoy.lrs.supports_send_all_clusters";

// The first request of a stream: the node, no stats.
std::string SerializeInitialLoadStatsRequest(const envoy::config::core::v3::Node& node);
// A report: one ClusterStats per cluster.
std::string SerializeLoadStatsRequest(const std::vector<ClusterLoadReport>& reports);

struct LoadStatsResponse {
  bool send_all_clusters = false;
  std::set<std::string> clusters;  // when !send_all_clusters
  std::chrono::nanoseconds interval{0};
};
// Bounds the interval to [min_interval, max_interval] (a negative one
// becomes min_interval, as in gRPC). INVALID_ARGUMENT naming the field for
// bytes that are no LoadStatsResponse or nanos out of range; the caller
// ignores such a response and keeps the stream, as gRPC does.
StatusOr<LoadStatsResponse> ParseLoadStatsResponse(std::string_view serialized,
                                                   std::chrono::nanoseconds min_interval,
                                                   std::chrono::nanoseconds max_interval);

}  // namespace uxds::xds_internal
