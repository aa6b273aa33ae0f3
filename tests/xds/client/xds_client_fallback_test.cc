// A71 fallback between the servers of an authority, against two and three
// fake control planes on loopback: when the client falls back (a
// connectivity failure while a watched resource is not cached), what it takes
// from the fallback server (every watched resource: "will update the cache
// based on the received responses"), and how it switches back and closes
// the fallback stream.
//
// The servers' copies of a Cluster differ in connect_timeout (primary 1000
// ms, secondary 2000 ms, tertiary 3000 ms), so each update names its source.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "support/loopback_sockets.h"
#include "uxds/xds_client_pool.h"
#include "uxds/xds_resources.h"
#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kPrimaryTimeoutMs = 1000;
constexpr int64_t kSecondaryTimeoutMs = 2000;
constexpr int64_t kTertiaryTimeoutMs = 3000;

class XdsClientFallbackTest : public XdsClientTest {
 protected:
  void SetUp() override {
    XdsClientTest::SetUp();
    secondary_ = FakeControlPlane::Start();
    ASSERT_NE(secondary_, nullptr);
  }
  void TearDown() override {
    XdsClientTest::TearDown();
    secondary_.reset();
    tertiary_.reset();
  }

  // A bootstrap whose top-level servers are `targets`, in that order.
  Bootstrap MakeBootstrapWithServers(const std::vector<std::string>& targets,
                                     BootstrapFeatures features = {}) const {
    Bootstrap bootstrap = MakeBootstrap(targets.front(), features);
    for (size_t i = 1; i < targets.size(); ++i) {
      XdsServerConfig server = bootstrap.xds_servers.front();
      server.server_uri = targets[i];
      bootstrap.xds_servers.push_back(server);
    }
    return bootstrap;
  }
  // The control plane's Clusters, each with that server's connect_timeout.
  static bool Serve(FakeControlPlane& cp, const std::vector<std::string>& names,
                    int64_t connect_timeout_ms, const std::string& version) {
    std::map<std::string, ResponseResource> resources;
    for (const std::string& name : names) {
      resources.emplace(name, ResponseResource(ClusterAny(name, connect_timeout_ms)));
    }
    return cp.SetResources(kClusterTypeUrl, resources, version);
  }
  // A control plane that is down: no new connection gets in, and every
  // connection it had is cut without a goodbye.
  static void TakeDown(FakeControlPlane& cp) {
    ASSERT_TRUE(cp.StopListening());
    ASSERT_TRUE(cp.DropAllConnections());
  }
  // True if a stream was ever opened to `cp` (the command round trip first
  // collects every event the control plane has reported).
  static bool EverConnected(FakeControlPlane& cp) {
    cp.OpenStreams();
    const std::vector<ObservedEvent>& events = cp.events();
    return std::any_of(events.begin(), events.end(),
                       [](const ObservedEvent& e) { return e.kind == "stream_opened"; });
  }
  // Takes ambient errors until `count` UNAVAILABLE ones have arrived: each is
  // one more failed attempt to reach the server.
  static void WaitForFailedAttempts(ClusterWatcher& watcher, int count) {
    for (int i = 0; i < count; ++i) {
      ASSERT_TRUE(NextIsAmbient(watcher, StatusCode::kUnavailable, "connection failed"));
    }
  }

  // `server`, down so far, comes back with its copy of c1: the client uses
  // it again and closes its stream `lower_stream` to `lower`, the server it
  // used meanwhile.
  void ExpectSwitchBack(FakeControlPlane& server, int64_t connect_timeout_ms,
                        const std::string& version, ClusterWatcher& c1, FakeControlPlane& lower,
                        int64_t lower_stream) {
    ASSERT_TRUE(Serve(server, {"c1"}, connect_timeout_ms, version));
    ASSERT_TRUE(server.RestartListening());
    EXPECT_TRUE(NextIsCluster(c1, "c1", connect_timeout_ms));
    EXPECT_TRUE(lower.WaitForStreamClosed(kWait, lower_stream).has_value());
    const XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
    EXPECT_EQ(entry.version, version);
    EXPECT_EQ(entry.server_uri, server.target());
  }

  std::unique_ptr<FakeControlPlane> secondary_;
  std::unique_ptr<FakeControlPlane> tertiary_;
};

