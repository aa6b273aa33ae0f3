// A virtual host's routes compiled for the call path: the route matchers,
// actions and hash policies (A28, A42) turned at config time into tables a
// call walks without copying its metadata or allocating. Cluster names
// become indices (the channel keeps one entry per index), and every header
// name a matcher or hash policy reads is interned, so a call looks each one
// up at most once in its metadata.
//
// Immutable once compiled: any thread may route against it.
#pragma once

#include <array>
#include <cstdint>
#include <forward_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/call_request.h"
#include "uxds/channel.h"
#include "uxds/resources/route_config.h"

namespace uxds::client_internal {

class CompiledRoutes {
 public:
  // The routes of an xDS virtual host.
  static std::shared_ptr<const CompiledRoutes> Compile(
      const RouteConfigResource::VirtualHost& virtual_host);
  // A host:port channel: every call goes to its one cluster, `cluster`.
  static std::shared_ptr<const CompiledRoutes> Direct(std::string cluster);

  // Where a call goes: the cluster's index and the request hash.
  struct Choice {
    uint32_t cluster = 0;
    uint64_t hash = 0;
  };
  enum class Outcome : uint8_t {
    kRouted,
    kNoRoute,        // A28: no route matches
    kNotForwarding,  // the matched route has no route action
  };
  // A28: the first route that matches, its cluster (a weighted cluster is
  // drawn here); A42: the hash from the route's hash policies, else a
  // random one. `channel_id` is A42's io.grpc.channel_id.
  Outcome Choose(CallRequest& request, uint64_t channel_id, Choice& choice) const;

  // Every cluster the routes name, each once, in route order: the indices
  // Choose() returns.
  const std::vector<std::string>& clusters() const { return clusters_; }
  std::optional<uint32_t> IndexOf(std::string_view cluster) const;

 private:
  friend class CallRequest;

  // An interned header name, or one of the names A28 treats specially.
  static constexpr uint32_t kNeverVisible = UINT32_MAX;     // "-bin", "grpc-", ":"
  static constexpr uint32_t kContentType = UINT32_MAX - 1;  // always "application/grpc"

  // How a matcher is evaluated: the case-sensitive exact and prefix forms
  // (what most routes use) inline, the rest through the parsed matcher.
  enum class Form : uint8_t { kExact, kPrefix, kParsed };
  struct HeaderTest {
    uint32_t header = kNeverVisible;
    Form form = Form::kParsed;
    bool invert = false;
    std::string value;  // kExact, kPrefix
    HeaderMatcher matcher;
  };
  struct HashPolicy {
    enum class Kind : uint8_t { kHeader, kChannelId, kNone } kind = Kind::kNone;
    bool terminal = false;
    uint32_t header = kNeverVisible;
    Regex rewrite;  // regex_rewrite (no rewrite when not valid)
    std::string substitution;
  };
  struct Route {
    Form path_form = Form::kParsed;
    std::string path_value;  // kExact, kPrefix
    StringMatcher path;
    bool same_path_as_previous = false;  // the route before has an equal path matcher
    std::vector<HeaderTest> headers;
    std::optional<uint32_t> fraction_per_million;
    bool forwards = false;  // has a route action
    // One cluster, or weighted clusters with their running weight sums.
    std::vector<uint32_t> clusters;
    std::vector<uint64_t> weight_sums;
    std::vector<HashPolicy> hash_policies;
  };

  uint32_t Intern(std::string_view name);
  static Form FormOf(const StringMatcher& matcher);
  static bool PathMatches(const Route& route, std::string_view path);
  // The route's header matchers and runtime fraction.
  static bool OthersMatch(const Route& route, CallRequest& request, const CompiledRoutes& routes);
  uint32_t ClusterIndex(const std::string& name);
  std::optional<uint64_t> Hash(const Route& route, CallRequest& request, uint64_t channel_id) const;

  std::vector<Route> routes_;
  std::vector<std::string> clusters_;
  std::vector<std::string> header_names_;
  bool direct_ = false;
};

}  // namespace uxds::client_internal
