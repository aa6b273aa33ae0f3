// Cluster (CDS) decoding with gRPC's validation rules and error texts
// (A27, A37, A42, A32, A50, A29; gRPC C++ xds_cluster_parser.cc and
// xds_lb_policy_registry.cc).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/extensions/clusters/aggregate/v3/cluster.pb.h"
#include "envoy/extensions/load_balancing_policies/least_request/v3/least_request.pb.h"
#include "envoy/extensions/load_balancing_policies/pick_first/v3/pick_first.pb.h"
#include "envoy/extensions/load_balancing_policies/ring_hash/v3/ring_hash.pb.h"
#include "envoy/extensions/load_balancing_policies/wrr_locality/v3/wrr_locality.pb.h"
#include "xds/resources/field_parsers.h"
#include "xds/resources/resource_decoders.h"
#include "xds/resources/tls_context_parser.h"
#include "xds/resources/xds_extension.h"

namespace uxds {
namespace {

using envoy::config::cluster::v3::Cluster;
using LbPolicy = ClusterResource::LbPolicy;

constexpr std::string_view kAggregateClusterType =
    "envoy.extensions.clusters.aggregate.v3.ClusterConfig";
constexpr std::string_view kRingHashType =
    "envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash";
// A52: gRPC's own ring_hash policy, configured by JSON in a TypedStruct.
constexpr std::string_view kRingHashExperimentalType = "ring_hash_experimental";
constexpr std::string_view kRoundRobinType =
    "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin";
constexpr std::string_view kLeastRequestType =
    "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest";
constexpr std::string_view kPickFirstType =
    "envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst";
constexpr std::string_view kWrrLocalityType =
    "envoy.extensions.load_balancing_policies.wrr_locality.v3.WrrLocality";
// gRPC's limit on nested load_balancing_policy configs (wrr_locality).
constexpr int kMaxLbPolicyRecursionDepth = 16;

ClusterResource::Eds ParseEds(const Cluster& cluster, ValidationErrors& errors) {
  ClusterResource::Eds eds;
  auto field = errors.Scope(".eds_cluster_config");
  if (!cluster.has_eds_cluster_config()) {
    errors.Add("field not present");
    return eds;
  }
  const auto& config = cluster.eds_cluster_config();
  {
    auto eds_config_field = errors.Scope(".eds_config");
    if (!config.has_eds_config()) {
      errors.Add("field not present");
    } else if (!config.eds_config().has_ads() && !config.eds_config().has_self()) {
      // A27: EDS must come over the same ADS stream.
      errors.Add("ConfigSource is not ads or self");
    }
  }
  eds.eds_service_name = config.service_name();
  // A47: an xdstp: cluster must name its EDS resource explicitly.
  if (eds.eds_service_name.empty() && cluster.name().starts_with("xdstp:")) {
    auto service_name_field = errors.Scope(".service_name");
    errors.Add("must be set if Cluster resource has an xdstp name");
  }
  return eds;
}

ClusterResource::LogicalDns ParseLogicalDns(const Cluster& cluster, ValidationErrors& errors) {
  ClusterResource::LogicalDns logical_dns;
  auto field = errors.Scope(".load_assignment");
  if (!cluster.has_load_assignment()) {
    errors.Add("field not present for LOGICAL_DNS cluster");
    return logical_dns;
  }
  auto endpoints_field = errors.Scope(".endpoints");
  const auto& localities = cluster.load_assignment().endpoints();
  if (localities.size() != 1) {
    errors.Add("must contain exactly one locality for LOGICAL_DNS cluster, found " +
               std::to_string(localities.size()));
    return logical_dns;
  }
  auto lb_endpoints_field = errors.Scope("[0].lb_endpoints");
  const auto& lb_endpoints = localities[0].lb_endpoints();
  if (lb_endpoints.size() != 1) {
    errors.Add("must contain exactly one endpoint for LOGICAL_DNS cluster, found " +
               std::to_string(lb_endpoints.size()));
    return logical_dns;
  }
  auto endpoint_field = errors.Scope("[0].endpoint");
  if (!lb_endpoints[0].has_endpoint()) {
    errors.Add("field not present");
    return logical_dns;
  }
  const auto& endpoint = lb_endpoints[0].endpoint();
  auto address_field = errors.Scope(".address");
  if (!endpoint.has_address()) {
    errors.Add("field not present");
    return logical_dns;
  }
  auto socket_address_field = errors.Scope(".socket_address");
  if (!endpoint.address().has_socket_address()) {
    errors.Add("field not present");
    return logical_dns;
  }
  const auto& socket_address = endpoint.address().socket_address();
  if (!socket_address.resolver_name().empty()) {
    auto resolver_field = errors.Scope(".resolver_name");
    errors.Add("LOGICAL_DNS clusters must NOT have a custom resolver name set");
  }
  if (socket_address.address().empty()) {
    auto host_field = errors.Scope(".address");
    errors.Add("field not present");
  }
  if (!socket_address.has_port_value()) {
    auto port_field = errors.Scope(".port_value");
    errors.Add("field not present");
  } else if (socket_address.port_value() > 65535) {
    auto port_field = errors.Scope(".port_value");
    errors.Add("invalid port");
  }
  logical_dns.hostname = JoinHostPort(socket_address.address(), socket_address.port_value());
  return logical_dns;
}

ClusterResource::Aggregate ParseAggregate(const Cluster& cluster, ValidationErrors& errors) {
  ClusterResource::Aggregate aggregate;
  auto field = errors.Scope(".cluster_type.typed_config");
  const auto& custom_type = cluster.cluster_type();
  if (!custom_type.has_typed_config()) {
    errors.Add("field not present");
    return aggregate;
  }
  std::string_view type_url = custom_type.typed_config().type_url();
  if (type_url.starts_with("type.googleapis.com/")) type_url.remove_prefix(20);
  if (type_url != kAggregateClusterType) {
    auto type_url_field = errors.Scope(".type_url");
    errors.Add("unknown cluster_type extension: " + std::string(type_url));
    return aggregate;
  }
  auto value_field = errors.Scope(".value[" + std::string(kAggregateClusterType) + "]");
  envoy::extensions::clusters::aggregate::v3::ClusterConfig config;
  if (!ParseProto(custom_type.typed_config().value(), config)) {
    errors.Add("can't parse aggregate cluster config");
    return aggregate;
  }
  if (config.clusters().empty()) {
    auto clusters_field = errors.Scope(".clusters");
    errors.Add("must be non-empty");
  }
  aggregate.prioritized_cluster_names.assign(config.clusters().begin(), config.clusters().end());
  return aggregate;
}

// A42: min <= max, whichever of them was set. gRPC C++ checks this only when
// minimum_ring_size is set, so a lone maximum below the default minimum
// (1024) would pass there and fail later in its ring_hash policy; here it is
// a NACK that names the field that was set.
void CheckRingSizeOrder(bool minimum_set, const LbPolicy& policy, ValidationErrors& errors) {
  if (policy.min_ring_size <= policy.max_ring_size) return;
  if (minimum_set) {
    auto field = errors.Scope(".minimum_ring_size");
    errors.Add("cannot be greater than maximum_ring_size");
    return;
  }
  // Only the maximum was set, below the default minimum (a maximum of 0 is
  // reported as out of range already).
  if (policy.max_ring_size == 0) return;
  auto field = errors.Scope(".maximum_ring_size");
  errors.Add("cannot be less than minimum_ring_size (default 1024)");
}

// The legacy lb_policy enum with ring_hash_lb_config (A42).
// A48: least_request over the endpoints, with `choice_count` (if sent)
// checked at the current field: under 2 is rejected, over 10 taken as 10.
void SetLeastRequest(const google::protobuf::UInt32Value* choice_count, LbPolicy& policy,
                     ValidationErrors& errors) {
  policy.endpoint_picking = LbPolicy::EndpointPicking::kLeastRequest;
  if (choice_count == nullptr) return;
  auto field = errors.Scope(".choice_count");
  if (choice_count->value() < LbPolicy::kDefaultChoiceCount) {
    errors.Add("must be greater than or equal to 2");
    return;
  }
  policy.choice_count = std::min(choice_count->value(), LbPolicy::kMaxChoiceCount);
}

void ParseLegacyLbPolicy(const Cluster& cluster, LbPolicy& policy, ValidationErrors& errors) {
  if (cluster.lb_policy() == Cluster::ROUND_ROBIN) {
    policy = LbPolicy{};  // weighted_target over round_robin
    return;
  }
  if (cluster.lb_policy() == Cluster::LEAST_REQUEST) {
    // A48: weighted_target over least_request, as ROUND_ROBIN is over
    // round_robin; the config is optional.
    policy = LbPolicy{};
    const bool has_count = cluster.has_least_request_lb_config() &&
                           cluster.least_request_lb_config().has_choice_count();
    auto field = errors.Scope(".least_request_lb_config");
    SetLeastRequest(has_count ? &cluster.least_request_lb_config().choice_count() : nullptr, policy,
                    errors);
    return;
  }
  if (cluster.lb_policy() != Cluster::RING_HASH) {
    auto field = errors.Scope(".lb_policy");
    errors.Add("LB policy is not supported");
    return;
  }
  policy.weighted_locality = false;
  policy.endpoint_picking = LbPolicy::EndpointPicking::kRingHash;
  if (!cluster.has_ring_hash_lb_config()) return;
  auto field = errors.Scope(".ring_hash_lb_config");
  const auto& config = cluster.ring_hash_lb_config();
  if (config.has_maximum_ring_size()) {
    auto max_field = errors.Scope(".maximum_ring_size");
    policy.max_ring_size = config.maximum_ring_size().value();
    if (policy.max_ring_size == 0 || policy.max_ring_size > LbPolicy::kMaxRingSizeLimit) {
      errors.Add("must be in the range of 1 to 8388608");
    }
  }
  if (config.has_minimum_ring_size()) {
    auto min_field = errors.Scope(".minimum_ring_size");
    policy.min_ring_size = config.minimum_ring_size().value();
    if (policy.min_ring_size == 0 || policy.min_ring_size > LbPolicy::kMaxRingSizeLimit) {
      errors.Add("must be in the range of 1 to 8388608");
    }
  }
  CheckRingSizeOrder(config.has_minimum_ring_size(), policy, errors);
  if (config.hash_function() != Cluster::RingHashLbConfig::XX_HASH) {
    auto hash_field = errors.Scope(".hash_function");
    errors.Add("invalid hash function");
  }
}

void ParseRingHashPolicy(std::string_view serialized, LbPolicy& policy, ValidationErrors& errors) {
  using envoy::extensions::load_balancing_policies::ring_hash::v3::RingHash;
  RingHash config;
  if (!ParseProto(serialized, config)) {
    errors.Add("can't decode RingHash LB policy config");
    return;
  }
  policy.weighted_locality = false;
  policy.endpoint_picking = LbPolicy::EndpointPicking::kRingHash;
  if (config.hash_function() != RingHash::XX_HASH &&
      config.hash_function() != RingHash::DEFAULT_HASH) {
    auto field = errors.Scope(".hash_function");
    errors.Add("unsupported value (must be XX_HASH)");
  }
  if (config.has_maximum_ring_size()) {
    policy.max_ring_size = config.maximum_ring_size().value();
    if (policy.max_ring_size == 0 || policy.max_ring_size > LbPolicy::kMaxRingSizeLimit) {
      auto field = errors.Scope(".maximum_ring_size");
      errors.Add("value must be in the range [1, 8388608]");
    }
  }
  if (config.has_minimum_ring_size()) {
    auto field = errors.Scope(".minimum_ring_size");
    policy.min_ring_size = config.minimum_ring_size().value();
    if (policy.min_ring_size == 0 || policy.min_ring_size > LbPolicy::kMaxRingSizeLimit) {
      errors.Add("value must be in the range [1, 8388608]");
    }
  }
  CheckRingSizeOrder(config.has_minimum_ring_size(), policy, errors);
}

// A uint64 field of a JSON LB policy config, read as gRPC's JSON loader
// reads one: a number or a string holding one. Errors at the current field.
std::optional<uint64_t> JsonUnsigned(const google::protobuf::Value& value,
                                     ValidationErrors& errors) {
  if (value.kind_case() == google::protobuf::Value::kNumberValue) {
    const double n = value.number_value();
    // Struct numbers are doubles: whole ones below 2^64 only.
    if (n >= 0 && n < 18446744073709551616.0 && std::floor(n) == n) {
      return static_cast<uint64_t>(n);
    }
  } else if (value.kind_case() == google::protobuf::Value::kStringValue) {
    const std::string& text = value.string_value();
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (!text.empty() && ec == std::errc() && end == text.data() + text.size()) return n;
  } else {
    errors.Add("is not a number");
    return std::nullopt;
  }
  errors.Add("failed to parse non-negative number");
  return std::nullopt;
}

// A76 (gRPC's header-name rule): lower-case letters, digits, '-', '_', '.';
// not a binary (-bin) header, whose value the picker could not hash as text.
void CheckRequestHashHeader(const std::string& header, ValidationErrors& errors) {
  if (header.empty()) return;  // not set: the route's hash policies decide
  for (char c : header) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) {
      errors.Add("header key \"" + header + "\" contains illegal characters not in [0-9a-z-_.]");
      return;
    }
  }
  if (header.ends_with("-bin")) errors.Add("key must not end with \"-bin\"");
}

