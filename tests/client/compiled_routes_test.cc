// The call path's compiled routes against the reference route selection
// (routing::SelectRoute, ComputeRequestHash: A28, A42) over
// RouteConfigurations decoded by the real decoder: the same route, cluster
// and hash for every request of a generated set; weighted clusters and
// runtime fractions in proportion; and no allocation for a call with 16
// metadata entries (counted by support/allocation_counter's operator new).
#include "client/compiled_routes.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <map>
#include <new>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "envoy/config/route/v3/route.pb.h"
#include "support/allocation_counter.h"
#include "uxds/xds_resources.h"
#include "xds/resources/resource_decoders.h"
#include "xds/routing/route_selection.h"

namespace uxds::testing {
namespace {

using client_internal::CallRequest;
using client_internal::CompiledRoutes;
using envoy::config::route::v3::RouteConfiguration;
using Route = RouteConfigResource::Route;

RouteConfigResource MustDecode(const RouteConfiguration& proto) {
  Bootstrap bootstrap;
  bootstrap.xds_servers.emplace_back().server_uri = "xds.test.example:443";
  const XdsDecodeContext context{bootstrap, bootstrap.xds_servers.front()};
  auto decoded = DecodeRouteConfig(context, proto.SerializeAsString());
  EXPECT_TRUE(decoded.resource.ok()) << decoded.resource.status().message();
  return decoded.resource.ok() ? *decoded.resource : RouteConfigResource{};
}

constexpr uint64_t kChannelId = 0x0123'4567'89ab'cdef;

// What the reference selection says of one request: the cluster ("" for
// no route, "<not forwarding>") and the hash when the policies made one.
struct Expected {
  std::string cluster;
  std::optional<uint64_t> hash;
};

Expected Reference(const RouteConfigResource::VirtualHost& vhost, const routing::RpcView& rpc) {
  const Route* route = routing::SelectRoute(vhost, rpc, [] { return 0u; });
  if (route == nullptr) return {"", std::nullopt};
  const auto* action = std::get_if<Route::RouteAction>(&route->action);
  if (action == nullptr) return {"<not forwarding>", std::nullopt};
  return {std::get<Route::RouteAction::ClusterName>(action->cluster).name,
          routing::ComputeRequestHash(action->hash_policies, rpc, kChannelId)};
}

Expected Compiled(const CompiledRoutes& routes, std::string_view path,
                  const std::vector<std::pair<std::string, std::string>>& metadata) {
  CallRequest request(path, metadata);
  CompiledRoutes::Choice choice;
  switch (routes.Choose(request, kChannelId, choice)) {
    case CompiledRoutes::Outcome::kNoRoute:
      return {"", std::nullopt};
    case CompiledRoutes::Outcome::kNotForwarding:
      return {"<not forwarding>", std::nullopt};
    case CompiledRoutes::Outcome::kRouted:
      break;
  }
  return {routes.clusters()[choice.cluster], choice.hash};
}

// Routes over a few header names with every matcher kind, path kind and
// hash policy kind; clusters repeat, so indices are shared.
RouteConfiguration ManyKindsOfRoutes() {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  int next = 0;
  auto add = [&](std::string_view prefix) {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix(std::string(prefix));
    auto* action = route->mutable_route();
    action->set_cluster("cluster-" + std::to_string(next++ % 5));
    auto* by_user = action->add_hash_policy()->mutable_header();
    by_user->set_header_name("x-user");
    return route;
  };
  {
    auto* header = add("/a.")->mutable_match()->add_headers();
    header->set_name("x-env");
    header->set_present_match(true);
    header->set_invert_match(true);
  }
  {
    auto* header = add("/a.")->mutable_match()->add_headers();
    header->set_name("x-env");
    header->mutable_string_match()->set_exact("canary,blue");
  }
  {
    auto* route = add("");
    route->mutable_match()->set_path("/b.Svc/Get");
    route->mutable_match()->mutable_case_sensitive()->set_value(false);
    auto* header = route->mutable_match()->add_headers();
    header->set_name("x-shard");
    header->mutable_range_match()->set_start(0);
    header->mutable_range_match()->set_end(8);
    header->set_invert_match(true);
  }
  {
    auto* route = add("");
    route->mutable_match()->mutable_safe_regex()->set_regex("/b\\.Svc/(Put|Del)");
    auto* header = route->mutable_match()->add_headers();
    header->set_name("x-user");
    header->mutable_string_match()->set_contains("ALI");
    header->mutable_string_match()->set_ignore_case(true);
    auto* policy = route->mutable_route()->add_hash_policy();
    policy->mutable_filter_state()->set_key("io.grpc.channel_id");
    policy->set_terminal(true);
  }
  {
    auto* route = add("/b.");
    auto* header = route->mutable_match()->add_headers();
    header->set_name("x-user");
    header->mutable_string_match()->set_suffix("-7");
    auto* rewrite = route->mutable_route()->add_hash_policy()->mutable_header();
    rewrite->set_header_name("x-env");
    rewrite->mutable_regex_rewrite()->mutable_pattern()->set_regex("[0-9]+");
    rewrite->mutable_regex_rewrite()->set_substitution("N");
  }
  {
    // The other string forms: exact and prefix ignoring case, an inverted
    // exact, a path prefix ignoring case.
    auto* route = add("/B.svc/p");
    route->mutable_match()->mutable_case_sensitive()->set_value(false);
    auto* env = route->mutable_match()->add_headers();
    env->set_name("x-env");
    env->mutable_string_match()->set_exact("PROD-12");
    env->mutable_string_match()->set_ignore_case(true);
    auto* shard = route->mutable_match()->add_headers();
    shard->set_name("x-shard");
    shard->mutable_string_match()->set_exact("12");
    shard->set_invert_match(true);
  }
  // A run of routes told apart by x-shard's exact value (looked up in a
  // table): a value twice, the first of them also testing x-user.
  bool first_of_run = true;
  for (const char* shard : {"3", "12", "3", "x", "12"}) {
    auto* route = add("/b.Svc/P");
    auto* header = route->mutable_match()->add_headers();
    header->set_name("x-shard");
    header->mutable_string_match()->set_exact(shard);
    if (std::exchange(first_of_run, false)) {
      auto* user = route->mutable_match()->add_headers();
      user->set_name("x-user");
      user->mutable_string_match()->set_prefix("alice");
    }
  }
  {
    auto* route = add("/b.Svc/");
    auto* env = route->mutable_match()->add_headers();
    env->set_name("x-env");
    env->mutable_string_match()->set_prefix("CAN");
    env->mutable_string_match()->set_ignore_case(true);
    auto* user = route->mutable_match()->add_headers();
    user->set_name("x-user");
    user->mutable_string_match()->set_suffix("B-7");
    user->mutable_string_match()->set_ignore_case(true);
    user->set_invert_match(true);
  }
  {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix("/c.Svc/Redirect");
    route->mutable_redirect()->set_host_redirect("elsewhere");
  }
  {
    auto* route = add("/c.");
    auto* hidden = route->mutable_match()->add_headers();
    hidden->set_name("x-token-bin");
    hidden->set_present_match(false);
    auto* content_type = route->mutable_match()->add_headers();
    content_type->set_name("content-type");
    content_type->mutable_string_match()->set_prefix("application/grpc");
    auto* reserved = route->mutable_route()->add_hash_policy()->mutable_header();
    reserved->set_header_name("grpc-timeout");
  }
  add("/c.");
  return proto;
}

TEST(CompiledRoutesTest, ChoosesWhatTheReferenceSelectionChooses) {
  const RouteConfigResource config = MustDecode(ManyKindsOfRoutes());
  const auto& vhost = config.virtual_hosts[0];
  const std::shared_ptr<const CompiledRoutes> routes = CompiledRoutes::Compile(vhost);
  const std::vector<std::string> paths = {"/a.Svc/M",        "/b.Svc/Get",  "/B.SVC/GET",
                                          "/b.Svc/Put",      "/b.Svc/Del",  "/b.Svc/Other",
                                          "/c.Svc/Redirect", "/c.Svc/Call", "/d.Svc/None"};
  const std::vector<std::pair<std::string, std::string>> pool = {
      {"x-env", "canary"},   {"x-env", "blue"},      {"x-env", "prod-12"},
      {"x-env", "Prod-12"},  {"x-env", "CANARY-2"},  {"x-user", "BOB-7"},
      {"x-shard", "3"},      {"x-shard", "12"},      {"x-shard", "x"},
      {"x-user", "alice-7"}, {"x-user", "bob-7"},    {"x-user", "MALIK"},
      {"x-token-bin", "AA"}, {"grpc-timeout", "1S"}, {"content-type", "text/plain"},
      {"x-other", "1"}};
  std::mt19937 random(7);
  size_t routed = 0;
  std::map<std::string, int> seen;
  for (int i = 0; i < 20000; ++i) {
    const std::string& path = paths[random() % paths.size()];
    std::vector<std::pair<std::string, std::string>> metadata;
    const size_t count = random() % 6;
    for (size_t j = 0; j < count; ++j) metadata.push_back(pool[random() % pool.size()]);
    std::vector<PickHeader> views;
    for (const auto& [name, value] : metadata) views.push_back({name, value});
    const Expected expected = Reference(vhost, {path, views});
    const Expected compiled = Compiled(*routes, path, metadata);
    ASSERT_EQ(compiled.cluster, expected.cluster) << path << " request " << i;
    if (expected.hash.has_value()) {
      ASSERT_EQ(compiled.hash, expected.hash) << path << " request " << i;
    }
    ++seen[expected.cluster];
    if (!expected.cluster.empty() && expected.cluster[0] != '<') ++routed;
  }
  // The set reached every outcome, not just one route.
  EXPECT_GE(seen.size(), 6u);
  EXPECT_TRUE(seen.contains("")) << "no request went unrouted";
  EXPECT_TRUE(seen.contains("<not forwarding>"));
  EXPECT_GT(routed, 5000u);
  EXPECT_EQ(routes->clusters().size(), 5u);
}

// Routes told apart by one header's exact value are looked up by that
// value (a table over the run): still the first match in route order, and
// a call the run cannot take goes on to the routes after it.
TEST(CompiledRoutesTest, ARunOfRoutesByHeaderValueKeepsRouteOrder) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  int next = 0;
  auto add = [&](const std::string& tenant, const std::string& user_prefix) {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix("/svc.");
    auto* header = route->mutable_match()->add_headers();
    header->set_name("x-tenant");
    header->mutable_string_match()->set_exact(tenant);
    if (!user_prefix.empty()) {
      auto* user = route->mutable_match()->add_headers();
      user->set_name("x-user");
      user->mutable_string_match()->set_prefix(user_prefix);
    }
    route->mutable_route()->set_cluster("route-" + std::to_string(next++));
  };
  add("a", "alice");                                              // route-0
  add("b", "");                                                   // route-1
  add("a", "");                                                   // route-2: "a" without an alice
  for (int i = 0; i < 40; ++i) add("t" + std::to_string(i), "");  // route-3..42
  add("b", "");  // route-43: never reached, route-1 takes "b" first
  auto* rest = vhost->add_routes();
  rest->mutable_match()->set_prefix("");
  rest->mutable_route()->set_cluster("rest");
  const RouteConfigResource config = MustDecode(proto);
  const auto& host = config.virtual_hosts[0];
  const std::shared_ptr<const CompiledRoutes> routes = CompiledRoutes::Compile(host);
  auto route_of = [&](const std::string& path,
                      const std::vector<std::pair<std::string, std::string>>& metadata) {
    const std::string compiled = Compiled(*routes, path, metadata).cluster;
    std::vector<PickHeader> views;
    for (const auto& [name, value] : metadata) views.push_back({name, value});
    EXPECT_EQ(compiled, Reference(host, {path, views}).cluster) << path;
    return compiled;
  };
  EXPECT_EQ(route_of("/svc.S/M", {{"x-tenant", "a"}, {"x-user", "alice-1"}}), "route-0");
  EXPECT_EQ(route_of("/svc.S/M", {{"x-tenant", "a"}, {"x-user", "bob"}}), "route-2");
  EXPECT_EQ(route_of("/svc.S/M", {{"x-tenant", "b"}}), "route-1");
  EXPECT_EQ(route_of("/svc.S/M", {{"x-tenant", "t17"}}), "route-20");
  EXPECT_EQ(route_of("/svc.S/M", {{"x-tenant", "t40"}}), "rest");
  EXPECT_EQ(route_of("/svc.S/M", {{"x-user", "alice"}}), "rest");
  EXPECT_EQ(route_of("/other/M", {{"x-tenant", "a"}}), "rest");
  // A28: a header sent twice is matched joined: "t1,t2" is no tenant.
  EXPECT_EQ(route_of("/svc.S/M", {{"x-tenant", "t1"}, {"x-tenant", "t2"}}), "rest");
}

TEST(CompiledRoutesTest, WeightedClustersAndRuntimeFractionsDrawInProportion) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  auto* sampled = vhost->add_routes();
  sampled->mutable_match()->set_prefix("/");
  sampled->mutable_match()->mutable_runtime_fraction()->mutable_default_value()->set_numerator(25);
  sampled->mutable_route()->set_cluster("sampled");
  auto* weighted = vhost->add_routes();
  weighted->mutable_match()->set_prefix("/");
  auto* clusters = weighted->mutable_route()->mutable_weighted_clusters();
  auto add_weight = [&](const char* name, uint32_t weight) {
    auto* cluster = clusters->add_clusters();
    cluster->set_name(name);
    cluster->mutable_weight()->set_value(weight);
  };
  add_weight("a", 1);
  add_weight("b", 3);
  add_weight("sampled", 4);  // a cluster two routes name has one index
  const RouteConfigResource config = MustDecode(proto);
  const std::shared_ptr<const CompiledRoutes> routes =
      CompiledRoutes::Compile(config.virtual_hosts[0]);
  ASSERT_EQ(routes->clusters(), (std::vector<std::string>{"sampled", "a", "b"}));
  std::map<std::string, int> counts;
  constexpr int kCalls = 80000;
  for (int i = 0; i < kCalls; ++i) ++counts[Compiled(*routes, "/s/m", {}).cluster];
  // 25 % go to the sampled route; the other 75 % split 1 : 3 : 4. Within
  // 5 standard deviations of a binomial draw (each under 0.0078).
  auto share = [&](const char* name) { return counts[name] / static_cast<double>(kCalls); };
  EXPECT_NEAR(share("a"), 0.75 * 1 / 8, 0.008);
  EXPECT_NEAR(share("b"), 0.75 * 3 / 8, 0.008);
  EXPECT_NEAR(share("sampled"), 0.25 + 0.75 * 4 / 8, 0.008);
}