// A71: the primary is down when the client starts and nothing is cached:
// the secondary's data is served, without the watchers hearing of the
// primary's failure. Once the primary answers again its data replaces the
// fallback's and the stream to the secondary is closed.
TEST_F(XdsClientFallbackTest, PrimaryDownAtStartServesTheFallbackThenSwitchesBack) {
  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(Serve(*secondary_, {"c1"}, kSecondaryTimeoutMs, "s1"));
  StartClient(MakeBootstrapWithServers({cp_->target(), secondary_->target()}));
  auto c1 = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*c1, "c1", kSecondaryTimeoutMs));
  const XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.state, XdsCacheState::kAcked);
  EXPECT_EQ(entry.version, "s1");
  EXPECT_EQ(entry.server_uri, secondary_->target());
  const std::optional<int64_t> fallback_stream = secondary_->WaitForStreamOpened(kWait);
  ASSERT_TRUE(fallback_stream.has_value());

  // The primary was retried all along; it comes back with its own copy.
  ExpectSwitchBack(*cp_, kPrimaryTimeoutMs, "p1", *c1, *secondary_, *fallback_stream);
  // The secondary's later data is no longer used, and nothing reconnects to it.
  ASSERT_TRUE(Serve(*secondary_, {"c1"}, kSecondaryTimeoutMs, "s2"));
  ASSERT_TRUE(Serve(*cp_, {"c1"}, kPrimaryTimeoutMs + 1, "p2"));
  EXPECT_TRUE(NextIsCluster(*c1, "c1", kPrimaryTimeoutMs + 1));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*c1));
  EXPECT_TRUE(secondary_->OpenStreams().empty());
}

// A71: "At least one watcher exists for a resource that is not cached": with
// everything cached the client rides out a primary outage on its cache, with
// the outage as an ambient error, and never connects to the secondary.
TEST_F(XdsClientFallbackTest, EverythingCachedNeverFallsBack) {
  ASSERT_TRUE(Serve(*cp_, {"c1", "c2"}, kPrimaryTimeoutMs, "p1"));
  ASSERT_TRUE(Serve(*secondary_, {"c1", "c2"}, kSecondaryTimeoutMs, "s1"));
  StartClient(MakeBootstrapWithServers({cp_->target(), secondary_->target()}));
  auto c1 = Watch(TestClusterType::Get(), "c1");
  auto c2 = Watch(TestClusterType::Get(), "c2");
  EXPECT_TRUE(NextIsCluster(*c1, "c1", kPrimaryTimeoutMs));
  EXPECT_TRUE(NextIsCluster(*c2, "c2", kPrimaryTimeoutMs));
  TakeDown(*cp_);
  // Three failed reconnects in a row, each one a chance to fall back.
  WaitForFailedAttempts(*c1, 3);
  EXPECT_FALSE(EverConnected(*secondary_));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").server_uri, cp_->target());
  EXPECT_EQ(Entry(kClusterTypeUrl, "c2").version, "p1");
}

// A71: "mid-config update": the primary names a new cluster (here: the
// application watches c2 after c1) and dies before sending it. The client
// "will subscribe to all watched resources on that server and will update
// the cache based on the received responses": c2 comes from the secondary,
// and so does the secondary's copy of c1, cached from the primary before
// ("Config tears" are accepted for same-named resources).
TEST_F(XdsClientFallbackTest, MidUpdateOutageTakesEveryWatchedResourceFromTheFallback) {
  ASSERT_TRUE(Serve(*cp_, {"c1"}, kPrimaryTimeoutMs, "p1"));
  ASSERT_TRUE(Serve(*secondary_, {"c1", "c2"}, kSecondaryTimeoutMs, "s1"));
  StartClient(MakeBootstrapWithServers({cp_->target(), secondary_->target()}));
  auto c1 = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*c1, "c1", kPrimaryTimeoutMs));
  ASSERT_TRUE(cp_->IgnoreRequests(true, kClusterTypeUrl));
  auto c2 = Watch(TestClusterType::Get(), "c2");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1", "c2"}).has_value());
  TakeDown(*cp_);

  EXPECT_TRUE(NextIsCluster(*c2, "c2", kSecondaryTimeoutMs));
  EXPECT_TRUE(NextIsCluster(*c1, "c1", kSecondaryTimeoutMs));
  // The secondary was asked for every watched resource.
  EXPECT_TRUE(WaitForRequest(*secondary_, kClusterTypeUrl, {"c1", "c2"}).has_value());
  Flush();
  EXPECT_TRUE(NoMoreEvents(*c1));
  EXPECT_TRUE(NoMoreEvents(*c2));
  for (const std::string name : {"c1", "c2"}) {
    const XdsResourceSnapshot entry = Entry(kClusterTypeUrl, name);
    EXPECT_EQ(entry.state, XdsCacheState::kAcked) << name;
    EXPECT_EQ(entry.version, "s1") << name;
    EXPECT_EQ(entry.server_uri, secondary_->target()) << name;
  }
}

