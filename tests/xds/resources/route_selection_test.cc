// Route selection (A28) and request hashes (A42) over RouteConfigurations
// decoded by the real decoder from protos built here.
#include "xds/routing/route_selection.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <bit>
#include <map>
#include <string>
#include <vector>

#include "envoy/config/route/v3/route.pb.h"
#include "resource_cases.h"
#include "uxds/xds_resources.h"

namespace uxds::testing {
namespace {

using envoy::config::route::v3::RouteConfiguration;
using Route = RouteConfigResource::Route;
using routing::RpcView;

RouteConfigResource MustDecode(const RouteConfiguration& proto) {
  auto decoded = DecodeRouteConfig(TestDecodeContext(), proto.SerializeAsString());
  EXPECT_TRUE(decoded.resource.ok()) << decoded.resource.status().message();
  return decoded.resource.ok() ? *decoded.resource : RouteConfigResource{};
}

// The cluster name of the route chosen for `rpc`, "" when none matches.
std::string RoutedCluster(const RouteConfigResource::VirtualHost& vhost, const RpcView& rpc,
                          uint32_t draw = 0) {
  const Route* route = routing::SelectRoute(vhost, rpc, [draw] { return draw; });
  if (route == nullptr) return "";
  const auto* action = std::get_if<Route::RouteAction>(&route->action);
  if (action == nullptr) return "<not forwarding>";
  return std::get<Route::RouteAction::ClusterName>(action->cluster).name;
}

std::uint64_t Xxh(std::string_view text) { return XXH64(text.data(), text.size(), 0); }

TEST(RouteSelectionTest, TheFirstMatchingRouteWinsByPathAndCase) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  auto add = [&](const std::string& cluster) {
    auto* route = vhost->add_routes();
    route->mutable_route()->set_cluster(cluster);
    return route->mutable_match();
  };
  // A28: "the first match wins", even when a later route is exact.
  add("prefix")->set_prefix("/pkg.Svc/");
  add("exact")->set_path("/pkg.Svc/Get");
  auto* insensitive = add("insensitive");
  insensitive->set_path("/other.svc/get");
  insensitive->mutable_case_sensitive()->set_value(false);
  add("regex")->mutable_safe_regex()->set_regex("/re\\.Svc/(A|B)");
  add("default")->set_prefix("");
  const RouteConfigResource config = MustDecode(proto);
  const auto& vh = config.virtual_hosts[0];
  EXPECT_EQ(RoutedCluster(vh, {"/pkg.Svc/Get", {}}), "prefix");
  EXPECT_EQ(RoutedCluster(vh, {"/Other.Svc/GET", {}}), "insensitive");
  EXPECT_EQ(RoutedCluster(vh, {"/re.Svc/B", {}}), "regex");
  EXPECT_EQ(RoutedCluster(vh, {"/re.Svc/BB", {}}), "default");    // regexes match whole paths
  EXPECT_EQ(RoutedCluster(vh, {"/PKG.Svc/Get", {}}), "default");  // case-sensitive by default
}

TEST(RouteSelectionTest, HeaderMatchersSeeOnlyCustomMetadata) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  auto add = [&](const std::string& cluster) {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix("");
    route->mutable_route()->set_cluster(cluster);
    return route->mutable_match()->add_headers();
  };
  auto* exact = add("exact");
  exact->set_name("x-env");
  exact->mutable_string_match()->set_exact("canary,blue");
  auto* bin = add("bin");
  bin->set_name("x-token-bin");
  bin->set_present_match(true);
  auto* reserved = add("reserved");
  reserved->set_name("grpc-timeout");
  reserved->set_present_match(true);
  auto* content_type = add("content-type");
  content_type->set_name("content-type");
  content_type->mutable_string_match()->set_exact("application/grpc");
  const RouteConfigResource config = MustDecode(proto);
  const auto& vh = config.virtual_hosts[0];
  // Repeated values are joined with ',' before matching.
  const PickHeader repeated[] = {{"x-env", "canary"}, {"x-env", "blue"}};
  EXPECT_EQ(RoutedCluster(vh, {"/s/m", repeated}), "exact");
  // -bin and grpc- headers behave as absent; content-type is always
  // application/grpc, whatever the RPC carries.
  const PickHeader hidden[] = {
      {"x-token-bin", "AAAA"}, {"grpc-timeout", "1S"}, {"content-type", "text/plain"}};
  EXPECT_EQ(RoutedCluster(vh, {"/s/m", hidden}), "content-type");
}

