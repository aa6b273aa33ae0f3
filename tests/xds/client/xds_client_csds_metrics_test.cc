// The CSDS dump (A40 with A88's states) and the A78 metrics, read from the
// same cache entries the watchers are fed from, in every cache state.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

using envoy::admin::v3::ClientResourceStatus;
using envoy::service::status::v3::ClientConfig;

constexpr char kClusterTypeName[] = "envoy.config.cluster.v3.Cluster";

std::map<std::string, ClientConfig::GenericXdsConfig> ByName(const ClientConfig& config) {
  std::map<std::string, ClientConfig::GenericXdsConfig> by_name;
  for (const auto& entry : config.generic_xds_configs()) by_name[entry.name()] = entry;
  return by_name;
}

class XdsClientCsdsMetricsTest : public XdsClientTest {};

TEST_F(XdsClientCsdsMetricsTest, DumpAndMetricsShowEveryState) {
  StartClient();
  std::map<std::string, std::shared_ptr<ClusterWatcher>> watchers;
  for (const char* name : {"c-req", "c-ack", "c-nack", "c-err", "c-del"}) {
    watchers[name] = Watch(TestClusterType::Get(), name);
  }
  WaitForRequest(kClusterTypeUrl, {"c-req", "c-ack", "c-nack", "c-err", "c-del"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("c-ack"), ClusterAny("c-nack"), ClusterAny("c-del")});
  EXPECT_TRUE(NextIsCluster(*watchers["c-ack"], "c-ack"));
  Respond(kClusterTypeUrl, "2", {ClusterAny("c-ack"), ClusterAny("c-nack", -1)},
          {{"c-err", static_cast<int>(StatusCode::kUnavailable), "later"}});

  const ClientConfig config = DumpClientConfig();
  EXPECT_EQ(config.client_scope(), "test-target");
  EXPECT_EQ(config.node().id(), kNodeId);
  EXPECT_EQ(config.node().user_agent_name(), "uxds");
  ASSERT_EQ(config.node().client_features_size(), 1);
  EXPECT_EQ(config.node().client_features(0), "xds.config.resource-in-sotw");
  auto entries = ByName(config);
  ASSERT_EQ(entries.size(), 5u);
  for (const auto& [name, entry] : entries) {
    EXPECT_EQ(entry.type_url(), kClusterTypeUrl) << name;
  }

  const auto& requested = entries["c-req"];
  EXPECT_EQ(requested.client_status(), envoy::admin::v3::REQUESTED);
  EXPECT_FALSE(requested.has_xds_config());
  EXPECT_FALSE(requested.has_error_state());

  const auto& acked = entries["c-ack"];
  EXPECT_EQ(acked.client_status(), envoy::admin::v3::ACKED);
  EXPECT_EQ(acked.version_info(), "2");
  EXPECT_EQ(acked.xds_config().type_url(), kClusterTypeUrl);
  EXPECT_EQ(acked.xds_config().value(), ClusterBytes("c-ack")) << "the raw bytes are kept";
  EXPECT_GT(acked.last_updated().seconds(), 0);
  EXPECT_FALSE(acked.has_error_state());

  const auto& nacked = entries["c-nack"];
  EXPECT_EQ(nacked.client_status(), envoy::admin::v3::NACKED);
  EXPECT_EQ(nacked.version_info(), "1") << "the version in use";
  EXPECT_EQ(nacked.xds_config().value(), ClusterBytes("c-nack"));
  EXPECT_EQ(nacked.error_state().version_info(), "2") << "the rejected version";
  EXPECT_EQ(nacked.error_state().details(),
            "errors validating Cluster resource: [field:connect_timeout error:must be positive]");
  EXPECT_GT(nacked.error_state().last_update_attempt().seconds(), 0);

  const auto& received_error = entries["c-err"];
  EXPECT_EQ(received_error.client_status(), envoy::admin::v3::RECEIVED_ERROR);
  EXPECT_FALSE(received_error.has_xds_config());
  EXPECT_EQ(received_error.error_state().details(), "later");
  EXPECT_EQ(received_error.error_state().version_info(), "2");

  const auto& deleted = entries["c-del"];
  EXPECT_EQ(deleted.client_status(), envoy::admin::v3::DOES_NOT_EXIST);
  EXPECT_EQ(deleted.xds_config().value(), ClusterBytes("c-del")) << "deletion ignored";
  EXPECT_EQ(deleted.error_state().details(), "does not exist");

  XdsClientMetrics metrics = Metrics();
  for (const char* state :
       {"requested", "acked", "nacked_but_cached", "received_error", "does_not_exist_but_cached"}) {
    EXPECT_EQ(metrics.ResourceCount("#old", kClusterTypeName, state), 1u) << state;
  }
  EXPECT_EQ(metrics.resources.size(), 5u);
  EXPECT_EQ(metrics.ValidUpdates(cp_->target(), kClusterTypeName), 4u);
  EXPECT_EQ(metrics.InvalidUpdates(cp_->target(), kClusterTypeName), 1u);
  const XdsClientMetrics::ServerStats* server = metrics.FindServer(cp_->target());
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->connected);
  EXPECT_EQ(server->server_failures, 0u);

  // A78: the server goes unhealthy once, however many attempts fail.
  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(cp_->DropAllConnections());
  EXPECT_TRUE(NextIsAmbient(*watchers["c-ack"], StatusCode::kUnavailable, "connection failed"));
  EXPECT_TRUE(NextIsAmbient(*watchers["c-ack"], StatusCode::kUnavailable, "connection failed"));
  metrics = Metrics();
  EXPECT_FALSE(metrics.FindServer(cp_->target())->connected);
  EXPECT_EQ(metrics.FindServer(cp_->target())->server_failures, 1u);
  EXPECT_EQ(DumpClientConfig().generic_xds_configs_size(), 5)
      << "transient errors do not change the cache";
  ASSERT_TRUE(cp_->RestartListening());
  WaitForRequest(kClusterTypeUrl, {"c-req", "c-ack", "c-nack", "c-err", "c-del"});
  Respond(kClusterTypeUrl, "3", {ClusterAny("c-ack")});
  metrics = Metrics();
  EXPECT_TRUE(metrics.FindServer(cp_->target())->connected);
  EXPECT_EQ(metrics.FindServer(cp_->target())->server_failures, 1u);
}