// A71 "update the cache based on the received responses" covers more than
// new copies: the fallback's deletion of an LDS/CDS resource, its NACKed
// copy and its TP3 error apply to resources cached from the primary as they
// would to the fallback's own (A88: each a data error; without
// fail_on_data_errors the cached resource stays in use, with the error as an
// ambient error).
TEST_F(XdsClientFallbackTest, TheFallbacksDeletionsAndErrorsApplyToWhatThePrimarySent) {
  ASSERT_TRUE(Serve(*cp_, {"gone", "invalid", "failed"}, kPrimaryTimeoutMs, "p1"));
  StartClient(MakeBootstrapWithServers({cp_->target(), secondary_->target()}));
  auto gone = Watch(TestClusterType::Get(), "gone");
  auto invalid = Watch(TestClusterType::Get(), "invalid");
  auto failed = Watch(TestClusterType::Get(), "failed");
  EXPECT_TRUE(NextIsCluster(*gone, "gone", kPrimaryTimeoutMs));
  EXPECT_TRUE(NextIsCluster(*invalid, "invalid", kPrimaryTimeoutMs));
  EXPECT_TRUE(NextIsCluster(*failed, "failed", kPrimaryTimeoutMs));
  ASSERT_TRUE(cp_->IgnoreRequests(true, kClusterTypeUrl));
  auto added = Watch(TestClusterType::Get(), "added");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"gone", "invalid", "failed", "added"}).has_value());

  // The secondary has no "gone", an invalid "invalid" (connect_timeout < 0)
  // and an error for "failed".
  constexpr int kPermissionDenied = 7;
  ASSERT_TRUE(secondary_->SetResources(
      kClusterTypeUrl,
      {{"added", ResponseResource(ClusterAny("added", kSecondaryTimeoutMs))},
       {"invalid", ResponseResource(ClusterAny("invalid", -1))}},
      "s1", {{"failed", kPermissionDenied, "not for this node"}}));
  TakeDown(*cp_);

  EXPECT_TRUE(NextIsCluster(*added, "added", kSecondaryTimeoutMs));
  EXPECT_TRUE(NextIsAmbient(*gone, StatusCode::kNotFound, "does not exist"));
  EXPECT_TRUE(NextIsAmbient(*invalid, StatusCode::kInvalidArgument, "connect_timeout"));
  EXPECT_TRUE(NextIsAmbient(*failed, StatusCode::kPermissionDenied, "not for this node"));
  const std::pair<std::string, XdsCacheState> expected[] = {
      {"gone", XdsCacheState::kDoesNotExist},
      {"invalid", XdsCacheState::kNacked},
      {"failed", XdsCacheState::kReceivedError},
  };
  for (const auto& [name, state] : expected) {
    const XdsResourceSnapshot entry = Entry(kClusterTypeUrl, name);
    EXPECT_EQ(entry.state, state) << name;
    EXPECT_TRUE(entry.has_resource) << name << ": the primary's copy is still in use";
    EXPECT_EQ(entry.server_uri, secondary_->target()) << name;
  }
}

