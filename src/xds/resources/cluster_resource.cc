// ClusterResource's JSON summary.
#include "uxds/resources/cluster.h"
#include "xds/resources/resource_json.h"
#include "xds/resources/tls_context_parser.h"

namespace uxds {
namespace {

ResourceJson LbPolicyJson(const ClusterResource::LbPolicy& policy) {
  ResourceJson json;
  json["weighted_locality"] = policy.weighted_locality;
  if (policy.endpoint_picking == ClusterResource::LbPolicy::EndpointPicking::kRingHash) {
    json["endpoint_picking"] = "RING_HASH";
    json["min_ring_size"] = policy.min_ring_size;
    json["max_ring_size"] = policy.max_ring_size;
    if (!policy.request_hash_header.empty()) {
      json["request_hash_header"] = policy.request_hash_header;
    }
  } else if (policy.endpoint_picking == ClusterResource::LbPolicy::EndpointPicking::kPickFirst) {
    json["endpoint_picking"] = "PICK_FIRST";
    json["shuffle_address_list"] = policy.shuffle_address_list;
  } else if (policy.endpoint_picking == ClusterResource::LbPolicy::EndpointPicking::kLeastRequest) {
    json["endpoint_picking"] = "LEAST_REQUEST";
    json["choice_count"] = policy.choice_count;
  } else {
    json["endpoint_picking"] = "ROUND_ROBIN";
  }
  return json;
}

ResourceJson OutlierDetectionJson(const ClusterResource::OutlierDetection& config) {
  ResourceJson json;
  json["interval"] = DurationJson(config.interval);
  json["base_ejection_time"] = DurationJson(config.base_ejection_time);
  json["max_ejection_time"] = DurationJson(config.max_ejection_time);
  json["max_ejection_percent"] = config.max_ejection_percent;
  if (config.success_rate_ejection.has_value()) {
    const auto& ejection = *config.success_rate_ejection;
    json["success_rate_ejection"] = {{"stdev_factor", ejection.stdev_factor},
                                     {"enforcement_percentage", ejection.enforcement_percentage},
                                     {"minimum_hosts", ejection.minimum_hosts},
                                     {"request_volume", ejection.request_volume}};
  }
  if (config.failure_percentage_ejection.has_value()) {
    const auto& ejection = *config.failure_percentage_ejection;
    json["failure_percentage_ejection"] = {
        {"threshold", ejection.threshold},
        {"enforcement_percentage", ejection.enforcement_percentage},
        {"minimum_hosts", ejection.minimum_hosts},
        {"request_volume", ejection.request_volume}};
  }
  return json;
}

}  // namespace

std::string ClusterResource::ToJson() const {
  ResourceJson json;
  if (const auto* eds = std::get_if<Eds>(&type)) {
    json["type"] = "EDS";
    json["eds_service_name"] = eds->eds_service_name;
  } else if (const auto* dns = std::get_if<LogicalDns>(&type)) {
    json["type"] = "LOGICAL_DNS";
    json["dns_hostname"] = dns->hostname;
  } else {
    json["type"] = "AGGREGATE";
    json["clusters"] = std::get<Aggregate>(type).prioritized_cluster_names;
  }
  json["lb_policy"] = LbPolicyJson(lb_policy);
  json["max_concurrent_requests"] = max_concurrent_requests;
  if (lrs_server.has_value()) json["lrs_server"] = lrs_server->server_uri;
  if (outlier_detection.has_value()) {
    json["outlier_detection"] = OutlierDetectionJson(*outlier_detection);
  }
  if (upstream_tls_context.has_value()) {
    json["upstream_tls_context"] = TlsContextJson(*upstream_tls_context);
  }
  return json.dump();
}

}  // namespace uxds
