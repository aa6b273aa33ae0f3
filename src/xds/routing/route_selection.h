// Choosing a route for an RPC (A28) and its request hash (A42), from a
// parsed RouteConfiguration: shared by the client channel, which forwards
// the RPC to the route's cluster, and the xDS-enabled server, which checks
// that the route allows it (A36). Pure functions of the request and the
// config: no state, no I/O, safe on any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/channel.h"
#include "uxds/resources/route_config.h"

namespace uxds::routing {

// What route selection reads of an RPC.
struct RpcView {
  std::string_view path;  // ":path", "/package.Service/Method"
  // The RPC's metadata: lower-case names, a name may repeat.
  std::span<const PickHeader> headers;
};

// A28: names matchers never see: "-bin" suffixes, gRPC's reserved "grpc-"
// names and pseudo-headers (":path").
bool HiddenFromMatching(std::string_view name);

// A28: the value header matchers and hash policies see for `name`: the
// values of every header of that name joined with ','; "content-type" is
// always "application/grpc" (what gRPC sends); names ending in "-bin",
// reserved "grpc-" names and pseudo-headers (":path") are never visible
// (only custom metadata is, "as if the header is not present").
std::optional<std::string> HeaderValueForMatching(std::span<const PickHeader> headers,
                                                  std::string_view name);

// A28: does `route`'s match (path, every header matcher, runtime fraction)
// accept the RPC? `random_per_million` is a draw in [0, 1000000) for
// runtime_fraction.
bool RouteMatches(const RouteConfigResource::Route::Matchers& matchers, const RpcView& rpc,
                  uint32_t random_per_million);

// A28: the first route of `virtual_host` that matches ("the first match
// wins"), or nullptr. `random` is called once per route with a
// runtime_fraction, for a draw in [0, 1000000).
template <typename Random>
const RouteConfigResource::Route* SelectRoute(const RouteConfigResource::VirtualHost& virtual_host,
                                              const RpcView& rpc, Random&& random) {
  for (const RouteConfigResource::Route& route : virtual_host.routes) {
    const uint32_t draw =
        route.matchers.fraction_per_million.has_value() ? random() % 1'000'000u : 0;
    if (RouteMatches(route.matchers, rpc, draw)) return &route;
  }
  return nullptr;
}

// A28: the cluster of a weighted_clusters action for a draw `random` (any
// value; it is reduced modulo the sum of the weights): each cluster gets a
// share of the draws proportional to its weight.
std::string_view PickWeightedCluster(
    const RouteConfigResource::Route::RouteAction::WeightedClusters& weighted, uint64_t random);

// Every cluster the routes of `virtual_host` forward to (single clusters
// and each of weighted_clusters), in route order, each once.
std::vector<std::string> ClustersNamedBy(const RouteConfigResource::VirtualHost& virtual_host);

// A42 (NOTES.md "Request hash"): the hash of the RPC from the route's hash
// policies, in order: a header policy hashes the header's value (after its
// regex_rewrite) with XXH64 seed 0, the channel_id policy gives
// `channel_id`; each hash h is combined as rotl(result, 1) ^ h; a terminal
// policy that produced a hash ends the walk. nullopt when no policy produced
// one (the caller then uses a random hash).
std::optional<uint64_t> ComputeRequestHash(
    std::span<const RouteConfigResource::HashPolicy> policies, const RpcView& rpc,
    uint64_t channel_id);

}  // namespace uxds::routing