// A71's mid-update outage when the fallback's resources have other names:
// the primary's c1 (alt_stat_name standing for the name of the resource it
// leads to, as a Listener names its RouteConfiguration) now leads to "e2",
// and the primary dies before sending e2. The secondary knows nothing of e2,
// but its own c1 leads to "fe", which it has: taking c1 from the secondary
// is what gets the client out of waiting for e2.
TEST_F(XdsClientFallbackTest, AMidUpdateOutageWithOtherNamesOnTheFallbackRecovers) {
  auto cluster_leading_to = [](const std::string& endpoints) {
    return std::map<std::string, ResponseResource>{
        {"c1", ResponseResource(ClusterAny("c1", kPrimaryTimeoutMs, endpoints))}};
  };
  ASSERT_TRUE(cp_->SetResources(kClusterTypeUrl, cluster_leading_to("e1"), "p1"));
  ASSERT_TRUE(
      cp_->SetResources(kEndpointsTypeUrl, {{"e1", ResponseResource(EndpointsAny("e1"))}}, "p1"));
  ASSERT_TRUE(secondary_->SetResources(kClusterTypeUrl, cluster_leading_to("fe"), "s1"));
  ASSERT_TRUE(secondary_->SetResources(kEndpointsTypeUrl,
                                       {{"fe", ResponseResource(EndpointsAny("fe"))}}, "s1"));
  StartClient(MakeBootstrapWithServers({cp_->target(), secondary_->target()}));
  auto next_leads_to = [](ClusterWatcher& watcher) -> std::string {
    auto event = watcher.Next();
    if (!event.has_value() || event->kind != ClusterWatcher::Event::Kind::kResource) {
      return event.has_value() ? event->ToString() : "no event";
    }
    return event->resource->alt_stat_name;
  };
  auto c1 = Watch(TestClusterType::Get(), "c1");
  EXPECT_EQ(next_leads_to(*c1), "e1");
  auto e1 = Watch(TestEndpointsType::Get(), "e1");
  EXPECT_TRUE(NextIsEndpoints(*e1, "e1"));

  // The update: c1 leads to e2, which the primary never sends.
  ASSERT_TRUE(cp_->IgnoreRequests(true, kEndpointsTypeUrl));
  ASSERT_TRUE(cp_->SetResources(kClusterTypeUrl, cluster_leading_to("e2"), "p2"));
  EXPECT_EQ(next_leads_to(*c1), "e2");
  auto e2 = Watch(TestEndpointsType::Get(), "e2");
  CancelWatch(TestEndpointsType::Get(), "e1", e1.get());
  ASSERT_TRUE(WaitForRequest(kEndpointsTypeUrl, {"e2"}).has_value());
  TakeDown(*cp_);

  // The secondary's c1 replaces the primary's, and what it leads to is there.
  EXPECT_EQ(next_leads_to(*c1), "fe");
  auto fe = Watch(TestEndpointsType::Get(), "fe");
  EXPECT_TRUE(NextIsEndpoints(*fe, "fe"));
  EXPECT_EQ(Entry(kEndpointsTypeUrl, "fe").server_uri, secondary_->target());
}

// A57 / A88 with A71: a primary that accepts the stream and never answers is
// no connectivity failure, so the resource timer decides (TIMEOUT with
// resource_timer_is_transient_error). A timed-out resource is cached, so not
// even the primary's later failure makes the client fall back.
TEST_F(XdsClientFallbackTest, APrimaryThatNeverAnswersTimesOutWithoutFallback) {
  ASSERT_TRUE(cp_->IgnoreRequests(true));
  ASSERT_TRUE(Serve(*secondary_, {"c1"}, kSecondaryTimeoutMs, "s1"));
  XdsClientOptions options = TestOptions();
  options.resource_transient_error_timeout = milliseconds(300);
  BootstrapFeatures features;
  features.resource_timer_is_transient_error = true;
  StartClient(MakeBootstrapWithServers({cp_->target(), secondary_->target()}, features), options);
  auto c1 = Watch(TestClusterType::Get(), "c1");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  EXPECT_TRUE(NextIsError(*c1, StatusCode::kUnavailable, "timeout obtaining resource"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kTimeout);
  EXPECT_FALSE(EverConnected(*secondary_));

  // The stream now closes without a response: a connectivity failure, but
  // nothing uncached is watched.
  TakeDown(*cp_);
  EXPECT_TRUE(NextIsError(*c1, StatusCode::kUnavailable, "xDS call failed with no responses"));
  EXPECT_TRUE(NextIsError(*c1, StatusCode::kUnavailable, "connection failed"));
  EXPECT_FALSE(EverConnected(*secondary_));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kTimeout);
}