TEST(RouteSelectionTest, InvertRangeAndRuntimeFraction) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  auto* sampled = vhost->add_routes();
  sampled->mutable_match()->set_prefix("/");
  sampled->mutable_match()->mutable_runtime_fraction()->mutable_default_value()->set_numerator(25);
  sampled->mutable_route()->set_cluster("sampled");
  auto* not_range = vhost->add_routes();
  not_range->mutable_match()->set_prefix("/");
  auto* header = not_range->mutable_match()->add_headers();
  header->set_name("x-shard");
  header->mutable_range_match()->set_start(0);
  header->mutable_range_match()->set_end(10);
  header->set_invert_match(true);
  not_range->mutable_route()->set_cluster("outside");
  auto* rest = vhost->add_routes();
  rest->mutable_match()->set_prefix("/");
  rest->mutable_route()->set_cluster("rest");
  const RouteConfigResource config = MustDecode(proto);
  const auto& vh = config.virtual_hosts[0];
  // 25 % = 250000 per million: draws below it match.
  EXPECT_EQ(RoutedCluster(vh, {"/s/m", {}}, 249'999), "sampled");
  const PickHeader in_range[] = {{"x-shard", "7"}};
  const PickHeader out_of_range[] = {{"x-shard", "12"}};
  EXPECT_EQ(RoutedCluster(vh, {"/s/m", in_range}, 250'000), "rest");
  EXPECT_EQ(RoutedCluster(vh, {"/s/m", out_of_range}, 250'000), "outside");
}

TEST(RouteSelectionTest, WeightedClustersGetDrawsInProportion) {
  Route::RouteAction::WeightedClusters weighted;
  weighted.clusters = {{"a", 1}, {"b", 3}};
  std::map<std::string, int> counts;
  for (uint64_t draw = 0; draw < 4000; ++draw) {
    counts[std::string(routing::PickWeightedCluster(weighted, draw))]++;
  }
  EXPECT_EQ(counts["a"], 1000);
  EXPECT_EQ(counts["b"], 3000);
}

TEST(RouteSelectionTest, RequestHashCombinesPoliciesAsGrpcDoes) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  auto* route = vhost->add_routes();
  route->mutable_match()->set_prefix("");
  auto* action = route->mutable_route();
  action->set_cluster("c");
  auto* cookie = action->add_hash_policy();  // unsupported: produces nothing
  cookie->mutable_cookie()->set_name("session");
  cookie->set_terminal(true);
  auto* user = action->add_hash_policy()->mutable_header();
  user->set_header_name("x-user");
  user->mutable_regex_rewrite()->mutable_pattern()->set_regex("-[0-9]+");
  user->mutable_regex_rewrite()->set_substitution("");
  auto* channel = action->add_hash_policy();
  channel->mutable_filter_state()->set_key("io.grpc.channel_id");
  channel->set_terminal(true);
  action->add_hash_policy()->mutable_header()->set_header_name("x-never-reached");
  const RouteConfigResource config = MustDecode(proto);
  const auto& policies =
      std::get<Route::RouteAction>(config.virtual_hosts[0].routes[0].action).hash_policies;
  ASSERT_EQ(policies.size(), 4u);
  constexpr uint64_t kChannelId = 0x1234'5678'9abc'def0;
  // Header (rewritten "alice-12,bob-7" -> "alice,bob"), then the channel id;
  // the terminal channel-id policy ends the walk; the unsupported terminal
  // policy before them produced nothing, so it did not.
  const PickHeader headers[] = {
      {"x-user", "alice-12"}, {"x-user", "bob-7"}, {"x-never-reached", "z"}};
  const std::optional<uint64_t> hash =
      routing::ComputeRequestHash(policies, {"/s/m", headers}, kChannelId);
  ASSERT_TRUE(hash.has_value());
  EXPECT_EQ(*hash, std::rotl(Xxh("alice,bob"), 1) ^ kChannelId);
  // Without the header only the channel id contributes.
  EXPECT_EQ(routing::ComputeRequestHash(policies, {"/s/m", {}}, kChannelId), kChannelId);
  // No policy producing anything: no hash (the caller draws a random one).
  const std::vector<RouteConfigResource::HashPolicy> header_only(policies.begin() + 1,
                                                                 policies.begin() + 2);
  EXPECT_EQ(routing::ComputeRequestHash(header_only, {"/s/m", {}}, kChannelId), std::nullopt);
}

}  // namespace
}  // namespace uxds::testing
