// ClusterLoadAssignment decoding: the table in endpoint_cases.json, plus
// equality and the XdsResourceType.
#include <gtest/gtest.h>

#include <string>

#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "resource_cases.h"
#include "uxds/xds_resources.h"

namespace uxds::testing {
namespace {

using envoy::config::endpoint::v3::ClusterLoadAssignment;

class EndpointCaseTest : public ::testing::TestWithParam<ResourceCase> {};

TEST_P(EndpointCaseTest, DecodesAsExpected) {
  const ResourceCase& c = GetParam();
  CheckResourceCase(c, DecodeEndpoints(TestDecodeContext(), c.bytes));
}

INSTANTIATE_TEST_SUITE_P(Table, EndpointCaseTest,
                         ::testing::ValuesIn(LoadResourceCases("endpoint_cases")),
                         ResourceCaseName);

ClusterLoadAssignment Assignment() {
  ClusterLoadAssignment cla;
  cla.set_cluster_name("svc");
  for (int i = 0; i < 3; ++i) {
    auto* locality = cla.add_endpoints();
    locality->mutable_locality()->set_zone("z" + std::to_string(i));
    locality->mutable_load_balancing_weight()->set_value(10 + i);
    locality->set_priority(i % 2);
    auto* socket_address = locality->add_lb_endpoints()
                               ->mutable_endpoint()
                               ->mutable_address()
                               ->mutable_socket_address();
    socket_address->set_address("10.0.0." + std::to_string(i));
    socket_address->set_port_value(8080);
  }
  auto* drop = cla.mutable_policy()->add_drop_overloads();
  drop->set_category("lb");
  drop->mutable_drop_percentage()->set_numerator(1);
  return cla;
}

EndpointResource MustDecode(const ClusterLoadAssignment& cla) {
  auto decoded = DecodeEndpoints(TestDecodeContext(), cla.SerializeAsString());
  EXPECT_TRUE(decoded.resource.ok()) << decoded.resource.status().message();
  return decoded.resource.ok() ? *decoded.resource : EndpointResource{};
}

TEST(EndpointDecoderTest, EqualityIsDeep) {
  const ClusterLoadAssignment cla = Assignment();
  const EndpointResource base = MustDecode(cla);
  EXPECT_EQ(base, MustDecode(cla));
  ASSERT_EQ(base.priorities.size(), 2u);

  ClusterLoadAssignment changed = cla;
  changed.mutable_endpoints(2)->mutable_lb_endpoints(0)->mutable_load_balancing_weight()->set_value(
      2);
  EXPECT_NE(base, MustDecode(changed));
  changed = cla;
  changed.mutable_endpoints(1)->mutable_lb_endpoints(0)->set_health_status(
      envoy::config::core::v3::UNHEALTHY);
  EXPECT_NE(base, MustDecode(changed));
  changed = cla;
  changed.mutable_endpoints(0)->mutable_locality()->set_sub_zone("s");
  EXPECT_NE(base, MustDecode(changed));
  changed = cla;
  changed.mutable_policy()->mutable_drop_overloads(0)->mutable_drop_percentage()->set_numerator(2);
  EXPECT_NE(base, MustDecode(changed));
}

TEST(EndpointDecoderTest, LocalityOrderInTheResourceDoesNotMatter) {
  // Localities of a priority are kept sorted by name, as gRPC walks them.
  ClusterLoadAssignment reordered = Assignment();
  reordered.mutable_endpoints()->SwapElements(0, 2);
  EXPECT_EQ(MustDecode(Assignment()), MustDecode(reordered));
}

TEST(EndpointDecoderTest, UsableEndpointsAreHealthyOrUnknown) {
  EndpointResource::Endpoint endpoint;
  using HealthStatus = EndpointResource::HealthStatus;
  for (auto status : {HealthStatus::kUnknown, HealthStatus::kHealthy}) {
    endpoint.health_status = status;
    EXPECT_TRUE(endpoint.usable());
  }
  for (auto status : {HealthStatus::kUnhealthy, HealthStatus::kDraining, HealthStatus::kTimeout,
                      HealthStatus::kDegraded}) {
    endpoint.health_status = status;
    EXPECT_FALSE(endpoint.usable());
  }
}

TEST(EndpointResourceTypeTest, DecodesThroughTheXdsClientInterface) {
  const auto& type = EndpointResourceType::Get();
  EXPECT_EQ(type.type_url(), "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment");
  EXPECT_FALSE(type.all_resources_required_in_sotw());
  auto decoded = type.Decode(TestDecodeContext(), Assignment().SerializeAsString());
  EXPECT_EQ(decoded.name, "svc");
  ASSERT_TRUE(decoded.resource.ok());
  auto again = type.Decode(TestDecodeContext(), Assignment().SerializeAsString());
  ASSERT_TRUE(again.resource.ok());
  EXPECT_TRUE(type.ResourcesEqual(*decoded.resource, *again.resource));
  const auto json = nlohmann::json::parse(type.ResourceToJson(*decoded.resource));
  EXPECT_EQ(json["priorities"].size(), 2u);
  EXPECT_EQ(json["drop_overloads"][0]["requests_per_million"], 10000);
}

}  // namespace
}  // namespace uxds::testing
