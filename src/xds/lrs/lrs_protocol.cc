#include "xds/lrs/lrs_protocol.h"

#include <algorithm>

#include "envoy/service/load_stats/v3/lrs.pb.h"

namespace uxds::xds_internal {

namespace lrs = envoy::service::load_stats::v3;

std::string SerializeInitialLoadStatsRequest(const envoy::config::core::v3::Node& node) {
  lrs::LoadStatsRequest request;
  *request.mutable_node() = node;
  return request.SerializeAsString();
}

std::string SerializeLoadStatsRequest(const std::vector<ClusterLoadReport>& reports) {
  lrs::LoadStatsRequest request;
  for (const ClusterLoadReport& report : reports) {
    auto* stats = request.add_cluster_stats();
    stats->set_cluster_name(report.cluster_name);
    stats->set_cluster_service_name(report.eds_service_name);
    for (const ClusterLoadReport::Locality& l : report.localities) {
      auto* out = stats->add_upstream_locality_stats();
      out->mutable_locality()->set_region(l.name.region);
      out->mutable_locality()->set_zone(l.name.zone);
      out->mutable_locality()->set_sub_zone(l.name.sub_zone);
      out->set_total_successful_requests(l.succeeded);
      out->set_total_requests_in_progress(l.in_progress);
      out->set_total_error_requests(l.failed);
      out->set_total_issued_requests(l.issued);
    }
    for (const auto& [category, count] : report.dropped_by_category) {
      auto* dropped = stats->add_dropped_requests();
      dropped->set_category(category);
      dropped->set_dropped_count(count);
    }
    stats->set_total_dropped_requests(report.total_dropped);
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(report.interval);
    stats->mutable_load_report_interval()->set_seconds(seconds.count());
    stats->mutable_load_report_interval()->set_nanos(
        static_cast<int32_t>((report.interval - seconds).count()));
  }
  return request.SerializeAsString();
}

StatusOr<LoadStatsResponse> ParseLoadStatsResponse(std::string_view serialized,
                                                   std::chrono::nanoseconds min_interval,
                                                   std::chrono::nanoseconds max_interval) {
  lrs::LoadStatsResponse message;
  if (!message.ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) {
    return InvalidArgumentError("LoadStatsResponse: not a valid message");
  }
  const auto& duration = message.load_reporting_interval();
  if (duration.nanos() < -999999999 || duration.nanos() > 999999999) {
    return InvalidArgumentError(
        "LoadStatsResponse.load_reporting_interval.nanos: must be within +-999999999");
  }
  LoadStatsResponse response;
  response.send_all_clusters = message.send_all_clusters();
  if (!response.send_all_clusters) {
    response.clusters.insert(message.clusters().begin(), message.clusters().end());
  }
  // Compared in seconds first: a huge seconds value must not overflow.
  const auto max_seconds = std::chrono::duration_cast<std::chrono::seconds>(max_interval);
  if (duration.seconds() >= max_seconds.count()) {
    response.interval = max_interval;
  } else if (duration.seconds() < 0 || duration.nanos() < 0) {
    // gRPC raises an interval under its minimum, a negative one included,
    // to the minimum.
    response.interval = min_interval;
  } else {
    response.interval =
        std::chrono::seconds(duration.seconds()) + std::chrono::nanoseconds(duration.nanos());
  }
  response.interval = std::clamp(response.interval, min_interval, max_interval);
  return response;
}

}  // namespace uxds::xds_internal
