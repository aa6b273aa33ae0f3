// Listener decoding: the table in listener_cases.json, plus CIDR matching,
// the bound on normalized matchers, equality and the XdsResourceType.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "resource_cases.h"
#include "uxds/xds_resources.h"

namespace uxds::testing {
namespace {

using envoy::config::listener::v3::Listener;
using envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

class ListenerCaseTest : public ::testing::TestWithParam<ResourceCase> {};

TEST_P(ListenerCaseTest, DecodesAsExpected) {
  const ResourceCase& c = GetParam();
  CheckResourceCase(c, DecodeListener(TestDecodeContext(), c.bytes));
}

INSTANTIATE_TEST_SUITE_P(Table, ListenerCaseTest,
                         ::testing::ValuesIn(LoadResourceCases("listener_cases")),
                         ResourceCaseName);

HttpConnectionManager RdsHcm(const std::string& route_config_name) {
  HttpConnectionManager hcm;
  hcm.mutable_rds()->mutable_config_source()->mutable_ads();
  hcm.mutable_rds()->set_route_config_name(route_config_name);
  auto* router = hcm.add_http_filters();
  router->set_name("router");
  router->mutable_typed_config()->PackFrom(envoy::extensions::filters::http::router::v3::Router());
  return hcm;
}

Listener ServerListener(int chains) {
  Listener listener;
  listener.set_name("s");
  auto* socket_address = listener.mutable_address()->mutable_socket_address();
  socket_address->set_address("0.0.0.0");
  socket_address->set_port_value(8080);
  for (int i = 0; i < chains; ++i) {
    auto* chain = listener.add_filter_chains();
    auto* range = chain->mutable_filter_chain_match()->add_prefix_ranges();
    range->set_address_prefix("10.0." + std::to_string(i) + ".0");
    range->mutable_prefix_len()->set_value(24);
    auto* filter = chain->add_filters();
    filter->set_name("hcm");
    filter->mutable_typed_config()->PackFrom(RdsHcm("rc" + std::to_string(i)));
  }
  return listener;
}

ListenerResource MustDecode(const Listener& listener) {
  auto decoded = DecodeListener(TestDecodeContext(), listener.SerializeAsString());
  EXPECT_TRUE(decoded.resource.ok()) << decoded.resource.status().message();
  return decoded.resource.ok() ? *decoded.resource : ListenerResource{};
}

TEST(ListenerDecoderTest, CidrRangesContainTheirAddresses) {
  const ListenerResource resource = MustDecode(ServerListener(2));
  const auto& tcp = std::get<ListenerResource::TcpListener>(resource.listener);
  const CidrRange& range = tcp.filter_chains[1].filter_chain_match.prefix_ranges[0];
  EXPECT_EQ(range.ToString(), "10.0.1.0/24");
  EXPECT_TRUE(range.Contains(std::array<uint8_t, 4>{10, 0, 1, 200}));
  EXPECT_FALSE(range.Contains(std::array<uint8_t, 4>{10, 0, 2, 1}));
  std::array<uint8_t, 16> v6{};
  EXPECT_FALSE(range.Contains(v6));  // another family

  CidrRange odd;  // 172.16.0.0/12: a prefix that ends inside a byte
  odd.address = {172, 16};
  odd.prefix_len = 12;
  EXPECT_TRUE(odd.Contains(std::array<uint8_t, 4>{172, 31, 255, 255}));
  EXPECT_FALSE(odd.Contains(std::array<uint8_t, 4>{172, 32, 0, 0}));
  CidrRange all;
  EXPECT_TRUE(all.Contains(std::array<uint8_t, 4>{1, 2, 3, 4}));
}

TEST(ListenerDecoderTest, NormalizedMatchersAreBounded) {
  Listener listener = ServerListener(1);
  auto* match = listener.mutable_filter_chains(0)->mutable_filter_chain_match();
  for (int i = 0; i < 300; ++i) match->add_source_ports(i + 1);
  for (int i = 0; i < 300; ++i) match->add_server_names("n" + std::to_string(i));
  auto decoded = DecodeListener(TestDecodeContext(), listener.SerializeAsString());
  ASSERT_FALSE(decoded.resource.ok());
  EXPECT_EQ(decoded.resource.status().message(),
            "errors validating server Listener: [field:filter_chains[0].filter_chain_match "
            "error:more than 65536 combinations of matching rules in the Listener]");
  // Below the bound everything is expanded and checked.
  match->clear_server_names();
  EXPECT_EQ(std::get<ListenerResource::TcpListener>(MustDecode(listener).listener)
                .filter_chain_map.destination_ips[0]
                .source_types[0][0]
                .ports.size(),
            300u);
}

TEST(ListenerDecoderTest, EqualityIsDeep) {
  const Listener listener = ServerListener(3);
  const ListenerResource base = MustDecode(listener);
  EXPECT_EQ(base, MustDecode(listener));
  Listener changed = listener;
  changed.mutable_filter_chains(2)->mutable_filters(0)->mutable_typed_config()->PackFrom(
      RdsHcm("other"));
  EXPECT_NE(base, MustDecode(changed));
  changed = listener;
  changed.mutable_filter_chains(1)->mutable_filter_chain_match()->add_source_ports(9);
  EXPECT_NE(base, MustDecode(changed));
  changed = listener;
  changed.mutable_address()->mutable_socket_address()->set_port_value(8081);
  EXPECT_NE(base, MustDecode(changed));
  changed = listener;
  *changed.mutable_default_filter_chain() = listener.filter_chains(0);
  EXPECT_NE(base, MustDecode(changed));
}

TEST(ListenerResourceTypeTest, DecodesThroughTheXdsClientInterface) {
  const auto& type = ListenerResourceType::Get();
  EXPECT_EQ(type.type_url(), "type.googleapis.com/envoy.config.listener.v3.Listener");
  EXPECT_TRUE(type.all_resources_required_in_sotw());
  Listener client;
  client.set_name("target");
  client.mutable_api_listener()->mutable_api_listener()->PackFrom(RdsHcm("rc"));
  auto decoded = type.Decode(TestDecodeContext(), client.SerializeAsString());
  EXPECT_EQ(decoded.name, "target");
  ASSERT_TRUE(decoded.resource.ok());
  auto again = type.Decode(TestDecodeContext(), client.SerializeAsString());
  ASSERT_TRUE(again.resource.ok());
  EXPECT_TRUE(type.ResourcesEqual(*decoded.resource, *again.resource));
  EXPECT_EQ(
      nlohmann::json::parse(type.ResourceToJson(
          *decoded.resource))["api_listener"]["http_connection_manager"]["rds_route_config_name"],
      "rc");
  auto server = type.Decode(TestDecodeContext(), ServerListener(1).SerializeAsString());
  ASSERT_TRUE(server.resource.ok());
  EXPECT_FALSE(type.ResourcesEqual(*decoded.resource, *server.resource));
}

}  // namespace
}  // namespace uxds::testing
