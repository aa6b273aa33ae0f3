#include "xds/routing/route_selection.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <variant>

#include <xxhash.h>

namespace uxds::routing {

bool HiddenFromMatching(std::string_view name) {
  // A28: "we will explicitly exclude headers with a -bin suffix from
  // matching"; only custom metadata is visible, so neither pseudo-headers
  // nor gRPC's reserved grpc-* names (grpc-timeout, grpc-encoding, ...) are.
  return name.ends_with("-bin") || name.starts_with("grpc-") || name.starts_with(':');
}

std::optional<std::string> HeaderValueForMatching(std::span<const PickHeader> headers,
                                                  std::string_view name) {
  if (HiddenFromMatching(name)) return std::nullopt;
  // A28: "xDS route selection will assume a hard-coded value of
  // application/grpc".
  if (name == "content-type") return std::string("application/grpc");
  std::optional<std::string> joined;
  for (const PickHeader& header : headers) {
    if (header.name != name) continue;
    if (joined.has_value()) {
      joined->push_back(',');
      joined->append(header.value);
    } else {
      joined.emplace(header.value);
    }
  }
  return joined;
}

bool RouteMatches(const RouteConfigResource::Route::Matchers& matchers, const RpcView& rpc,
                  uint32_t random_per_million) {
  if (!matchers.path.Matches(rpc.path)) return false;
  for (const HeaderMatcher& header : matchers.headers) {
    const std::optional<std::string> value = HeaderValueForMatching(rpc.headers, header.name);
    if (!header.Matches(value.has_value() ? std::optional<std::string_view>(*value)
                                          : std::nullopt)) {
      return false;
    }
  }
  // A28: runtime_fraction, scaled to a million: matches for draws below it.
  if (matchers.fraction_per_million.has_value() &&
      random_per_million >= *matchers.fraction_per_million) {
    return false;
  }
  return true;
}

std::string_view PickWeightedCluster(
    const RouteConfigResource::Route::RouteAction::WeightedClusters& weighted, uint64_t random) {
  uint64_t total = 0;
  for (const auto& cluster : weighted.clusters) total += cluster.weight;
  if (total == 0) return {};
  uint64_t point = random % total;
  for (const auto& cluster : weighted.clusters) {
    if (point < cluster.weight) return cluster.name;
    point -= cluster.weight;
  }
  return weighted.clusters.back().name;
}

std::vector<std::string> ClustersNamedBy(const RouteConfigResource::VirtualHost& virtual_host) {
  std::vector<std::string> names;
  auto add = [&names](const std::string& name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const RouteConfigResource::Route& route : virtual_host.routes) {
    const auto* action = std::get_if<RouteConfigResource::Route::RouteAction>(&route.action);
    if (action == nullptr) continue;
    if (const auto* one =
            std::get_if<RouteConfigResource::Route::RouteAction::ClusterName>(&action->cluster)) {
      add(one->name);
      continue;
    }
    for (const auto& weighted :
         std::get<RouteConfigResource::Route::RouteAction::WeightedClusters>(action->cluster)
             .clusters) {
      add(weighted.name);
    }
  }
  return names;
}

std::optional<uint64_t> ComputeRequestHash(
    std::span<const RouteConfigResource::HashPolicy> policies, const RpcView& rpc,
    uint64_t channel_id) {
  std::optional<uint64_t> result;
  for (const RouteConfigResource::HashPolicy& policy : policies) {
    std::optional<uint64_t> hash;
    if (const auto* header = std::get_if<RouteConfigResource::HashPolicy::Header>(&policy.policy)) {
      std::optional<std::string> value = HeaderValueForMatching(rpc.headers, header->header_name);
      if (value.has_value()) {
        if (header->regex.valid()) header->regex.GlobalReplace(&*value, header->regex_substitution);
        hash = XXH64(value->data(), value->size(), 0);
      }
    } else if (std::holds_alternative<RouteConfigResource::HashPolicy::ChannelId>(policy.policy)) {
      hash = channel_id;
    }
    // Unsupported kinds produce nothing, so they never end the walk.
    if (!hash.has_value()) continue;
    // NOTES.md: h = rotate_left(h, 1) XOR new, starting from 0.
    result = std::rotl(result.value_or(0), 1) ^ *hash;
    if (policy.terminal) break;
  }
  return result;
}

}  // namespace uxds::routing
