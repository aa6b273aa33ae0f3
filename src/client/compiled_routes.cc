#include "client/compiled_routes.h"

#include <algorithm>
#include <bit>
#include <variant>

#include <xxhash.h>

#include "lb/lb_policy.h"
#include "xds/routing/route_selection.h"

namespace uxds::client_internal {

namespace {

bool FastMatch(std::string_view text, std::string_view value, bool prefix) {
  return prefix ? text.starts_with(value) : text == value;
}

}  // namespace

uint32_t CompiledRoutes::Intern(std::string_view name) {
  if (routing::HiddenFromMatching(name)) return kNeverVisible;
  if (name == "content-type") return kContentType;
  auto found = std::find(header_names_.begin(), header_names_.end(), name);
  if (found != header_names_.end()) return static_cast<uint32_t>(found - header_names_.begin());
  header_names_.emplace_back(name);
  return static_cast<uint32_t>(header_names_.size() - 1);
}

uint32_t CompiledRoutes::ClusterIndex(const std::string& name) {
  if (std::optional<uint32_t> index = IndexOf(name)) return *index;
  clusters_.push_back(name);
  return static_cast<uint32_t>(clusters_.size() - 1);
}

std::optional<uint32_t> CompiledRoutes::IndexOf(std::string_view cluster) const {
  auto found = std::find(clusters_.begin(), clusters_.end(), cluster);
  if (found == clusters_.end()) return std::nullopt;
  return static_cast<uint32_t>(found - clusters_.begin());
}

CompiledRoutes::Form CompiledRoutes::FormOf(const StringMatcher& matcher) {
  if (matcher.ignore_case) return Form::kParsed;
  if (matcher.type == StringMatcher::Type::kExact) return Form::kExact;
  if (matcher.type == StringMatcher::Type::kPrefix) return Form::kPrefix;
  return Form::kParsed;
}

bool CompiledRoutes::PathMatches(const Route& route, std::string_view path) {
  return route.path_form == Form::kParsed
             ? route.path.Matches(path)
             : FastMatch(path, route.path_value, route.path_form == Form::kPrefix);
}

bool CompiledRoutes::OthersMatch(const Route& route, CallRequest& request,
                                 const CompiledRoutes& routes) {
  for (const HeaderTest& test : route.headers) {
    const CallRequest::Value value = request.ValueOf(routes, test.header);
    if (test.form == Form::kParsed) {
      if (!test.matcher.Matches(value.present() ? std::optional<std::string_view>(value.view())
                                                : std::nullopt)) {
        return false;
      }
      continue;
    }
    // A28: a missing header fails the string types, inverted or not.
    if (!value.present()) return false;
    if (FastMatch(value.view(), test.value, test.form == Form::kPrefix) == test.invert) {
      return false;
    }
  }
  // A28: runtime_fraction, scaled to a million: matches for draws below it.
  return !route.fraction_per_million.has_value() ||
         ThreadRandom() % 1'000'000u < *route.fraction_per_million;
}

std::shared_ptr<const CompiledRoutes> CompiledRoutes::Compile(
    const RouteConfigResource::VirtualHost& virtual_host) {
  using RouteAction = RouteConfigResource::Route::RouteAction;
  auto compiled = std::make_shared<CompiledRoutes>();
  compiled->routes_.reserve(virtual_host.routes.size());
  for (const RouteConfigResource::Route& source : virtual_host.routes) {
    Route& route = compiled->routes_.emplace_back();
    route.path = source.matchers.path;
    route.path_form = FormOf(source.matchers.path);
    route.path_value = source.matchers.path.value;
    route.same_path_as_previous =
        compiled->routes_.size() > 1 && source.matchers.path == (&source - 1)->matchers.path;
    for (const HeaderMatcher& matcher : source.matchers.headers) {
      HeaderTest& test = route.headers.emplace_back();
      test.header = compiled->Intern(matcher.name);
      const bool string_type = matcher.type == HeaderMatcher::Type::kExact ||
                               matcher.type == HeaderMatcher::Type::kPrefix;
      test.form = string_type ? FormOf(matcher.string_matcher) : Form::kParsed;
      test.invert = matcher.invert_match;
      test.value = matcher.string_matcher.value;
      test.matcher = matcher;
    }
    route.fraction_per_million = source.matchers.fraction_per_million;
    const auto* action = std::get_if<RouteAction>(&source.action);
    if (action == nullptr) continue;
    route.forwards = true;
    if (const auto* one = std::get_if<RouteAction::ClusterName>(&action->cluster)) {
      route.clusters.push_back(compiled->ClusterIndex(one->name));
    } else {
      uint64_t sum = 0;
      for (const auto& weighted :
           std::get<RouteAction::WeightedClusters>(action->cluster).clusters) {
        if (weighted.weight == 0) continue;
        sum += weighted.weight;
        route.clusters.push_back(compiled->ClusterIndex(weighted.name));
        route.weight_sums.push_back(sum);
      }
      // The parser drops zero weights and refuses an empty list; a route
      // left with nothing to draw from forwards nowhere rather than divide
      // by zero.
      if (route.clusters.empty()) route.forwards = false;
    }
    for (const RouteConfigResource::HashPolicy& source_policy : action->hash_policies) {
      HashPolicy& policy = route.hash_policies.emplace_back();
      policy.terminal = source_policy.terminal;
      if (const auto* header =
              std::get_if<RouteConfigResource::HashPolicy::Header>(&source_policy.policy)) {
        policy.kind = HashPolicy::Kind::kHeader;
        policy.header = compiled->Intern(header->header_name);
        policy.rewrite = header->regex;
        policy.substitution = header->regex_substitution;
      } else if (std::holds_alternative<RouteConfigResource::HashPolicy::ChannelId>(
                     source_policy.policy)) {
        policy.kind = HashPolicy::Kind::kChannelId;
      }
    }
  }
  return compiled;
}

std::shared_ptr<const CompiledRoutes> CompiledRoutes::Direct(std::string cluster) {
  auto compiled = std::make_shared<CompiledRoutes>();
  compiled->direct_ = true;
  compiled->clusters_.push_back(std::move(cluster));
  return compiled;
}

std::optional<uint64_t> CompiledRoutes::Hash(const Route& route, CallRequest& request,
                                             uint64_t channel_id) const {
  // A42 (NOTES.md "Request hash"): each policy's hash h is combined as
  // rotl(result, 1) ^ h; a terminal policy that produced one ends the walk;
  // kinds gRPC does not support produce nothing.
  std::optional<uint64_t> result;
  for (const HashPolicy& policy : route.hash_policies) {
    std::optional<uint64_t> hash;
    if (policy.kind == HashPolicy::Kind::kHeader) {
      if (const CallRequest::Value value = request.ValueOf(*this, policy.header); value.present()) {
        if (policy.rewrite.valid()) {
          // regex_rewrite makes a new string: the one case that allocates.
          std::string rewritten(value.view());
          policy.rewrite.GlobalReplace(&rewritten, policy.substitution);
          hash = XXH64(rewritten.data(), rewritten.size(), 0);
        } else {
          hash = XXH64(value.data, value.size, 0);
        }
      }
    } else if (policy.kind == HashPolicy::Kind::kChannelId) {
      hash = channel_id;
    }
    if (!hash.has_value()) continue;
    result = std::rotl(result.value_or(0), 1) ^ *hash;
    if (policy.terminal) break;
  }
  return result;
}

CompiledRoutes::Outcome CompiledRoutes::Choose(CallRequest& request, uint64_t channel_id,
                                               Choice& choice) const {
  if (direct_) {
    choice = Choice{0, ThreadRandom()};
    return Outcome::kRouted;
  }
  request.ForgetValues();
  // A28: "the first match wins".
  const Route* matched = nullptr;
  bool path_matches = false;
  for (const Route& route : routes_) {
    // Routes often share a path matcher (a service's routes told apart by
    // headers): its answer for this call is computed once.
    if (!route.same_path_as_previous) path_matches = PathMatches(route, request.path());
    if (path_matches && OthersMatch(route, request, *this)) {
      matched = &route;
      break;
    }
  }
  if (matched == nullptr) return Outcome::kNoRoute;
  if (!matched->forwards) return Outcome::kNotForwarding;
  if (matched->weight_sums.empty()) {
    choice.cluster = matched->clusters.front();
  } else {
    // A28: each cluster gets a share of the draws proportional to its weight.
    const uint64_t point = ThreadRandom() % matched->weight_sums.back();
    const size_t at = static_cast<size_t>(
        std::upper_bound(matched->weight_sums.begin(), matched->weight_sums.end(), point) -
        matched->weight_sums.begin());
    choice.cluster = matched->clusters[at];
  }
  std::optional<uint64_t> hash = Hash(*matched, request, channel_id);
  choice.hash = hash.has_value() ? *hash : ThreadRandom();
  return Outcome::kRouted;
}

}  // namespace uxds::client_internal