// A52 + A42/A76: ring_hash_experimental's JSON config as gRPC C++ loads it
// (minRingSize default 1024, maxRingSize default 4096, requestHashHeader),
// with its error text nested under the TypedStruct's field.
void ParseRingHashExperimentalPolicy(const google::protobuf::Struct& config, LbPolicy& policy,
                                     ValidationErrors& errors) {
  policy.weighted_locality = false;
  policy.endpoint_picking = LbPolicy::EndpointPicking::kRingHash;
  // Without xDS defaults: a JSON config's maximum is 4096 (A42).
  policy.min_ring_size = 1024;
  policy.max_ring_size = 4096;
  ValidationErrors json_errors;
  const auto& fields = config.fields();
  for (const auto& [name, size] : {std::pair{"minRingSize", &policy.min_ring_size},
                                   std::pair{"maxRingSize", &policy.max_ring_size}}) {
    auto field = json_errors.Scope(std::string(".") + name);
    auto it = fields.find(name);
    if (it != fields.end()) {
      if (std::optional<uint64_t> n = JsonUnsigned(it->second, json_errors)) *size = *n;
    }
    if (!json_errors.FieldHasErrors() && (*size == 0 || *size > LbPolicy::kMaxRingSizeLimit)) {
      json_errors.Add("must be in the range [1, 8388608]");
    }
  }
  if (policy.min_ring_size > policy.max_ring_size) {
    json_errors.Add("maxRingSize cannot be smaller than minRingSize");
  }
  if (auto it = fields.find("requestHashHeader"); it != fields.end()) {
    auto field = json_errors.Scope(".requestHashHeader");
    if (it->second.kind_case() != google::protobuf::Value::kStringValue) {
      json_errors.Add("is not a string");
    } else {
      policy.request_hash_header = it->second.string_value();
      CheckRequestHashHeader(policy.request_hash_header, json_errors);
    }
  }
  if (!json_errors.ok()) {
    errors.Add(json_errors.Message("errors validating ring_hash LB policy config"));
  }
}

