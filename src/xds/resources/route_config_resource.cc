// RouteConfigResource: virtual host selection and the JSON summary.
#include "uxds/resources/route_config.h"
#include "xds/resources/ascii_case.h"
#include "xds/resources/fault_filter.h"
#include "xds/resources/resource_json.h"

namespace uxds {
namespace {

// Best first, as gRPC ranks domain patterns (A28).
enum class DomainMatchType { kExact, kSuffix, kPrefix, kUniverse, kInvalid };

DomainMatchType MatchTypeOf(std::string_view pattern) {
  if (pattern.empty()) return DomainMatchType::kInvalid;
  if (pattern.find('*') == std::string_view::npos) return DomainMatchType::kExact;
  if (pattern == "*") return DomainMatchType::kUniverse;
  if (pattern.front() == '*') return DomainMatchType::kSuffix;
  if (pattern.back() == '*') return DomainMatchType::kPrefix;
  return DomainMatchType::kInvalid;
}

bool DomainMatches(DomainMatchType type, std::string_view pattern, std::string_view host) {
  switch (type) {
    case DomainMatchType::kExact:
      return EqualsIgnoreCase(pattern, host);
    case DomainMatchType::kSuffix:
      // The '*' matches at least one character.
      return host.size() >= pattern.size() &&
             EqualsIgnoreCase(pattern.substr(1), host.substr(host.size() - (pattern.size() - 1)));
    case DomainMatchType::kPrefix:
      return host.size() >= pattern.size() &&
             EqualsIgnoreCase(pattern.substr(0, pattern.size() - 1),
                              host.substr(0, pattern.size() - 1));
    case DomainMatchType::kUniverse:
      return true;
    case DomainMatchType::kInvalid:
      return false;
  }
  return false;
}

ResourceJson HeaderMatcherJson(const HeaderMatcher& header) {
  ResourceJson json;
  json["name"] = header.name;
  switch (header.type) {
    case HeaderMatcher::Type::kRange:
      json["range"] = {header.range_start, header.range_end};
      break;
    case HeaderMatcher::Type::kPresent:
      json["present"] = header.present_match;
      break;
    default:
      json["match"] = header.string_matcher.ToString();
      break;
  }
  if (header.invert_match) json["invert"] = true;
  return json;
}

ResourceJson HashPolicyJson(const RouteConfigResource::HashPolicy& policy) {
  ResourceJson json;
  using HashPolicy = RouteConfigResource::HashPolicy;
  if (const auto* header = std::get_if<HashPolicy::Header>(&policy.policy)) {
    json["header"] = header->header_name;
    if (header->regex.valid()) {
      json["regex"] = header->regex.pattern();
      json["substitution"] = header->regex_substitution;
    }
  } else if (std::holds_alternative<HashPolicy::ChannelId>(policy.policy)) {
    json["channel_id"] = true;
  } else {
    json["unsupported"] = true;
  }
  if (policy.terminal) json["terminal"] = true;
  return json;
}

// {"<filter name>": {"type": ..., "rbac": {...} or null, "fault": {...} if any}}.
ResourceJson FilterOverridesJson(const HttpFilterOverrides& overrides) {
  ResourceJson json = ResourceJson::object();
  for (const auto& [name, config] : overrides) {
    json[name] = {{"type", config.config_type},
                  {"rbac", config.rbac.has_value() ? ResourceJson::parse(config.rbac->ToJson())
                                                   : ResourceJson()}};
    if (config.fault.has_value()) json[name]["fault"] = FaultInjectionJson(*config.fault);
  }
  return json;
}

ResourceJson RouteJson(const RouteConfigResource::Route& route) {
  using Route = RouteConfigResource::Route;
  ResourceJson match;
  match["path"] = route.matchers.path.ToString();
  if (!route.matchers.headers.empty()) {
    ResourceJson headers = ResourceJson::array();
    for (const auto& header : route.matchers.headers) headers.push_back(HeaderMatcherJson(header));
    match["headers"] = std::move(headers);
  }
  if (route.matchers.fraction_per_million.has_value()) {
    match["fraction_per_million"] = *route.matchers.fraction_per_million;
  }
  ResourceJson action;
  if (const auto* route_action = std::get_if<Route::RouteAction>(&route.action)) {
    action["type"] = "route";
    if (const auto* name = std::get_if<Route::RouteAction::ClusterName>(&route_action->cluster)) {
      action["cluster"] = name->name;
    } else {
      ResourceJson clusters = ResourceJson::array();
      for (const auto& cluster :
           std::get<Route::RouteAction::WeightedClusters>(route_action->cluster).clusters) {
        ResourceJson entry = {{"name", cluster.name}, {"weight", cluster.weight}};
        if (!cluster.filter_overrides.empty()) {
          entry["filter_overrides"] = FilterOverridesJson(cluster.filter_overrides);
        }
        clusters.push_back(std::move(entry));
      }
      action["weighted_clusters"] = std::move(clusters);
    }
    if (!route_action->hash_policies.empty()) {
      ResourceJson policies = ResourceJson::array();
      for (const auto& policy : route_action->hash_policies) {
        policies.push_back(HashPolicyJson(policy));
      }
      action["hash_policies"] = std::move(policies);
    }
    if (route_action->max_stream_duration.has_value()) {
      action["max_stream_duration"] = DurationJson(*route_action->max_stream_duration);
    }
  } else if (std::holds_alternative<Route::NonForwardingAction>(route.action)) {
    action["type"] = "non_forwarding";
  } else {
    action["type"] = "unsupported";
  }
  ResourceJson json = {{"match", std::move(match)}, {"action", std::move(action)}};
  if (!route.filter_overrides.empty()) {
    json["filter_overrides"] = FilterOverridesJson(route.filter_overrides);
  }
  return json;
}

}  // namespace

const RouteConfigResource::VirtualHost* RouteConfigResource::FindVirtualHost(
    std::string_view authority) const {
  const VirtualHost* best = nullptr;
  DomainMatchType best_type = DomainMatchType::kInvalid;
  size_t best_length = 0;
  for (const VirtualHost& vhost : virtual_hosts) {
    for (const std::string& pattern : vhost.domains) {
      const DomainMatchType type = MatchTypeOf(pattern);
      if (type == DomainMatchType::kInvalid || type > best_type) continue;
      if (type == best_type && pattern.size() <= best_length) continue;
      if (!DomainMatches(type, pattern, authority)) continue;
      best = &vhost;
      best_type = type;
      best_length = pattern.size();
      if (best_type == DomainMatchType::kExact) return best;
    }
  }
  return best;
}

std::string RouteConfigResource::ToJson() const {
  ResourceJson vhosts = ResourceJson::array();
  for (const VirtualHost& vhost : virtual_hosts) {
    ResourceJson routes = ResourceJson::array();
    for (const Route& route : vhost.routes) routes.push_back(RouteJson(route));
    ResourceJson entry = {{"domains", vhost.domains}, {"routes", std::move(routes)}};
    if (!vhost.filter_overrides.empty()) {
      entry["filter_overrides"] = FilterOverridesJson(vhost.filter_overrides);
    }
    vhosts.push_back(std::move(entry));
  }
  ResourceJson json;
  json["virtual_hosts"] = std::move(vhosts);
  return json.dump();
}

}  // namespace uxds
