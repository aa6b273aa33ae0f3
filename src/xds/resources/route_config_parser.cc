// RouteConfiguration parsing with gRPC's validation rules and error texts
// (A28, A31, A36, A39, A42; gRPC C++ xds_route_config_parser.cc).
#include "xds/resources/route_config_parser.h"

#include <limits>
#include <string>

#include "xds/resources/field_parsers.h"
#include "xds/resources/http_filters.h"
#include "xds/resources/matcher_parsers.h"
#include "xds/resources/resource_decoders.h"

namespace uxds {
namespace {

namespace route_v3 = envoy::config::route::v3;
using Route = RouteConfigResource::Route;
using HashPolicy = RouteConfigResource::HashPolicy;

// The filter_state key gRPC hashes (A42).
constexpr std::string_view kChannelIdKey = "io.grpc.channel_id";

// gRPC's rule: exact (no '*'), "*", or a '*' at either end (a leading one
// makes a suffix pattern, a trailing one a prefix pattern).
bool IsValidDomainPattern(std::string_view pattern) {
  if (pattern.empty()) return false;
  if (pattern.find('*') == std::string_view::npos) return true;
  return pattern.front() == '*' || pattern.back() == '*';
}

// A28: a prefix that no "/service/method" path can match makes the route
// unusable: it is left out, not an error.
bool PrefixCanMatchGrpcPath(std::string_view prefix) {
  if (prefix.empty()) return true;
  if (prefix.front() != '/') return false;
  std::string_view rest = prefix.substr(1);
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return true;
  if (slash == 0) return false;                                // "//"
  return rest.find('/', slash + 1) == std::string_view::npos;  // at most two slashes
}

bool PathIsGrpcMethod(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  std::string_view rest = path.substr(1);
  const size_t slash = rest.find('/');
  return slash != std::string_view::npos && slash != 0 && slash + 1 < rest.size() &&
         rest.find('/', slash + 1) == std::string_view::npos;
}

// nullopt: skip the route (an error is recorded if it is one).
std::optional<StringMatcher> ParsePathMatcher(const route_v3::RouteMatch& match,
                                              ValidationErrors& errors) {
  StringMatcher matcher;
  matcher.ignore_case = match.has_case_sensitive() && !match.case_sensitive().value();
  switch (match.path_specifier_case()) {
    case route_v3::RouteMatch::kPrefix:
      if (!PrefixCanMatchGrpcPath(match.prefix())) return std::nullopt;
      matcher.type = StringMatcher::Type::kPrefix;
      matcher.value = match.prefix();
      return matcher;
    case route_v3::RouteMatch::kPath:
      if (!PathIsGrpcMethod(match.path())) return std::nullopt;
      matcher.type = StringMatcher::Type::kExact;
      matcher.value = match.path();
      return matcher;
    case route_v3::RouteMatch::kSafeRegex: {
      auto regex = Regex::Create(match.safe_regex().regex());
      if (!regex.ok()) {
        errors.Add("error creating path matcher: Invalid regex string specified in matcher: " +
                   regex.status().message());
        return std::nullopt;
      }
      matcher.type = StringMatcher::Type::kSafeRegex;
      matcher.regex = *std::move(regex);
      matcher.ignore_case = false;
      return matcher;
    }
    default:
      errors.Add("invalid path specifier");
      return std::nullopt;
  }
}

std::optional<HashPolicy> ParseHashPolicy(const route_v3::RouteAction::HashPolicy& proto,
                                          ValidationErrors& errors) {
  HashPolicy policy;
  policy.terminal = proto.terminal();
  switch (proto.policy_specifier_case()) {
    case route_v3::RouteAction::HashPolicy::kHeader: {
      auto field = errors.Scope(".header");
      HashPolicy::Header header;
      header.header_name = proto.header().header_name();
      if (header.header_name.empty()) {
        auto name_field = errors.Scope(".header_name");
        errors.Add("must be non-empty");
      }
      if (proto.header().has_regex_rewrite()) {
        auto rewrite_field = errors.Scope(".regex_rewrite.pattern");
        const auto& rewrite = proto.header().regex_rewrite();
        if (!rewrite.has_pattern()) {
          errors.Add("field not present");
          return std::nullopt;
        }
        auto regex_field = errors.Scope(".regex");
        if (rewrite.pattern().regex().empty()) {
          errors.Add("field not present");
          return std::nullopt;
        }
        auto regex = Regex::Create(rewrite.pattern().regex());
        if (!regex.ok()) {
          errors.Add("errors compiling regex: " + regex.status().message());
          return std::nullopt;
        }
        header.regex = *std::move(regex);
        header.regex_substitution = rewrite.substitution();
      }
      policy.policy = std::move(header);
      break;
    }
    case route_v3::RouteAction::HashPolicy::kFilterState:
      if (proto.filter_state().key() == kChannelIdKey) {
        policy.policy = HashPolicy::ChannelId();
      } else {
        policy.policy = HashPolicy::Unsupported();
      }
      break;
    default:
      policy.policy = HashPolicy::Unsupported();
      break;
  }
  return policy;
}

Route::RouteAction::WeightedClusters ParseWeightedClusters(const route_v3::WeightedCluster& proto,
                                                           ValidationErrors& errors) {
  Route::RouteAction::WeightedClusters weighted;
  uint64_t total_weight = 0;
  for (int i = 0; i < proto.clusters_size(); ++i) {
    auto field = errors.Scope(".clusters[" + std::to_string(i) + "]");
    const auto& entry = proto.clusters(i);
    Route::ClusterWeight cluster;
    {
      // A39: the overrides of calls the route sends to this cluster (the
      // fault filter's, A33).
      auto config_field = errors.Scope(".typed_per_filter_config");
      cluster.filter_overrides = ParseTypedPerFilterConfig(entry.typed_per_filter_config(), errors);
    }
    cluster.name = entry.name();
    if (cluster.name.empty()) {
      auto name_field = errors.Scope(".name");
      errors.Add("must be non-empty");
    }
    if (!entry.has_weight()) {
      auto weight_field = errors.Scope(".weight");
      errors.Add("field not present");
      continue;
    }
    cluster.weight = entry.weight().value();
    if (cluster.weight == 0) continue;
    total_weight += cluster.weight;
    weighted.clusters.push_back(std::move(cluster));
  }
  if (weighted.clusters.empty()) {
    errors.Add("no valid clusters specified");
  } else if (total_weight > std::numeric_limits<uint32_t>::max()) {
    errors.Add("sum of cluster weights exceeds uint32 max");
  }
  return weighted;
}

// nullopt: skip the route (its cluster specifier is not one gRPC supports).
std::optional<Route::RouteAction> ParseRouteAction(const route_v3::RouteAction& proto,
                                                   ValidationErrors& errors) {
  Route::RouteAction action;
  if (proto.has_max_stream_duration()) {
    auto field = errors.Scope(".max_stream_duration");
    const auto& durations = proto.max_stream_duration();
    if (durations.has_grpc_timeout_header_max()) {
      auto max_field = errors.Scope(".grpc_timeout_header_max");
      action.max_stream_duration = ParseDuration(durations.grpc_timeout_header_max(), errors);
    } else if (durations.has_max_stream_duration()) {
      auto max_field = errors.Scope(".max_stream_duration");
      action.max_stream_duration = ParseDuration(durations.max_stream_duration(), errors);
    }
  }
  for (int i = 0; i < proto.hash_policy_size(); ++i) {
    auto field = errors.Scope(".hash_policy[" + std::to_string(i) + "]");
    auto policy = ParseHashPolicy(proto.hash_policy(i), errors);
    if (policy.has_value()) action.hash_policies.push_back(std::move(*policy));
  }
  switch (proto.cluster_specifier_case()) {
    case route_v3::RouteAction::kCluster:
      if (proto.cluster().empty()) {
        auto field = errors.Scope(".cluster");
        errors.Add("must be non-empty");
      }
      action.cluster = Route::RouteAction::ClusterName{proto.cluster()};
      return action;
    case route_v3::RouteAction::kWeightedClusters: {
      auto field = errors.Scope(".weighted_clusters");
      action.cluster = ParseWeightedClusters(proto.weighted_clusters(), errors);
      return action;
    }
    default:
      // cluster_header, cluster_specifier_plugin (RLS), or none.
      return std::nullopt;
  }
}

std::optional<Route> ParseRoute(const route_v3::Route& proto, ValidationErrors& errors) {
  Route route;
  {
    auto field = errors.Scope(".match");
    if (!proto.has_match()) {
      errors.Add("field not present");
      return std::nullopt;
    }
    const auto& match = proto.match();
    // A28: gRPC never matches query parameters, so the route never matches.
    if (match.query_parameters_size() > 0) return std::nullopt;
    auto path = ParsePathMatcher(match, errors);
    if (!path.has_value()) return std::nullopt;
    route.matchers.path = std::move(*path);
    for (int i = 0; i < match.headers_size(); ++i) {
      auto header_field = errors.Scope(".headers[" + std::to_string(i) + "]");
      auto header = ParseHeaderMatcher(match.headers(i), errors);
      if (header.has_value()) route.matchers.headers.push_back(std::move(*header));
    }
    if (match.has_runtime_fraction() && match.runtime_fraction().has_default_value()) {
      // A28: only the default value; gRPC has no runtime.
      auto fraction_field = errors.Scope(".runtime_fraction.default_value");
      route.matchers.fraction_per_million =
          ParseFractionPerMillion(match.runtime_fraction().default_value(), errors);
    }
  }
  switch (proto.action_case()) {
    case route_v3::Route::kRoute: {
      auto field = errors.Scope(".route");
      auto action = ParseRouteAction(proto.route(), errors);
      if (!action.has_value()) return std::nullopt;
      route.action = std::move(*action);
      break;
    }
    case route_v3::Route::kNonForwardingAction:
      route.action = Route::NonForwardingAction();
      break;
    default:
      route.action = Route::UnsupportedAction();
      break;
  }
  auto field = errors.Scope(".typed_per_filter_config");
  route.filter_overrides = ParseTypedPerFilterConfig(proto.typed_per_filter_config(), errors);
  return route;
}

}  // namespace

RouteConfigResource ParseRouteConfig(const route_v3::RouteConfiguration& proto,
                                     ValidationErrors& errors) {
  RouteConfigResource resource;
  for (int i = 0; i < proto.virtual_hosts_size(); ++i) {
    auto field = errors.Scope(".virtual_hosts[" + std::to_string(i) + "]");
    const auto& vhost_proto = proto.virtual_hosts(i);
    RouteConfigResource::VirtualHost& vhost = resource.virtual_hosts.emplace_back();
    for (int j = 0; j < vhost_proto.domains_size(); ++j) {
      const std::string& domain = vhost_proto.domains(j);
      if (!IsValidDomainPattern(domain)) {
        auto domain_field = errors.Scope(".domains[" + std::to_string(j) + "]");
        errors.Add("invalid domain pattern \"" + domain + "\"");
      }
      vhost.domains.push_back(domain);
    }
    if (vhost.domains.empty()) {
      auto domains_field = errors.Scope(".domains");
      errors.Add("must be non-empty");
    }
    {
      auto config_field = errors.Scope(".typed_per_filter_config");
      vhost.filter_overrides =
          ParseTypedPerFilterConfig(vhost_proto.typed_per_filter_config(), errors);
    }
    auto routes_field = errors.Scope(".routes");
    for (int j = 0; j < vhost_proto.routes_size(); ++j) {
      auto route_field = errors.Scope("[" + std::to_string(j) + "]");
      auto route = ParseRoute(vhost_proto.routes(j), errors);
      if (route.has_value()) vhost.routes.push_back(std::move(*route));
    }
  }
  return resource;
}

DecodedResource<RouteConfigResource> DecodeRouteConfig(const XdsDecodeContext& /*context*/,
                                                       std::string_view serialized) {
  route_v3::RouteConfiguration proto;
  if (!ParseProto(serialized, proto)) {
    return {std::nullopt, InvalidArgumentError("Can't parse RouteConfiguration resource.")};
  }
  ValidationErrors errors;
  RouteConfigResource resource = ParseRouteConfig(proto, errors);
  if (!errors.ok()) {
    return {proto.name(), errors.ToStatus("errors validating RouteConfiguration resource")};
  }
  return {proto.name(), std::move(resource)};
}

}  // namespace uxds
