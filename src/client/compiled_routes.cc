#include "client/compiled_routes.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <variant>

// XXH64 (A42's header hash) inline: a call hashes a value or two, where a
// call through the library's PLT costs a good part of the hash.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "lb/lb_policy.h"
#include "runtime/bytes_equal.h"
#include "xds/routing/route_selection.h"

namespace uxds::client_internal {

CompiledRoutes::TextTest CompiledRoutes::TextTest::Of(const StringMatcher& matcher) {
  TextTest test;
  switch (matcher.type) {
    case StringMatcher::Type::kExact:
      test.kind = Kind::kExact;
      break;
    case StringMatcher::Type::kPrefix:
      test.kind = Kind::kPrefix;
      break;
    case StringMatcher::Type::kSuffix:
      test.kind = Kind::kSuffix;
      break;
    case StringMatcher::Type::kContains:
      test.kind = Kind::kContains;
      break;
    case StringMatcher::Type::kSafeRegex:
      return test;
  }
  test.ignore_case = matcher.ignore_case;
  test.value = matcher.value;
  if (test.ignore_case) {
    for (char& c : test.value) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return test;
}

bool CompiledRoutes::TextTest::Same(const char* text) const {
  return ignore_case ? BytesEqualLowered(text, value.data(), value.size())
                     : BytesEqual(text, value.data(), value.size());
}

bool CompiledRoutes::TextTest::Contains(std::string_view text) const {
  const size_t n = value.size();
  if (n == 0) return true;
  if (text.size() < n) return false;
  // Where the first byte matches (either case of a letter when ignoring
  // case: `value` is lower-case), the rest is compared.
  const char first = value[0];
  const char first_upper =
      ignore_case && first >= 'a' && first <= 'z' ? static_cast<char>(first - 'a' + 'A') : first;
  const char* at = text.data();
  const char* const last = at + (text.size() - n);
  for (; at <= last; ++at) {
    if (*at != first && *at != first_upper) continue;
    if (ignore_case ? BytesEqualLowered(at + 1, value.data() + 1, n - 1)
                    : BytesEqual(at + 1, value.data() + 1, n - 1)) {
      return true;
    }
  }
  return false;
}

bool CompiledRoutes::TextTest::Matches(std::string_view text) const {
  const size_t n = value.size();
  switch (kind) {
    case Kind::kExact:
      return text.size() == n && Same(text.data());
    case Kind::kPrefix:
      return text.size() >= n && Same(text.data());
    case Kind::kSuffix:
      return text.size() >= n && Same(text.data() + text.size() - n);
    case Kind::kContains:
      return Contains(text);
    case Kind::kRegex:
      break;
  }
  return false;
}

uint64_t CompiledRoutes::NextGeneration() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

uint32_t CompiledRoutes::Intern(std::string_view name) {
  if (routing::HiddenFromMatching(name)) return kNeverVisible;
  if (name == "content-type") return kContentType;
  auto found = std::find(header_names_.begin(), header_names_.end(), name);
  if (found != header_names_.end()) return static_cast<uint32_t>(found - header_names_.begin());
  header_names_.emplace_back(name);
  const auto index = static_cast<uint32_t>(header_names_.size() - 1);
  if (index < CallRequest::kMemoized) memoized_name_sizes_ |= uint64_t{1} << SizeBit(name.size());
  return index;
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

bool CompiledRoutes::PathMatches(const Route& route, std::string_view path) {
  return route.path_test.kind == TextTest::Kind::kRegex ? route.path.Matches(path)
                                                        : route.path_test.Matches(path);
}

bool CompiledRoutes::OthersMatch(const Route& route, CallRequest& request,
                                 uint32_t from_test) const {
  for (uint32_t i = from_test; i < route.end_test; ++i) {
    const HeaderTest& test = tests_[i];
    const CallRequest::Value value = request.ValueOf(*this, test.header);
    if (test.parsed != nullptr) {
      if (!test.parsed->Matches(value.present() ? std::optional<std::string_view>(value.view())
                                                : std::nullopt)) {
        return false;
      }
      continue;
    }
    // A28: a missing header fails the string types, inverted or not.
    if (!value.present()) return false;
    if (test.text.Matches(value.view()) == test.invert) return false;
  }
  // A28: runtime_fraction, scaled to a million: matches for draws below it.
  return !route.fraction_per_million.has_value() ||
         ThreadRandom() % 1'000'000u < *route.fraction_per_million;
}

namespace {

// A39: a filter's config for calls on `route` to `cluster`: the most
// specific override (the weighted cluster's, the route's, the virtual
// host's), else the filter's own.
const FaultInjectionConfig& EffectiveFault(const HttpConnectionManager::HttpFilter& filter,
                                           const RouteConfigResource::VirtualHost& virtual_host,
                                           const RouteConfigResource::Route& route,
                                           const HttpFilterOverrides* cluster) {
  for (const HttpFilterOverrides* overrides :
       {cluster, &route.filter_overrides, &virtual_host.filter_overrides}) {
    if (overrides == nullptr) continue;
    auto it = overrides->find(filter.name);
    if (it != overrides->end() && it->second.fault.has_value()) return *it->second.fault;
  }
  return *filter.fault;
}

std::vector<FaultPolicy> FaultPolicies(std::span<const HttpConnectionManager::HttpFilter> filters,
                                       const RouteConfigResource::VirtualHost& virtual_host,
                                       const RouteConfigResource::Route& route,
                                       const HttpFilterOverrides* cluster) {
  std::vector<FaultPolicy> policies;
  for (const auto& filter : filters) {
    if (!filter.fault.has_value()) continue;
    policies.push_back(FaultPolicy::Of(EffectiveFault(filter, virtual_host, route, cluster)));
  }
  return policies;
}

}  // namespace

std::shared_ptr<const CompiledRoutes> CompiledRoutes::Compile(
    const RouteConfigResource::VirtualHost& virtual_host,
    std::optional<std::chrono::nanoseconds> default_max_stream_duration,
    std::span<const HttpConnectionManager::HttpFilter> filters) {
  const bool has_faults = std::any_of(filters.begin(), filters.end(),
                                      [](const auto& f) { return f.fault.has_value(); });
  using RouteAction = RouteConfigResource::Route::RouteAction;
  auto compiled = std::make_shared<CompiledRoutes>();
  compiled->routes_.reserve(virtual_host.routes.size());
  for (const RouteConfigResource::Route& source : virtual_host.routes) {
    Route& route = compiled->routes_.emplace_back();
    route.path = source.matchers.path;
    route.path_test = TextTest::Of(source.matchers.path);
    route.same_path_as_previous =
        compiled->routes_.size() > 1 && source.matchers.path == (&source - 1)->matchers.path;
    route.first_test = static_cast<uint32_t>(compiled->tests_.size());
    for (const HeaderMatcher& matcher : source.matchers.headers) {
      HeaderTest& test = compiled->tests_.emplace_back();
      test.header = compiled->Intern(matcher.name);
      test.invert = matcher.invert_match;
      const bool string_type = matcher.type == HeaderMatcher::Type::kExact ||
                               matcher.type == HeaderMatcher::Type::kPrefix ||
                               matcher.type == HeaderMatcher::Type::kSuffix ||
                               matcher.type == HeaderMatcher::Type::kContains;
      if (string_type) test.text = TextTest::Of(matcher.string_matcher);
      if (test.text.kind == TextTest::Kind::kRegex) {
        test.parsed = &compiled->parsed_.emplace_front(matcher);
      }
    }
    route.end_test = static_cast<uint32_t>(compiled->tests_.size());
    route.fraction_per_million = source.matchers.fraction_per_million;
    const auto* action = std::get_if<RouteAction>(&source.action);
    if (action == nullptr) continue;
    route.forwards = true;
    // A31: the route's max_stream_duration (its grpc_timeout_header_max
    // when set), else the HttpConnectionManager's; 0 means none.
    route.max_stream_duration = action->max_stream_duration.value_or(
        default_max_stream_duration.value_or(std::chrono::nanoseconds(0)));
    // Negative (refused by the parser) or beyond any deadline a clock can
    // hold (the parser saturates durations past 292 years): no cap.
    constexpr auto kLongest = std::chrono::hours(24 * 365 * 100);
    if (route.max_stream_duration < std::chrono::nanoseconds(0) ||
        route.max_stream_duration > kLongest) {
      route.max_stream_duration = std::chrono::nanoseconds(0);
    }
    if (const auto* one = std::get_if<RouteAction::ClusterName>(&action->cluster)) {
      route.clusters.push_back(compiled->ClusterIndex(one->name));
      if (has_faults) route.faults.push_back(FaultPolicies(filters, virtual_host, source, nullptr));
    } else {
      uint64_t sum = 0;
      for (const auto& weighted :
           std::get<RouteAction::WeightedClusters>(action->cluster).clusters) {
        if (weighted.weight == 0) continue;
        sum += weighted.weight;
        route.clusters.push_back(compiled->ClusterIndex(weighted.name));
        route.weight_sums.push_back(sum);
        if (has_faults) {
          route.faults.push_back(
              FaultPolicies(filters, virtual_host, source, &weighted.filter_overrides));
        }
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
  compiled->FindRuns();
  return compiled;
}

uint64_t CompiledRoutes::HashValue(std::string_view value) {
  // Only the run tables use this hash (their keys come from the config and
  // a probe ends at the table's first empty slot): the few multiplies of a
  // 64-bit mix per word, the short tail read as overlapping words.
  auto mix = [](uint64_t x) {
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93;
    x ^= x >> 32;
    return x;
  };
  const char* p = value.data();
  const size_t n = value.size();
  uint64_t hash = 0x9e3779b97f4a7c15 * (n + 1);
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) hash = mix(hash ^ LoadWord64(p + i));
    return mix(hash ^ LoadWord64(p + n - 8));
  }
  uint64_t tail = 0;
  if (n >= 4) {
    tail = LoadWord32(p) | (uint64_t{LoadWord32(p + n - 4)} << 32);
  } else {
    for (size_t i = 0; i < n; ++i) tail |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  }
  return mix(hash ^ tail);
}

void CompiledRoutes::FindRuns() {
  // Whether route i can be in a run, and whether it continues the one
  // route i - 1 is in.
  auto keyed = [&](size_t i) {
    const Route& route = routes_[i];
    if (route.first_test == route.end_test) return false;
    const HeaderTest& test = tests_[route.first_test];
    return test.parsed == nullptr && test.text.kind == TextTest::Kind::kExact &&
           !test.text.ignore_case && !test.invert && test.header != kNeverVisible;
  };
  auto continues = [&](size_t i) {
    return keyed(i) && keyed(i - 1) && routes_[i].same_path_as_previous &&
           tests_[routes_[i].first_test].header == tests_[routes_[i - 1].first_test].header;
  };
  for (size_t first = 0; first < routes_.size();) {
    size_t end = first + 1;
    if (keyed(first)) {
      while (end < routes_.size() && continues(end)) ++end;
    }
    if (end - first >= kMinRun) {
      Run& run = runs_.emplace_back();
      run.end_route = static_cast<uint32_t>(end);
      run.header = tests_[routes_[first].first_test].header;
      size_t capacity = 8;
      while (capacity < 2 * (end - first)) capacity *= 2;
      run.slots.resize(capacity);
      for (size_t i = first; i < end; ++i) {
        const uint64_t hash = HashValue(tests_[routes_[i].first_test].text.value);
        size_t at = hash & (capacity - 1);
        while (run.slots[at].route != kNoRun) at = (at + 1) & (capacity - 1);
        run.slots[at] = Run::Slot{hash, static_cast<uint32_t>(i)};
      }
      routes_[first].run = static_cast<uint32_t>(runs_.size() - 1);
    }
    first = end;
  }
}

const CompiledRoutes::Route* CompiledRoutes::MatchInRun(const Run& run,
                                                        CallRequest& request) const {
  // A28: a missing header fails an exact test: no route of the run matches.
  const CallRequest::Value value = request.ValueOf(*this, run.header);
  if (!value.present()) return nullptr;
  const uint64_t hash = HashValue(value.view());
  const size_t mask = run.slots.size() - 1;
  // Along the probe, the routes whose value hashes alike, in route order.
  for (size_t at = hash & mask; run.slots[at].route != kNoRun; at = (at + 1) & mask) {
    const Run::Slot& slot = run.slots[at];
    if (slot.hash != hash) continue;
    const Route& route = routes_[slot.route];
    const HeaderTest& first = tests_[route.first_test];
    if (first.text.Matches(value.view()) && OthersMatch(route, request, route.first_test + 1)) {
      return &route;
    }
  }
  return nullptr;
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
    choice = Choice{0, ThreadRandom(), {}, nullptr};
    return Outcome::kRouted;
  }
  request.ForgetValues();
  // A28: "the first match wins".
  const Route* matched = nullptr;
  bool path_matches = false;
  for (size_t i = 0; i < routes_.size(); ++i) {
    const Route& route = routes_[i];
    // Routes often share a path matcher (a service's routes told apart by
    // headers): its answer for this call is computed once.
    if (!route.same_path_as_previous) path_matches = PathMatches(route, request.path());
    if (route.run != kNoRun) {
      // Every route of the run has this path matcher.
      const Run& run = runs_[route.run];
      if (path_matches) matched = MatchInRun(run, request);
      if (matched != nullptr) break;
      i = run.end_route - 1;
      continue;
    }
    if (path_matches && OthersMatch(route, request, route.first_test)) {
      matched = &route;
      break;
    }
  }
  if (matched == nullptr) return Outcome::kNoRoute;
  if (!matched->forwards) return Outcome::kNotForwarding;
  size_t at = 0;
  if (!matched->weight_sums.empty()) {
    // A28: each cluster gets a share of the draws proportional to its weight.
    const uint64_t point = ThreadRandom() % matched->weight_sums.back();
    at = static_cast<size_t>(
        std::upper_bound(matched->weight_sums.begin(), matched->weight_sums.end(), point) -
        matched->weight_sums.begin());
  }
  choice.cluster = matched->clusters[at];
  // A33: the faults of the route and cluster, when the filters have any.
  if (!matched->faults.empty()) [[unlikely]] {
    choice.faults = matched->faults[at].empty() ? nullptr : &matched->faults[at];
  }
  std::optional<uint64_t> hash = Hash(*matched, request, channel_id);
  choice.hash = hash.has_value() ? *hash : ThreadRandom();
  choice.max_stream_duration = matched->max_stream_duration;
  return Outcome::kRouted;
}

}  // namespace uxds::client_internal