// load_balancing_policy: the first policy of a supported type wins; types we
// do not know are skipped (gRPC's rule). Nullopt if none is usable.
std::optional<LbPolicy> ConvertLbPolicy(const envoy::config::cluster::v3::LoadBalancingPolicy& lb,
                                        ValidationErrors& errors, int depth) {
  if (depth >= kMaxLbPolicyRecursionDepth) {
    errors.Add("exceeded max recursion depth of " + std::to_string(kMaxLbPolicyRecursionDepth));
    return std::nullopt;
  }
  const size_t errors_before = errors.size();
  for (int i = 0; i < lb.policies_size(); ++i) {
    auto field = errors.Scope(".policies[" + std::to_string(i) + "].typed_extension_config");
    const auto& policy = lb.policies(i);
    if (!policy.has_typed_extension_config()) {
      errors.Add("field not present");
      return std::nullopt;
    }
    auto typed_config_field = errors.Scope(".typed_config");
    const auto& typed_extension_config = policy.typed_extension_config();
    XdsExtension extension;
    if (!ExtractXdsExtension(typed_extension_config.has_typed_config()
                                 ? &typed_extension_config.typed_config()
                                 : nullptr,
                             errors, extension)) {
      return std::nullopt;
    }
    LbPolicy result;
    // A TypedStruct names a custom policy by JSON config (A52); gRPC C++
    // takes those only for policies registered by that name: of them, uxds
    // has ring_hash_experimental (A76's way to set request_hash_header).
    if (extension.typed_struct.has_value()) {
      if (extension.type != kRingHashExperimentalType) continue;
      ParseRingHashExperimentalPolicy(extension.typed_struct->value(), result, errors);
      return result;
    }
    if (extension.type == kRingHashType) {
      ParseRingHashPolicy(extension.serialized_value, result, errors);
      return result;
    }
    if (extension.type == kRoundRobinType) {
      // Bare round_robin: every endpoint of a priority in one rotation.
      result.weighted_locality = false;
      return result;
    }
    if (extension.type == kPickFirstType) {
      // A62: pick_first picks among every endpoint of a priority, in the
      // order of its localities and their endpoints (shuffled if asked).
      envoy::extensions::load_balancing_policies::pick_first::v3::PickFirst config;
      if (!ParseProto(extension.serialized_value, config)) {
        errors.Add("can't decode PickFirst LB policy config");
        return result;
      }
      result.weighted_locality = false;
      result.endpoint_picking = LbPolicy::EndpointPicking::kPickFirst;
      result.shuffle_address_list = config.shuffle_address_list();
      return result;
    }
    if (extension.type == kLeastRequestType) {
      // A48 through A52: bare, one least_request over every endpoint of a
      // priority; inside wrr_locality, one per locality.
      envoy::extensions::load_balancing_policies::least_request::v3::LeastRequest config;
      if (!ParseProto(extension.serialized_value, config)) {
        errors.Add("can't decode LeastRequest LB policy config");
        return result;
      }
      result.weighted_locality = false;
      SetLeastRequest(config.has_choice_count() ? &config.choice_count() : nullptr, result, errors);
      return result;
    }
    if (extension.type == kWrrLocalityType) {
      envoy::extensions::load_balancing_policies::wrr_locality::v3::WrrLocality config;
      if (!ParseProto(extension.serialized_value, config)) {
        errors.Add("can't decode WrrLocality LB policy config");
        return result;
      }
      auto child_field = errors.Scope(".endpoint_picking_policy");
      if (!config.has_endpoint_picking_policy()) {
        errors.Add("field not present");
        return result;
      }
      auto child = ConvertLbPolicy(config.endpoint_picking_policy(), errors, depth + 1);
      if (!child.has_value()) return result;
      // wrr_locality picks the locality; nesting it twice changes nothing.
      child->weighted_locality = true;
      return child;
    }
  }
  if (errors.size() == errors_before) errors.Add("no supported load balancing policy config found");
  return std::nullopt;
}