TEST(CompiledRoutesTest, DirectTargetsRouteEveryCallToTheirCluster) {
  const std::shared_ptr<const CompiledRoutes> routes = CompiledRoutes::Direct("127.0.0.1:80");
  EXPECT_EQ(Compiled(*routes, "/any.Svc/M", {{"x", "y"}}).cluster, "127.0.0.1:80");
  EXPECT_EQ(routes->IndexOf("127.0.0.1:80"), 0u);
  EXPECT_EQ(routes->IndexOf("other"), std::nullopt);
}

// Ten routes with header matchers, a header hash policy, 16 metadata
// entries: routing and hashing a call allocate nothing.
TEST(CompiledRoutesTest, RoutingACallWithSixteenMetadataEntriesAllocatesNothing) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  for (int i = 0; i < 10; ++i) {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix("/svc.");
    auto* header = route->mutable_match()->add_headers();
    header->set_name("x-tenant");
    header->mutable_string_match()->set_exact("tenant-" + std::to_string(i));
    auto* contains = route->mutable_match()->add_headers();
    contains->set_name("x-region");
    contains->mutable_string_match()->set_contains("EU");
    contains->mutable_string_match()->set_ignore_case(true);
    route->mutable_route()->set_cluster("cluster-" + std::to_string(i));
    route->mutable_route()->add_hash_policy()->mutable_header()->set_header_name("x-user");
  }
  const RouteConfigResource config = MustDecode(proto);
  const std::shared_ptr<const CompiledRoutes> routes =
      CompiledRoutes::Compile(config.virtual_hosts[0]);
  std::vector<std::pair<std::string, std::string>> metadata;
  for (int i = 0; i < 13; ++i) {
    metadata.emplace_back("x-extra-header-" + std::to_string(i), "some value that is long");
  }
  metadata.emplace_back("x-region", "west-eu-1");
  metadata.emplace_back("x-tenant", "tenant-9");
  metadata.emplace_back("x-user", "user-1234567890-abcdefghij");
  ASSERT_EQ(metadata.size(), 16u);
  const std::string path = "/svc.Service/Method";
  const uint64_t want = XXH64("user-1234567890-abcdefghij", 26, 0);
  StartCountingAllocations();
  for (int i = 0; i < 1000; ++i) {
    CallRequest request(path, metadata);
    CompiledRoutes::Choice choice;
    const CompiledRoutes::Outcome outcome = routes->Choose(request, kChannelId, choice);
    if (outcome != CompiledRoutes::Outcome::kRouted || choice.cluster != 9 || choice.hash != want) {
      StopCountingAllocations();
      FAIL() << "call " << i << " routed to " << choice.cluster;
    }
  }
  EXPECT_EQ(StopCountingAllocations(), 0u);
  // The counter counts: a header a matcher reads, sent twice, is matched
  // as its values joined (A28), the one string routing makes.
  metadata.emplace_back("x-tenant", "again");
  StartCountingAllocations();
  {
    CallRequest request(path, metadata);
    CompiledRoutes::Choice choice;
    EXPECT_EQ(routes->Choose(request, kChannelId, choice), CompiledRoutes::Outcome::kNoRoute);
  }
  EXPECT_EQ(StopCountingAllocations(), 1u);
}

}  // namespace
}  // namespace uxds::testing