// A71 with a primary that takes the TCP connection and never sends a byte
// (no SETTINGS, no response: a hung control plane or a black-holing
// proxy): connect_timeout ends the attempt as a connectivity failure, so
// the secondary serves, and the watcher never hears of the primary.
TEST_F(XdsClientFallbackTest, APrimaryThatAcceptsAndSendsNothingFallsBackAfterConnectTimeout) {
  const Blackhole mute;
  ASSERT_TRUE(Serve(*secondary_, {"c1"}, kSecondaryTimeoutMs, "s1"));
  XdsClientOptions options = TestOptions();
  options.connect_timeout = milliseconds(500);
  StartClient(MakeBootstrapWithServers({mute.target(), secondary_->target()}), options);
  auto c1 = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*c1, "c1", kSecondaryTimeoutMs));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").server_uri, secondary_->target());
  EXPECT_TRUE(NoMoreEvents(*c1));
}

// A71 down a list of three: the primary and the secondary are down, the
// tertiary serves; then each higher-priority server that comes back takes
// over in turn and the stream to the one below it is closed.
TEST_F(XdsClientFallbackTest, AChainFallsToTheTertiaryAndClimbsBackOneServerAtATime) {
  tertiary_ = FakeControlPlane::Start();
  ASSERT_NE(tertiary_, nullptr);
  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(secondary_->StopListening());
  ASSERT_TRUE(Serve(*tertiary_, {"c1"}, kTertiaryTimeoutMs, "t1"));
  StartClient(MakeBootstrapWithServers({cp_->target(), secondary_->target(), tertiary_->target()}));
  auto c1 = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*c1, "c1", kTertiaryTimeoutMs));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").server_uri, tertiary_->target());
  const std::optional<int64_t> tertiary_stream = tertiary_->WaitForStreamOpened(kWait);
  ASSERT_TRUE(tertiary_stream.has_value());

  ExpectSwitchBack(*secondary_, kSecondaryTimeoutMs, "s1", *c1, *tertiary_, *tertiary_stream);
  const std::optional<int64_t> secondary_stream = secondary_->WaitForStreamOpened(kWait);
  ASSERT_TRUE(secondary_stream.has_value());

  ExpectSwitchBack(*cp_, kPrimaryTimeoutMs, "p1", *c1, *secondary_, *secondary_stream);
  EXPECT_TRUE(tertiary_->OpenStreams().empty());
}

// A71 with the name resolution of #9 item 5: a primary whose host name does
// not resolve is a connectivity failure, and the next server serves.
TEST_F(XdsClientFallbackTest, APrimaryWhoseHostDoesNotResolveFallsBackToTheNext) {
  ASSERT_TRUE(Serve(*secondary_, {"c1"}, kSecondaryTimeoutMs, "s1"));
  StartClient(MakeBootstrapWithServers({"xds.example.invalid:443", secondary_->target()}));
  auto c1 = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*c1, "c1", kSecondaryTimeoutMs));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").server_uri, secondary_->target());
}

// #9's reuse of a verdict for re-sent bytes, with A71: the same Cluster bytes
// decode differently on each server, since lrs_server `self` is the server
// they came from (A27). After the switch back, the primary's byte-identical
// copy of the fallback's Cluster reports load to the primary, as CSDS says.
TEST_F(XdsClientFallbackTest, IdenticalClusterBytesFromThePrimaryReportLoadToThePrimary) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name("c1");
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  cluster.mutable_lrs_server()->mutable_self();
  const std::map<std::string, ResponseResource> resources = {
      {"c1", ResponseResource(kClusterTypeUrl, cluster.SerializeAsString())}};
  auto next_lrs_server = [](RecordingWatcher<ClusterResource>& watcher) -> std::string {
    auto event = watcher.Next();
    if (!event.has_value()) return "no event";
    if (event->kind != RecordingWatcher<ClusterResource>::Event::Kind::kResource) {
      return event->ToString();
    }
    if (!event->resource->lrs_server.has_value()) return "no lrs_server";
    return event->resource->lrs_server->server_uri;
  };

  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(secondary_->SetResources(kClusterTypeUrl, resources, "s1"));
  StartClient(MakeBootstrapWithServers({cp_->target(), secondary_->target()}));
  auto c1 = Watch(ClusterResourceType::Get(), "c1");
  EXPECT_EQ(next_lrs_server(*c1), secondary_->target());
  const std::optional<int64_t> fallback_stream = secondary_->WaitForStreamOpened(kWait);
  ASSERT_TRUE(fallback_stream.has_value());

  ASSERT_TRUE(cp_->SetResources(kClusterTypeUrl, resources, "p1"));
  ASSERT_TRUE(cp_->RestartListening());
  EXPECT_TRUE(secondary_->WaitForStreamClosed(kWait, *fallback_stream).has_value());
  // The primary's response is decided (ACKed) before its watchers hear of it.
  ASSERT_TRUE(cp_->NextRequestMatching(kWait,
                                       [](const ObservedRequest& request) {
                                         return request.type_url == kClusterTypeUrl &&
                                                request.version_info == "p1";
                                       })
                  .has_value());
  Flush();
  // CSDS credits the primary, and the resource in use reports load to it.
  const XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.version, "p1");
  EXPECT_EQ(entry.server_uri, cp_->target());
  EXPECT_NE(entry.resource_json.find("\"lrs_server\":\"" + cp_->target() + "\""), std::string::npos)
      << entry.resource_json;
  // The watcher is given the primary's resource: its lrs_server differs.
  std::vector<RecordingWatcher<ClusterResource>::Event> events = c1->TakePending();
  ASSERT_EQ(events.size(), 1u);
  ASSERT_EQ(events[0].kind, RecordingWatcher<ClusterResource>::Event::Kind::kResource);
  ASSERT_TRUE(events[0].resource->lrs_server.has_value());
  EXPECT_EQ(events[0].resource->lrs_server->server_uri, cp_->target());
}

