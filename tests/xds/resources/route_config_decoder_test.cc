// RouteConfiguration decoding: the table in route_config_cases.json, plus
// virtual host selection, the matchers and hash-policy regexes the decoder
// compiles, equality and the XdsResourceType.
#include <gtest/gtest.h>

#include <string>

#include "envoy/config/route/v3/route.pb.h"
#include "resource_cases.h"
#include "uxds/xds_resources.h"

namespace uxds::testing {
namespace {

using envoy::config::route::v3::RouteConfiguration;
using Route = RouteConfigResource::Route;

class RouteConfigCaseTest : public ::testing::TestWithParam<ResourceCase> {};

TEST_P(RouteConfigCaseTest, DecodesAsExpected) {
  const ResourceCase& c = GetParam();
  CheckResourceCase(c, DecodeRouteConfig(TestDecodeContext(), c.bytes));
}

INSTANTIATE_TEST_SUITE_P(Table, RouteConfigCaseTest,
                         ::testing::ValuesIn(LoadResourceCases("route_config_cases")),
                         ResourceCaseName);

RouteConfigResource MustDecode(const RouteConfiguration& proto) {
  auto decoded = DecodeRouteConfig(TestDecodeContext(), proto.SerializeAsString());
  EXPECT_TRUE(decoded.resource.ok()) << decoded.resource.status().message();
  return decoded.resource.ok() ? *decoded.resource : RouteConfigResource{};
}

RouteConfigResource WithDomains(std::vector<std::vector<std::string>> vhost_domains) {
  RouteConfigResource resource;
  for (auto& domains : vhost_domains) {
    resource.virtual_hosts.push_back({.domains = std::move(domains), .routes = {}});
  }
  return resource;
}

// Index of the virtual host FindVirtualHost picks, -1 for none.
int Pick(const RouteConfigResource& resource, std::string_view authority) {
  const auto* vhost = resource.FindVirtualHost(authority);
  return vhost == nullptr ? -1 : static_cast<int>(vhost - resource.virtual_hosts.data());
}

TEST(RouteConfigTest, VirtualHostsAreChosenByTheMostSpecificDomain) {
  const RouteConfigResource resource =
      WithDomains({{"*"}, {"api.*"}, {"*.example.com"}, {"*.b.example.com"}, {"api.example.com"}});
  EXPECT_EQ(Pick(resource, "api.example.com"), 4);
  EXPECT_EQ(Pick(resource, "API.Example.COM"), 4);
  EXPECT_EQ(Pick(resource, "a.b.example.com"), 3);  // longer suffix wins
  EXPECT_EQ(Pick(resource, "x.example.com"), 2);    // suffix before prefix
  EXPECT_EQ(Pick(resource, "api.other.org"), 1);
  EXPECT_EQ(Pick(resource, "other.org"), 0);
  // The '*' stands for at least one character.
  EXPECT_EQ(Pick(WithDomains({{"*.example.com"}}), ".example.com"), -1);
  EXPECT_EQ(Pick(WithDomains({{"api.*"}}), "api."), -1);
  EXPECT_EQ(Pick(WithDomains({{"a"}, {"b"}}), "c"), -1);
  // A tie goes to the first virtual host.
  EXPECT_EQ(Pick(WithDomains({{"x", "*.com"}, {"*.com"}}), "y.com"), 0);
}

TEST(RouteConfigTest, DecodedMatchersMatch) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  auto* route = vhost->add_routes();
  route->mutable_match()->mutable_safe_regex()->set_regex("/svc/(Get|Put)");
  auto* header = route->mutable_match()->add_headers();
  header->set_name("x-version");
  header->mutable_range_match()->set_start(2);
  header->mutable_range_match()->set_end(5);
  route->mutable_route()->set_cluster("c");
  const RouteConfigResource resource = MustDecode(proto);
  ASSERT_EQ(resource.virtual_hosts[0].routes.size(), 1u);
  const Route::Matchers& matchers = resource.virtual_hosts[0].routes[0].matchers;
  EXPECT_TRUE(matchers.path.Matches("/svc/Get"));
  EXPECT_FALSE(matchers.path.Matches("/svc/Gets"));  // a full match
  ASSERT_EQ(matchers.headers.size(), 1u);
  EXPECT_TRUE(matchers.headers[0].Matches("2"));
  EXPECT_TRUE(matchers.headers[0].Matches("4"));
  EXPECT_FALSE(matchers.headers[0].Matches("5"));  // [start, end)
  EXPECT_FALSE(matchers.headers[0].Matches("3x"));
  EXPECT_FALSE(matchers.headers[0].Matches(std::nullopt));
}

TEST(RouteConfigTest, HashPolicyRewriteUsesTheCompiledRegex) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  auto* route = vhost->add_routes();
  route->mutable_match()->set_prefix("");
  route->mutable_route()->set_cluster("c");
  auto* rewrite =
      route->mutable_route()->add_hash_policy()->mutable_header()->mutable_regex_rewrite();
  route->mutable_route()->mutable_hash_policy(0)->mutable_header()->set_header_name("x-user");
  rewrite->mutable_pattern()->set_regex("-[0-9]+");
  rewrite->set_substitution("");
  const RouteConfigResource resource = MustDecode(proto);
  const auto& action = std::get<Route::RouteAction>(resource.virtual_hosts[0].routes[0].action);
  const auto& header =
      std::get<RouteConfigResource::HashPolicy::Header>(action.hash_policies[0].policy);
  std::string value = "alice-12-b-7";
  EXPECT_EQ(header.regex.GlobalReplace(&value, header.regex_substitution), 2);
  EXPECT_EQ(value, "alice-b");
}