void ParseLbPolicy(const Cluster& cluster, LbPolicy& policy, ValidationErrors& errors) {
  // The newer load_balancing_policy field wins over lb_policy.
  if (!cluster.has_load_balancing_policy()) {
    ParseLegacyLbPolicy(cluster, policy, errors);
    return;
  }
  auto field = errors.Scope(".load_balancing_policy");
  auto converted = ConvertLbPolicy(cluster.load_balancing_policy(), errors, 0);
  if (converted.has_value()) policy = *converted;
}

// A32: max_requests of the first DEFAULT-priority threshold, else 1024.
uint32_t ParseMaxConcurrentRequests(const Cluster& cluster) {
  for (const auto& threshold : cluster.circuit_breakers().thresholds()) {
    if (threshold.priority() != envoy::config::core::v3::DEFAULT) continue;
    if (threshold.has_max_requests()) return threshold.max_requests().value();
    break;
  }
  return ClusterResource::kDefaultMaxConcurrentRequests;
}

uint32_t CheckPercentage(uint32_t value, std::string_view field_name, ValidationErrors& errors) {
  if (value > 100) {
    auto field = errors.Scope(field_name);
    errors.Add("value must be <= 100");
  }
  return value;
}

// A50, as gRPC reads it.
ClusterResource::OutlierDetection ParseOutlierDetection(
    const envoy::config::cluster::v3::OutlierDetection& proto, ValidationErrors& errors) {
  ClusterResource::OutlierDetection config;
  if (proto.has_interval()) {
    auto field = errors.Scope(".interval");
    config.interval = ParseDuration(proto.interval(), errors);
  }
  if (proto.has_base_ejection_time()) {
    auto field = errors.Scope(".base_ejection_time");
    config.base_ejection_time = ParseDuration(proto.base_ejection_time(), errors);
  }
  if (proto.has_max_ejection_time()) {
    auto field = errors.Scope(".max_ejection_time");
    config.max_ejection_time = ParseDuration(proto.max_ejection_time(), errors);
  }
  if (proto.has_max_ejection_percent()) {
    config.max_ejection_percent =
        CheckPercentage(proto.max_ejection_percent().value(), ".max_ejection_percent", errors);
  }
  if (proto.has_enforcing_success_rate()) {
    const uint32_t enforcement =
        CheckPercentage(proto.enforcing_success_rate().value(), ".enforcing_success_rate", errors);
    if (enforcement != 0) {
      auto& ejection = config.success_rate_ejection.emplace(
          ClusterResource::OutlierDetection::SuccessRateEjection{});
      ejection.enforcement_percentage = enforcement;
      if (proto.has_success_rate_minimum_hosts()) {
        ejection.minimum_hosts = proto.success_rate_minimum_hosts().value();
      }
      if (proto.has_success_rate_request_volume()) {
        ejection.request_volume = proto.success_rate_request_volume().value();
      }
      if (proto.has_success_rate_stdev_factor()) {
        ejection.stdev_factor = proto.success_rate_stdev_factor().value();
      }
    }
  }
  if (proto.has_enforcing_failure_percentage()) {
    const uint32_t enforcement = CheckPercentage(proto.enforcing_failure_percentage().value(),
                                                 ".enforcing_failure_percentage", errors);
    if (enforcement != 0) {
      auto& ejection = config.failure_percentage_ejection.emplace(
          ClusterResource::OutlierDetection::FailurePercentageEjection{});
      ejection.enforcement_percentage = enforcement;
      if (proto.has_failure_percentage_minimum_hosts()) {
        ejection.minimum_hosts = proto.failure_percentage_minimum_hosts().value();
      }
      if (proto.has_failure_percentage_request_volume()) {
        ejection.request_volume = proto.failure_percentage_request_volume().value();
      }
      if (proto.has_failure_percentage_threshold()) {
        // A50 bounds the threshold itself (gRPC C++ checks the enforcement
        // percentage here by mistake).
        ejection.threshold = CheckPercentage(proto.failure_percentage_threshold().value(),
                                             ".failure_percentage_threshold", errors);
      }
    }
  }
  return config;
}