// A71 "per-target instances": two targets with their own XdsClient from one
// pool. The primary goes down while only target b waits for a resource: b
// falls back, a keeps its cache (with the outage as an ambient error). CSDS
// reports both, each under its own client_scope with its own source.
TEST_F(XdsClientFallbackTest, OnlyTheTargetWithAnUncachedResourceFallsBack) {
  std::shared_ptr<XdsClientPool> pool;
  loop_->RunSync([&] {
    auto created = XdsClientPool::Create(
        loop_->loop(), MakeBootstrapWithServers({cp_->target(), secondary_->target()}),
        TestOptions());
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    pool = *std::move(created);
  });
  ASSERT_NE(pool, nullptr);
  std::shared_ptr<XdsClient> a;
  std::shared_ptr<XdsClient> b;
  loop_->RunSync([&] {
    a = *pool->Get("xds:///a");
    b = *pool->Get("xds:///b");
  });
  ASSERT_TRUE(Serve(*cp_, {"c1"}, kPrimaryTimeoutMs, "p1"));
  ASSERT_TRUE(Serve(*secondary_, {"c1", "c2"}, kSecondaryTimeoutMs, "s1"));
  auto a_c1 = std::make_shared<ClusterWatcher>();
  loop_->RunSync([&] { a->WatchResource(TestClusterType::Get(), "c1", a_c1); });
  EXPECT_TRUE(NextIsCluster(*a_c1, "c1", kPrimaryTimeoutMs));
  ASSERT_TRUE(cp_->IgnoreRequests(true, kClusterTypeUrl));
  auto b_c2 = std::make_shared<ClusterWatcher>();
  loop_->RunSync([&] { b->WatchResource(TestClusterType::Get(), "c2", b_c2); });
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c2"}).has_value());
  TakeDown(*cp_);

  EXPECT_TRUE(NextIsCluster(*b_c2, "c2", kSecondaryTimeoutMs));
  WaitForFailedAttempts(*a_c1, 2);
  // Only b's client ever asked the secondary for anything.
  for (const ObservedRequest& request : secondary_->AllRequests()) {
    EXPECT_EQ(request.resource_names, std::vector<std::string>{"c2"});
  }

  const envoy::service::status::v3::ClientStatusResponse csds = FetchCsds(*loop_, *pool);
  ASSERT_EQ(csds.config_size(), 2);
  for (const auto& config : csds.config()) {
    ASSERT_EQ(config.generic_xds_configs_size(), 1) << config.client_scope();
    const auto& resource = config.generic_xds_configs(0);
    EXPECT_EQ(resource.client_status(), envoy::admin::v3::ACKED);
    if (config.client_scope() == "xds:///a") {
      EXPECT_EQ(resource.name(), "c1");
      EXPECT_EQ(resource.version_info(), "p1");
    } else {
      EXPECT_EQ(config.client_scope(), "xds:///b");
      EXPECT_EQ(resource.name(), "c2");
      EXPECT_EQ(resource.version_info(), "s1");
    }
  }
  loop_->RunSync([&] {
    a.reset();
    b.reset();
    pool.reset();
  });
}

}  // namespace
}  // namespace uxds::testing