TEST_F(XdsClientCsdsMetricsTest, DroppedResourcesAndTimeoutsWithBothServerFeatures) {
  XdsClientOptions options = TestOptions();
  options.resource_transient_error_timeout = std::chrono::milliseconds(300);
  BootstrapFeatures features;
  features.fail_on_data_errors = true;
  features.resource_timer_is_transient_error = true;
  StartClient(features, options);
  auto nacked = Watch(TestClusterType::Get(), "n1");
  auto errored = Watch(TestClusterType::Get(), "r1");
  auto timed_out = Watch(TestClusterType::Get(), "t1");
  WaitForRequest(kClusterTypeUrl, {"n1", "r1", "t1"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("n1", -1), ClusterAny("r1")});
  EXPECT_TRUE(NextIsCluster(*errored, "r1"));
  Respond(kClusterTypeUrl, "2", {},
          {{"r1", static_cast<int>(StatusCode::kPermissionDenied), "not yours"}});
  EXPECT_TRUE(NextIsError(*errored, StatusCode::kPermissionDenied, "not yours"));
  EXPECT_TRUE(NextIsError(*timed_out, StatusCode::kUnavailable, "timeout obtaining resource"));

  auto entries = ByName(DumpClientConfig());
  EXPECT_EQ(entries["n1"].client_status(), envoy::admin::v3::NACKED);
  EXPECT_FALSE(entries["n1"].has_xds_config());
  EXPECT_EQ(entries["r1"].client_status(), envoy::admin::v3::RECEIVED_ERROR);
  EXPECT_FALSE(entries["r1"].has_xds_config()) << "fail_on_data_errors dropped it";
  EXPECT_EQ(entries["r1"].error_state().details(), "not yours");
  EXPECT_EQ(entries["t1"].client_status(), envoy::admin::v3::TIMEOUT);
  EXPECT_EQ(entries["t1"].error_state().details(),
            "timeout obtaining resource from xDS server " + cp_->target());

  const XdsClientMetrics metrics = Metrics();
  EXPECT_EQ(metrics.ResourceCount("#old", kClusterTypeName, "nacked"), 1u);
  EXPECT_EQ(metrics.ResourceCount("#old", kClusterTypeName, "received_error"), 1u);
  EXPECT_EQ(metrics.ResourceCount("#old", kClusterTypeName, "timeout"), 1u);

  std::vector<XdsResourceSnapshot> snapshot = Snapshot();
  ASSERT_EQ(snapshot.size(), 3u);
  EXPECT_EQ(snapshot[0].name, "n1");  // ordered by type URL, then name
  EXPECT_EQ(snapshot[2].state, XdsCacheState::kTimeout);
}

TEST_F(XdsClientCsdsMetricsTest, SnapshotCarriesTheResourceAsJson) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.resource_json, R"({"name":"c1","connect_timeout_ms":1000})");
  EXPECT_EQ(entry.authority, "#old");
  EXPECT_EQ(entry.version, "1");
  EXPECT_TRUE(entry.error.ok());
  EXPECT_EQ(entry.watchers, 1u);
}

}  // namespace
}  // namespace uxds::testing
