// ClusterLoadAssignment (EDS) decoding with gRPC's validation rules and error
// texts (A27, A61, A76; gRPC C++ xds_endpoint_parser.cc).
#include <limits>
#include <map>
#include <set>
#include <string>

#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "xds/resources/field_parsers.h"
#include "xds/resources/resource_decoders.h"

namespace uxds {
namespace {

using envoy::config::endpoint::v3::ClusterLoadAssignment;
using envoy::config::endpoint::v3::LbEndpoint;
using envoy::config::endpoint::v3::LocalityLbEndpoints;
using HealthStatus = EndpointResource::HealthStatus;

// A gap report per missing priority is capped: a priority of 4 billion must
// not cost 4 billion messages.
constexpr int kMaxPriorityGapReports = 8;

// "ipv4:10.0.0.1:443" / "ipv6:[::1]:443", the URI form gRPC prints.
std::string AddressUri(const std::string& ip_port) {
  return (ip_port.front() == '[' ? "ipv6:" : "ipv4:") + ip_port;
}

std::optional<HealthStatus> ToHealthStatus(int value) {
  if (value < 0 || value > static_cast<int>(HealthStatus::kDegraded)) return std::nullopt;
  return static_cast<HealthStatus>(value);
}

// gRPC C++ validates and uses UNKNOWN, HEALTHY and DRAINING endpoints and
// skips the others without looking at them. uxds keeps those others too,
// marked by their status, but like gRPC they cannot make the resource
// invalid and take no part in the duplicate-address check.
bool ValidatedStatus(HealthStatus status) {
  return status == HealthStatus::kUnknown || status == HealthStatus::kHealthy ||
         status == HealthStatus::kDraining;
}

std::string HashKeyFromMetadata(const LbEndpoint& lb_endpoint) {
  // A76: filter_metadata["envoy.lb"].hash_key, when it is a string.
  const auto& filters = lb_endpoint.metadata().filter_metadata();
  auto lb = filters.find("envoy.lb");
  if (lb == filters.end()) return "";
  auto key = lb->second.fields().find("hash_key");
  if (key == lb->second.fields().end() || !key->second.has_string_value()) return "";
  return key->second.string_value();
}

std::optional<EndpointResource::Endpoint> ParseEndpoint(const LbEndpoint& lb_endpoint,
                                                        ValidationErrors& errors) {
  EndpointResource::Endpoint endpoint;
  endpoint.health_status = *ToHealthStatus(lb_endpoint.health_status());
  if (lb_endpoint.has_load_balancing_weight()) {
    endpoint.weight = lb_endpoint.load_balancing_weight().value();
    if (endpoint.weight == 0) {
      auto field = errors.Scope(".load_balancing_weight");
      errors.Add("must be greater than 0");
    }
  }
  endpoint.hash_key = HashKeyFromMetadata(lb_endpoint);
  auto field = errors.Scope(".endpoint");
  if (!lb_endpoint.has_endpoint()) {
    errors.Add("field not present");
    return std::nullopt;
  }
  const auto& proto = lb_endpoint.endpoint();
  {
    auto address_field = errors.Scope(".address");
    auto address = ParseEndpointAddress(proto.has_address() ? &proto.address() : nullptr, errors);
    if (address.has_value()) endpoint.addresses.push_back(std::move(*address));
  }
  // A61: more addresses of the same endpoint.
  for (int i = 0; i < proto.additional_addresses_size(); ++i) {
    auto address_field = errors.Scope(".additional_addresses[" + std::to_string(i) + "].address");
    const auto& additional = proto.additional_addresses(i);
    auto address =
        ParseEndpointAddress(additional.has_address() ? &additional.address() : nullptr, errors);
    if (address.has_value()) endpoint.addresses.push_back(std::move(*address));
  }
  endpoint.hostname = proto.hostname();
  if (endpoint.addresses.empty()) return std::nullopt;
  return endpoint;
}

struct ParsedLocality {
  uint32_t priority = 0;
  EndpointResource::Locality locality;
};

std::optional<ParsedLocality> ParseLocality(const LocalityLbEndpoints& proto,
                                            std::set<std::string>& addresses_seen,
                                            ValidationErrors& errors) {
  const size_t errors_before = errors.size();
  ParsedLocality parsed;
  // A27: a locality without a weight (or weight 0) gets no traffic: skip it.
  parsed.locality.weight =
      proto.has_load_balancing_weight() ? proto.load_balancing_weight().value() : 0;
  if (parsed.locality.weight == 0) return std::nullopt;
  if (!proto.has_locality()) {
    auto field = errors.Scope(".locality");
    errors.Add("field not present");
    return std::nullopt;
  }
  parsed.locality.name = {proto.locality().region(), proto.locality().zone(),
                          proto.locality().sub_zone()};
  for (int i = 0; i < proto.lb_endpoints_size(); ++i) {
    auto field = errors.Scope(".lb_endpoints[" + std::to_string(i) + "]");
    const auto& lb_endpoint = proto.lb_endpoints(i);
    auto status = ToHealthStatus(lb_endpoint.health_status());
    if (!status.has_value()) continue;  // a status this client does not know
    if (!ValidatedStatus(*status)) {
      ValidationErrors ignored;
      auto endpoint = ParseEndpoint(lb_endpoint, ignored);
      if (endpoint.has_value() && ignored.ok()) {
        parsed.locality.endpoints.push_back(std::move(*endpoint));
      }
      continue;
    }
    auto endpoint = ParseEndpoint(lb_endpoint, errors);
    if (!endpoint.has_value()) continue;
    // A27: an address is unique across the whole resource.
    for (const auto& address : endpoint->addresses) {
      if (!addresses_seen.insert(address).second) {
        errors.Add("duplicate endpoint address \"" + AddressUri(address) + "\"");
      }
    }
    parsed.locality.endpoints.push_back(std::move(*endpoint));
  }
  parsed.priority = proto.priority();
  if (errors.size() != errors_before) return std::nullopt;
  return parsed;
}

void ParseDropOverload(const ClusterLoadAssignment::Policy::DropOverload& proto,
                       std::vector<EndpointResource::DropCategory>& drops,
                       ValidationErrors& errors) {
  EndpointResource::DropCategory drop;
  drop.category = proto.category();
  if (drop.category.empty()) {
    auto field = errors.Scope(".category");
    errors.Add("empty drop category name");
  }
  auto field = errors.Scope(".drop_percentage");
  if (!proto.has_drop_percentage()) {
    errors.Add("field not present");
    return;
  }
  drop.requests_per_million = ParseFractionPerMillion(proto.drop_percentage(), errors);
  drops.push_back(std::move(drop));
}

StatusOr<EndpointResource> ParseEndpointResource(const ClusterLoadAssignment& proto) {
  EndpointResource resource;
  ValidationErrors errors;
  {
    auto field = errors.Scope("endpoints");
    std::set<std::string> addresses_seen;
    std::map<uint32_t, std::map<LocalityName, EndpointResource::Locality>> priorities;
    for (int i = 0; i < proto.endpoints_size(); ++i) {
      auto index_field = errors.Scope("[" + std::to_string(i) + "]");
      const LocalityLbEndpoints& locality = proto.endpoints(i);
      if (!locality.has_load_balancing_weight() || locality.load_balancing_weight().value() == 0) {
        // A27: ignored (ParseLocality skips it); remembered for the note.
        resource.localities_without_weight.push_back({locality.locality().region(),
                                                      locality.locality().zone(),
                                                      locality.locality().sub_zone()});
      }
      auto parsed = ParseLocality(locality, addresses_seen, errors);
      if (!parsed.has_value()) continue;
      auto& localities = priorities[parsed->priority];
      auto name = parsed->locality.name;
      if (!localities.emplace(name, std::move(parsed->locality)).second) {
        errors.Add("duplicate locality " + name.ToString() + " found in priority " +
                   std::to_string(parsed->priority));
      }
    }
    // A27: priorities are contiguous from 0.
    uint64_t expected = 0;
    int gap_reports = 0;
    for (auto& [priority, localities] : priorities) {
      for (; expected < priority && gap_reports < kMaxPriorityGapReports; ++expected) {
        errors.Add("priority " + std::to_string(expected) + " empty");
        ++gap_reports;
      }
      expected = uint64_t{priority} + 1;
      uint64_t total_weight = 0;
      for (const auto& [name, locality] : localities) total_weight += locality.weight;
      if (total_weight > std::numeric_limits<uint32_t>::max()) {
        errors.Add("sum of locality weights for priority " + std::to_string(priority) +
                   " exceeds uint32 max");
      }
      if (!errors.ok()) continue;
      EndpointResource::Priority& out = resource.priorities.emplace_back();
      for (auto& [name, locality] : localities) out.localities.push_back(std::move(locality));
    }
  }
  if (proto.has_policy()) {
    auto field = errors.Scope("policy");
    const auto& drops = proto.policy().drop_overloads();
    for (int i = 0; i < drops.size(); ++i) {
      auto drop_field = errors.Scope(".drop_overloads[" + std::to_string(i) + "]");
      ParseDropOverload(drops[i], resource.drop_overloads, errors);
    }
  }
  if (!errors.ok()) return errors.ToStatus("errors parsing EDS resource");
  return resource;
}

}  // namespace

std::string LocalityName::ToString() const {
  return "{region=\"" + region + "\", zone=\"" + zone + "\", sub_zone=\"" + sub_zone + "\"}";
}

DecodedResource<EndpointResource> DecodeEndpoints(const XdsDecodeContext& /*context*/,
                                                  std::string_view serialized) {
  ClusterLoadAssignment proto;
  if (!ParseProto(serialized, proto)) {
    return {std::nullopt, InvalidArgumentError("Can't parse ClusterLoadAssignment resource.")};
  }
  return {proto.cluster_name(), ParseEndpointResource(proto)};
}

}  // namespace uxds