TEST(RouteConfigTest, EqualityComparesRegexPatternsAndEverythingElse) {
  RouteConfiguration proto;
  auto* vhost = proto.add_virtual_hosts();
  vhost->add_domains("*");
  auto* route = vhost->add_routes();
  route->mutable_match()->mutable_safe_regex()->set_regex("/a.*");
  route->mutable_route()->set_cluster("c");
  const RouteConfigResource base = MustDecode(proto);
  EXPECT_EQ(base, MustDecode(proto));  // separately compiled, equal patterns

  RouteConfiguration changed = proto;
  changed.mutable_virtual_hosts(0)
      ->mutable_routes(0)
      ->mutable_match()
      ->mutable_safe_regex()
      ->set_regex("/b.*");
  EXPECT_NE(base, MustDecode(changed));
  changed = proto;
  changed.mutable_virtual_hosts(0)->mutable_routes(0)->mutable_route()->set_cluster("d");
  EXPECT_NE(base, MustDecode(changed));
  changed = proto;
  changed.mutable_virtual_hosts(0)->add_domains("x");
  EXPECT_NE(base, MustDecode(changed));
  changed = proto;
  changed.mutable_virtual_hosts(0)->mutable_routes(0)->mutable_non_forwarding_action();
  EXPECT_NE(base, MustDecode(changed));
}

TEST(RouteConfigResourceTypeTest, DecodesThroughTheXdsClientInterface) {
  const auto& type = RouteConfigResourceType::Get();
  EXPECT_EQ(type.type_url(), "type.googleapis.com/envoy.config.route.v3.RouteConfiguration");
  EXPECT_FALSE(type.all_resources_required_in_sotw());
  RouteConfiguration proto;
  proto.set_name("rc");
  proto.add_virtual_hosts()->add_domains("*");
  auto decoded = type.Decode(TestDecodeContext(), proto.SerializeAsString());
  EXPECT_EQ(decoded.name, "rc");
  ASSERT_TRUE(decoded.resource.ok());
  EXPECT_EQ(nlohmann::json::parse(
                type.ResourceToJson(*decoded.resource))["virtual_hosts"][0]["domains"][0],
            "*");
  proto.mutable_virtual_hosts(0)->clear_domains();
  auto bad = type.Decode(TestDecodeContext(), proto.SerializeAsString());
  EXPECT_EQ(bad.name, "rc");
  ASSERT_FALSE(bad.resource.ok());
  EXPECT_EQ(bad.resource.status().message(),
            "errors validating RouteConfiguration resource: [field:virtual_hosts[0].domains "
            "error:must be non-empty]");
}

}  // namespace
}  // namespace uxds::testing
