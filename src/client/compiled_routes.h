// A virtual host's routes compiled for the call path: the route matchers,
// actions and hash policies (A28, A42) turned at config time into tables a
// call walks without copying its metadata or allocating. Cluster names
// become indices (the channel keeps one entry per index), and every header
// name a matcher or hash policy reads is interned, so a call finds the
// first 16 of them in one pass over its metadata (and any later one in a
// pass of its own).
//
// Immutable once compiled: any thread may route against it.
#pragma once

#include <array>
#include <chrono>
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
#include "client/fault_injection.h"
#include "uxds/channel.h"
#include "uxds/resources/listener.h"
#include "uxds/resources/route_config.h"

namespace uxds::client_internal {

class CompiledRoutes {
 public:
  // The routes of an xDS virtual host. `default_max_stream_duration`: the
  // HttpConnectionManager's (A31), for routes that set none; `filters`: its
  // HTTP filters (A39), of which the fault filters (A33) apply to calls.
  static std::shared_ptr<const CompiledRoutes> Compile(
      const RouteConfigResource::VirtualHost& virtual_host,
      std::optional<std::chrono::nanoseconds> default_max_stream_duration = std::nullopt,
      std::span<const HttpConnectionManager::HttpFilter> filters = {});
  // A host:port channel: every call goes to its one cluster, `cluster`.
  static std::shared_ptr<const CompiledRoutes> Direct(std::string cluster);

  // Where a call goes: the cluster's index and the request hash.
  struct Choice {
    uint32_t cluster = 0;
    uint64_t hash = 0;
    // A31: the route's limit on the call's duration (0: none).
    std::chrono::nanoseconds max_stream_duration{0};
    // A33: the fault filters' configs for this route and cluster, in filter
    // order (null: no fault filter).
    const std::vector<FaultPolicy>* faults = nullptr;
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
  // Unique to this table in the process: a call tells routes apart by it
  // without holding them.
  uint64_t generation() const { return generation_; }
  std::optional<uint32_t> IndexOf(std::string_view cluster) const;

 private:
  friend class CallRequest;

  // An interned header name, or one of the names A28 treats specially.
  static constexpr uint32_t kNeverVisible = UINT32_MAX;     // "-bin", "grpc-", ":"
  static constexpr uint32_t kContentType = UINT32_MAX - 1;  // always "application/grpc"

  // A StringMatcher compiled (A28 path and header matchers): exact,
  // prefix, suffix and contains are evaluated inline, the case-insensitive
  // ones against a value lower-cased here; a regex through the matcher.
  struct TextTest {
    enum class Kind : uint8_t { kExact, kPrefix, kSuffix, kContains, kRegex };
    Kind kind = Kind::kRegex;
    bool ignore_case = false;
    std::string value;  // lower-cased when ignore_case
    static TextTest Of(const StringMatcher& matcher);
    // Not kRegex.
    bool Matches(std::string_view text) const;
    // Whether the value.size() bytes at `text` are the value.
    bool Same(const char* text) const;
    bool Contains(std::string_view text) const;
  };
  // A header matcher: the string types as a TextTest, the others (regex,
  // range, present) through the parsed matcher. Every route's tests are in
  // one array, small and in route order, for the walk over the routes.
  struct HeaderTest {
    uint32_t header = kNeverVisible;
    bool invert = false;
    TextTest text;                          // a string type, not kRegex
    const HeaderMatcher* parsed = nullptr;  // otherwise: in parsed_
  };
  struct HashPolicy {
    enum class Kind : uint8_t { kHeader, kChannelId, kNone } kind = Kind::kNone;
    bool terminal = false;
    uint32_t header = kNeverVisible;
    Regex rewrite;  // regex_rewrite (no rewrite when not valid)
    std::string substitution;
  };
  struct Route {
    TextTest path_test;
    StringMatcher path;                  // path_test is kRegex
    bool same_path_as_previous = false;  // the route before has an equal path matcher
    uint32_t first_test = 0;             // its header tests: tests_[first_test, end_test)
    uint32_t end_test = 0;
    uint32_t run = kNoRun;  // the first route of a run: its index in runs_
    std::optional<uint32_t> fraction_per_million;
    bool forwards = false;  // has a route action
    // One cluster, or weighted clusters with their running weight sums.
    std::vector<uint32_t> clusters;
    std::vector<uint64_t> weight_sums;
    std::vector<HashPolicy> hash_policies;
    std::chrono::nanoseconds max_stream_duration{0};  // A31 (0: none)
    // A33: per entry of `clusters`, its fault policies (empty when the
    // HttpConnectionManager has no fault filter).
    std::vector<std::vector<FaultPolicy>> faults;
  };

  // A run of routes told apart by one header's exact value (a service's
  // routes by tenant, by version): consecutive routes with one path
  // matcher, each with a case-sensitive exact test of `header` first. A
  // call looks its value up once, in a table over the run, instead of
  // testing route after route. Only the routes whose value it is can
  // match; they are tried in route order (A28: the first match wins).
  static constexpr uint32_t kNoRun = UINT32_MAX;
  static constexpr size_t kMinRun = 4;  // shorter runs are walked
  struct Run {
    uint32_t end_route = 0;  // the run is routes_[its first route, end_route)
    uint32_t header = kNeverVisible;
    // Open addressing over the first tests' values: 2^k slots, linear
    // probing; a value's routes lie along its probe in route order.
    struct Slot {
      uint64_t hash = 0;
      uint32_t route = kNoRun;  // kNoRun: empty
    };
    std::vector<Slot> slots;
  };
  static uint64_t HashValue(std::string_view value);
  void FindRuns();
  // The first route of `run` that matches, else null.
  const Route* MatchInRun(const Run& run, CallRequest& request) const;

  uint32_t Intern(std::string_view name);
  // A name's length as a bit of memoized_name_sizes_ (modulo 64: a longer
  // name may share a shorter one's bit, which costs only a comparison).
  static unsigned SizeBit(size_t size) { return static_cast<unsigned>(size & 63); }
  static bool PathMatches(const Route& route, std::string_view path);
  // The route's header matchers and runtime fraction.
  bool OthersMatch(const Route& route, CallRequest& request, uint32_t from_test) const;
  uint32_t ClusterIndex(const std::string& name);
  std::optional<uint64_t> Hash(const Route& route, CallRequest& request, uint64_t channel_id) const;

  std::vector<Route> routes_;
  std::vector<HeaderTest> tests_;
  std::vector<Run> runs_;
  std::forward_list<HeaderMatcher> parsed_;  // stable addresses
  std::vector<std::string> clusters_;
  std::vector<std::string> header_names_;
  // The SizeBit()s of the names a CallRequest finds in one pass: a
  // metadata entry whose name has none of these lengths is skipped.
  uint64_t memoized_name_sizes_ = 0;
  bool direct_ = false;
  uint64_t generation_ = NextGeneration();
  static uint64_t NextGeneration();
};

}  // namespace uxds::client_internal