StatusOr<ClusterResource> ParseCluster(const XdsDecodeContext& context, const Cluster& cluster) {
  ClusterResource resource;
  ValidationErrors errors;
  if (cluster.type() == Cluster::EDS) {
    resource.type = ParseEds(cluster, errors);
  } else if (cluster.type() == Cluster::LOGICAL_DNS) {
    resource.type = ParseLogicalDns(cluster, errors);
  } else if (cluster.has_cluster_type()) {
    resource.type = ParseAggregate(cluster, errors);
  } else {
    auto field = errors.Scope(".type");
    errors.Add("unknown discovery type");
  }
  ParseLbPolicy(cluster, resource.lb_policy, errors);
  if (cluster.has_lrs_server()) {
    if (!cluster.lrs_server().has_self()) {
      auto field = errors.Scope(".lrs_server");
      errors.Add("ConfigSource is not self");
    }
    resource.lrs_server = context.server;
  }
  if (cluster.has_circuit_breakers()) {
    resource.max_concurrent_requests = ParseMaxConcurrentRequests(cluster);
  }
  if (cluster.has_outlier_detection()) {
    auto field = errors.Scope(".outlier_detection");
    resource.outlier_detection = ParseOutlierDetection(cluster.outlier_detection(), errors);
  }
  if (cluster.has_transport_socket()) {
    auto field = errors.Scope(".transport_socket");
    resource.upstream_tls_context =
        ParseUpstreamTlsContext(context, cluster.transport_socket(), errors);
  }
  if (!errors.ok()) return errors.ToStatus("errors validating Cluster resource");
  return resource;
}

}  // namespace

DecodedResource<ClusterResource> DecodeCluster(const XdsDecodeContext& context,
                                               std::string_view serialized) {
  Cluster cluster;
  if (!ParseProto(serialized, cluster)) {
    return {std::nullopt, InvalidArgumentError("Can't parse Cluster resource.")};
  }
  return {cluster.name(), ParseCluster(context, cluster)};
}

}  // namespace uxds
