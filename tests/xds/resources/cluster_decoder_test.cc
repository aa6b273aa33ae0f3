// Cluster decoding: the table in cluster_cases.json, plus what a table of
// JSON fixtures cannot say (deep nesting, equality, the XdsResourceType).
#include <gtest/gtest.h>

#include <string>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/extensions/load_balancing_policies/round_robin/v3/round_robin.pb.h"
#include "envoy/extensions/load_balancing_policies/wrr_locality/v3/wrr_locality.pb.h"
#include "envoy/extensions/transport_sockets/tls/v3/tls.pb.h"
#include "resource_cases.h"
#include "uxds/xds_resources.h"

namespace uxds::testing {
namespace {

using envoy::config::cluster::v3::Cluster;
using envoy::config::cluster::v3::LoadBalancingPolicy;

class ClusterCaseTest : public ::testing::TestWithParam<ResourceCase> {};

TEST_P(ClusterCaseTest, DecodesAsExpected) {
  const ResourceCase& c = GetParam();
  CheckResourceCase(c, DecodeCluster(TestDecodeContext(), c.bytes));
}

INSTANTIATE_TEST_SUITE_P(Table, ClusterCaseTest,
                         ::testing::ValuesIn(LoadResourceCases("cluster_cases")), ResourceCaseName);

Cluster EdsCluster(const std::string& service_name) {
  Cluster cluster;
  cluster.set_name("c1");
  cluster.set_type(Cluster::EDS);
  cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  cluster.mutable_eds_cluster_config()->set_service_name(service_name);
  return cluster;
}

ClusterResource MustDecode(const Cluster& cluster) {
  auto decoded = DecodeCluster(TestDecodeContext(), cluster.SerializeAsString());
  EXPECT_TRUE(decoded.resource.ok()) << decoded.resource.status().message();
  return decoded.resource.ok() ? *decoded.resource : ClusterResource{};
}

// wrr_locality(wrr_locality(...(round_robin))) with `depth` wrr_locality
// layers.
LoadBalancingPolicy NestedWrrLocality(int depth) {
  LoadBalancingPolicy policy;
  policy.add_policies()->mutable_typed_extension_config()->mutable_typed_config()->PackFrom(
      envoy::extensions::load_balancing_policies::round_robin::v3::RoundRobin());
  for (int i = 0; i < depth; ++i) {
    envoy::extensions::load_balancing_policies::wrr_locality::v3::WrrLocality wrr;
    *wrr.mutable_endpoint_picking_policy() = policy;
    policy.Clear();
    policy.add_policies()->mutable_typed_extension_config()->mutable_typed_config()->PackFrom(wrr);
  }
  return policy;
}

TEST(ClusterDecoderTest, IdenticalBytesGiveEqualResources) {
  Cluster cluster = EdsCluster("svc");
  cluster.set_lb_policy(Cluster::RING_HASH);
  cluster.mutable_lrs_server()->mutable_self();
  cluster.mutable_outlier_detection()->mutable_interval()->set_seconds(3);
  EXPECT_EQ(MustDecode(cluster), MustDecode(cluster));
}

TEST(ClusterDecoderTest, EveryFieldTakesPartInEquality) {
  const ClusterResource base = MustDecode(EdsCluster("svc"));
  EXPECT_NE(base, MustDecode(EdsCluster("other")));
  Cluster ring = EdsCluster("svc");
  ring.set_lb_policy(Cluster::RING_HASH);
  EXPECT_NE(base, MustDecode(ring));
  Cluster ring_sizes = ring;
  ring_sizes.mutable_ring_hash_lb_config()->mutable_maximum_ring_size()->set_value(4096);
  EXPECT_NE(MustDecode(ring), MustDecode(ring_sizes));
  Cluster breakers = EdsCluster("svc");
  breakers.mutable_circuit_breakers()->add_thresholds()->mutable_max_requests()->set_value(5);
  EXPECT_NE(base, MustDecode(breakers));
  Cluster lrs = EdsCluster("svc");
  lrs.mutable_lrs_server()->mutable_self();
  EXPECT_NE(base, MustDecode(lrs));
  Cluster outlier = EdsCluster("svc");
  outlier.mutable_outlier_detection();
  EXPECT_NE(base, MustDecode(outlier));
  envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext tls;
  tls.mutable_common_tls_context()
      ->mutable_validation_context()
      ->mutable_ca_certificate_provider_instance()
      ->set_instance_name("ca");
  Cluster secure = EdsCluster("svc");
  secure.mutable_transport_socket()->mutable_typed_config()->PackFrom(tls);
  EXPECT_NE(base, MustDecode(secure));
  tls.mutable_common_tls_context()
      ->mutable_validation_context()
      ->add_match_subject_alt_names()
      ->set_exact("a");
  Cluster san = EdsCluster("svc");
  san.mutable_transport_socket()->mutable_typed_config()->PackFrom(tls);
  EXPECT_NE(MustDecode(secure), MustDecode(san));
}

TEST(ClusterDecoderTest, LrsServerIsTheServerTheClusterCameFrom) {
  Cluster cluster = EdsCluster("svc");
  cluster.mutable_lrs_server()->mutable_self();
  const ClusterResource resource = MustDecode(cluster);
  ASSERT_TRUE(resource.lrs_server.has_value());
  EXPECT_EQ(*resource.lrs_server, TestDecodeContext().server);
}

TEST(ClusterDecoderTest, WrrLocalityNestsUpToSixteenLevels) {
  Cluster cluster = EdsCluster("svc");
  *cluster.mutable_load_balancing_policy() = NestedWrrLocality(15);
  const ClusterResource resource = MustDecode(cluster);
  EXPECT_TRUE(resource.lb_policy.weighted_locality);
  EXPECT_EQ(resource.lb_policy.endpoint_picking,
            ClusterResource::LbPolicy::EndpointPicking::kRoundRobin);

  *cluster.mutable_load_balancing_policy() = NestedWrrLocality(16);
  auto decoded = DecodeCluster(TestDecodeContext(), cluster.SerializeAsString());
  ASSERT_FALSE(decoded.resource.ok());
  std::string field = "load_balancing_policy";
  for (int i = 0; i < 16; ++i) {
    field +=
        ".policies[0].typed_extension_config.typed_config.value[envoy.extensions.load_balancing_"
        "policies.wrr_locality.v3.WrrLocality].endpoint_picking_policy";
  }
  EXPECT_EQ(decoded.resource.status().message(),
            "errors validating Cluster resource: [field:" + field +
                " error:exceeded max recursion depth of 16]");
}

TEST(ClusterDecoderTest, UnknownFieldsFromNewerPeersAreIgnored) {
  std::string bytes = EdsCluster("svc").SerializeAsString();
  // Field 1000 (length-delimited), unknown to the trimmed proto.
  bytes += std::string(
      "\xc2\x3e\x03"
      "abc",
      6);
  auto decoded = DecodeCluster(TestDecodeContext(), bytes);
  ASSERT_TRUE(decoded.resource.ok()) << decoded.resource.status().message();
  EXPECT_EQ(std::get<ClusterResource::Eds>(decoded.resource->type).eds_service_name, "svc");
}

TEST(ClusterResourceTypeTest, DecodesThroughTheXdsClientInterface) {
  const auto& type = ClusterResourceType::Get();
  EXPECT_EQ(type.type_url(), "type.googleapis.com/envoy.config.cluster.v3.Cluster");
  EXPECT_EQ(type.type_name(), "envoy.config.cluster.v3.Cluster");
  EXPECT_TRUE(type.all_resources_required_in_sotw());
  const std::string bytes = EdsCluster("svc").SerializeAsString();
  auto first = type.Decode(TestDecodeContext(), bytes);
  auto second = type.Decode(TestDecodeContext(), bytes);
  ASSERT_TRUE(first.resource.ok());
  ASSERT_TRUE(second.resource.ok());
  EXPECT_EQ(first.name, "c1");
  EXPECT_TRUE(type.ResourcesEqual(*first.resource, *second.resource));
  auto other = type.Decode(TestDecodeContext(), EdsCluster("other").SerializeAsString());
  ASSERT_TRUE(other.resource.ok());
  EXPECT_FALSE(type.ResourcesEqual(*first.resource, *other.resource));
  EXPECT_EQ(nlohmann::json::parse(type.ResourceToJson(*first.resource))["eds_service_name"], "svc");

  Cluster invalid = EdsCluster("svc");
  invalid.set_lb_policy(Cluster::MAGLEV);
  auto bad = type.Decode(TestDecodeContext(), invalid.SerializeAsString());
  EXPECT_EQ(bad.name, "c1");
  ASSERT_FALSE(bad.resource.ok());
  EXPECT_EQ(bad.resource.status().message(),
            "errors validating Cluster resource: [field:lb_policy error:LB policy is not "
            "supported]");
  auto garbage = type.Decode(TestDecodeContext(), "\xff");
  EXPECT_FALSE(garbage.name.has_value());
  EXPECT_FALSE(garbage.resource.ok());
}

}  // namespace
}  // namespace uxds::testing
