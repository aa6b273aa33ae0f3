// XdsDependencyManager (A74, A37, A88) against the fake control plane: real
// Listener, RouteConfiguration, Cluster and ClusterLoadAssignment resources
// over ADS, decoded by uxds's decoders, watched through a real XdsClient.
#include "client/xds_dependency_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/fake_control_plane.h"
#include "support/test_support.h"
#include "support/xds_test_resources.h"
#include "uxds/runtime.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait = std::chrono::seconds(30);
constexpr char kNodeId[] = "deps-node";
using Update = StatusOr<std::shared_ptr<const XdsConfig>>;

class XdsDependencyManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cp_ = FakeControlPlane::Start();
    ASSERT_NE(cp_, nullptr);
    loop_ = *LoopThread::Start();
  }
  void TearDown() override {
    if (manager_ != nullptr) {
      std::promise<void> done;
      loop_->RunSync([&] {
        auto shutdown = [](XdsDependencyManager* manager, std::promise<void>* done) -> Task<void> {
          co_await manager->Shutdown();
          done->set_value();
        };
        loop_->loop().Spawn(shutdown(manager_.get(), &done));
      });
      done.get_future().wait();
    }
    loop_->RunSync([&] { manager_.reset(); });
    if (client_ != nullptr) loop_->RunSync([&] { client_.reset(); });
    loop_.reset();
  }

  void Start(const std::string& authority = "svc.example.com",
             milliseconds resource_timeout = std::chrono::minutes(10),
             HostResolver::Lookup lookup = &HostResolver::ResolveBlocking,
             milliseconds min_time_between_resolutions = milliseconds(0)) {
    Bootstrap bootstrap;
    XdsServerConfig server;
    server.server_uri = cp_->target();
    bootstrap.xds_servers.push_back(server);
    bootstrap.node.id = kNodeId;
    XdsClientOptions options;
    options.resource_does_not_exist_timeout = resource_timeout;
    loop_->RunSync([&] {
      client_ = *XdsClient::Create(loop_->loop(), bootstrap, options);
      manager_ = std::make_unique<XdsDependencyManager>(
          *client_, "l1", authority, [this](Update update) { Push(std::move(update)); },
          std::move(lookup), min_time_between_resolutions);
    });
  }

  // The next update (fails the test after kWait).
  std::optional<Update> Next() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, kWait, [&] { return !updates_.empty(); })) {
      ADD_FAILURE() << "no update";
      return std::nullopt;
    }
    Update update = std::move(updates_.front());
    updates_.pop_front();
    return update;
  }
  // Skips updates until `predicate` holds for a config.
  template <typename Predicate>
  std::shared_ptr<const XdsConfig> NextConfigWhere(Predicate predicate) {
    while (std::optional<Update> update = Next()) {
      if (update->ok() && predicate(***update)) return **update;
    }
    return nullptr;
  }
  // Runs `body` on the manager's loop.
  template <typename T>
  T OnLoop(std::function<T()> body) {
    T result{};
    loop_->RunSync([&] { result = body(); });
    return result;
  }
  std::vector<std::string> WatchedClusters() {
    std::vector<std::string> names;
    loop_->RunSync([&] { names = manager_->WatchedClusters(); });
    return names;
  }

  static const XdsConfig::ClusterConfig::EndpointConfig* EndpointsOf(const XdsConfig& config,
                                                                     const std::string& cluster) {
    auto it = config.clusters.find(cluster);
    if (it == config.clusters.end() || !it->second.ok()) return nullptr;
    return std::get_if<XdsConfig::ClusterConfig::EndpointConfig>(&it->second->children);
  }
  static std::string FirstAddress(const XdsConfig& config, const std::string& cluster) {
    const auto* endpoints = EndpointsOf(config, cluster);
    if (endpoints == nullptr || endpoints->endpoints == nullptr) return "";
    return endpoints->endpoints->priorities.at(0).localities.at(0).endpoints.at(0).addresses.at(0);
  }

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> loop_;
  std::unique_ptr<XdsClient> client_;
  std::unique_ptr<XdsDependencyManager> manager_;

 private:
  void Push(Update update) {
    {
      std::lock_guard lock(mu_);
      updates_.push_back(std::move(update));
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Update> updates_;
};

// A74: the first config published is complete: the Listener, its RDS
// resource, both clusters the routes name and their endpoints.
TEST_F(XdsDependencyManagerTest, PublishesOnlyACompleteConfig) {
  ASSERT_TRUE(cp_->SetResources(kLdsType, {{"l1", ApiListener("l1", "r1")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kRdsType, {{"r1", RouteConfig("r1", "svc.example.com", {{"/a/", "c1"}, {"", "c2"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", ValidCluster("c1", "s1")}, {"c2", ValidCluster("c2", "s2")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s1", Endpoints("s1", "10.0.0.1", 80)}, {"s2", Endpoints("s2", "10.0.0.2", 80)}},
      "1"));
  Start();
  std::optional<Update> first = Next();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(first->ok()) << first->status().ToString();
  const XdsConfig& config = ***first;
  ASSERT_NE(config.virtual_host, nullptr);
  EXPECT_EQ(config.virtual_host->routes.size(), 2u);
  EXPECT_EQ(config.clusters.size(), 2u);
  EXPECT_EQ(FirstAddress(config, "c1"), "10.0.0.1:80");
  EXPECT_EQ(FirstAddress(config, "c2"), "10.0.0.2:80");
  // A88: no ambient errors: the note names the node.
  EXPECT_EQ(EndpointsOf(config, "c1")->resolution_note, std::string("xDS node ID:") + kNodeId);
}

// A74: a RouteConfiguration naming a new cluster takes effect only once that
// cluster and its endpoints have arrived; the old cluster's watches go.
TEST_F(XdsDependencyManagerTest, ARouteChangeWaitsForItsClustersAndDropsOldWatches) {
  ASSERT_TRUE(cp_->SetResources(kLdsType, {{"l1", ApiListener("l1", "r1")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kRdsType, {{"r1", RouteConfig("r1", "*", {{"", "c1"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c1", ValidCluster("c1", "s1")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s1", Endpoints("s1", "10.0.0.1", 80)}}, "1"));
  Start();
  ASSERT_NE(NextConfigWhere([](const XdsConfig& c) { return c.clusters.contains("c1"); }), nullptr);
  // c3's endpoints are held back: no config may name c3 before they come.
  ASSERT_TRUE(cp_->IgnoreRequests(true, kEdsType));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", ValidCluster("c1", "s1")}, {"c3", ValidCluster("c3", "s3")}}, "2"));
  ASSERT_TRUE(cp_->SetResources(kRdsType, {{"r1", RouteConfig("r1", "*", {{"", "c3"}})}}, "2"));
  ASSERT_TRUE(cp_->NextRequestMatching(kWait,
                                       [](const ObservedRequest& r) {
                                         return r.type_url == kEdsType &&
                                                r.resource_names ==
                                                    std::vector<std::string>{"s1", "s3"};
                                       })
                  .has_value());
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s1", Endpoints("s1", "10.0.0.1", 80)}, {"s3", Endpoints("s3", "10.0.0.3", 80)}},
      "2"));
  ASSERT_TRUE(cp_->IgnoreRequests(false, kEdsType));
  std::shared_ptr<const XdsConfig> config;
  while (std::optional<Update> update = Next()) {
    ASSERT_TRUE(update->ok()) << update->status().ToString();
    const XdsConfig& c = ***update;
    if (!c.clusters.contains("c3")) continue;
    // Never a config with c3 but without its endpoints.
    EXPECT_EQ(FirstAddress(c, "c3"), "10.0.0.3:80");
    config = **update;
    break;
  }
  ASSERT_NE(config, nullptr);
  EXPECT_FALSE(config->clusters.contains("c1"));
  EXPECT_EQ(WatchedClusters(), std::vector<std::string>{"c3"});
}

// A37 / A74: an aggregate cluster's leaves, depth-first, each once; a loop
// is cut; a cluster that does not exist is left out of the leaves.
TEST_F(XdsDependencyManagerTest, AggregateClustersExpandToTheirLeaves) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"", "agg"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType,
                                {{"agg", AggregateCluster("agg", {"c1", "agg2", "missing", "c1"})},
                                 {"agg2", AggregateCluster("agg2", {"c2", "agg"})},
                                 {"c1", ValidCluster("c1", "s1")},
                                 {"c2", ValidCluster("c2", "s2")}},
                                "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s1", Endpoints("s1", "10.0.0.1", 80)}, {"s2", Endpoints("s2", "10.0.0.2", 80)}},
      "1"));
  Start("any.example.com", milliseconds(500));
  // "missing" is attempted once its does-not-exist timer fires.
  std::shared_ptr<const XdsConfig> config =
      NextConfigWhere([](const XdsConfig& c) { return c.clusters.contains("agg"); });
  ASSERT_NE(config, nullptr);
  const auto& agg = config->clusters.at("agg");
  ASSERT_TRUE(agg.ok()) << agg.status().ToString();
  const auto* children = std::get_if<XdsConfig::ClusterConfig::AggregateConfig>(&agg->children);
  ASSERT_NE(children, nullptr);
  EXPECT_EQ(children->leaf_clusters, (std::vector<std::string>{"c1", "c2"}));
  ASSERT_TRUE(config->clusters.contains("missing"));
  EXPECT_EQ(config->clusters.at("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(FirstAddress(*config, "c2"), "10.0.0.2:80");
}

// A37: a LOGICAL_DNS cluster's name is resolved off the loop into one
// locality with an endpoint per address, in the resolver's order.
TEST_F(XdsDependencyManagerTest, LogicalDnsClustersAreResolved) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"", "dns"}})}}, "1"));
  ASSERT_TRUE(
      cp_->SetResources(kCdsType, {{"dns", LogicalDnsCluster("dns", "localhost", 8080)}}, "1"));
  Start();
  std::shared_ptr<const XdsConfig> config =
      NextConfigWhere([](const XdsConfig& c) { return c.clusters.contains("dns"); });
  ASSERT_NE(config, nullptr);
  const auto* endpoints = EndpointsOf(*config, "dns");
  ASSERT_NE(endpoints, nullptr);
  ASSERT_NE(endpoints->endpoints, nullptr);
  std::vector<std::string> addresses;
  for (const auto& e : endpoints->endpoints->priorities.at(0).localities.at(0).endpoints) {
    addresses.push_back(e.addresses.at(0));
  }
  EXPECT_NE(std::find(addresses.begin(), addresses.end(), "127.0.0.1:8080"), addresses.end());
}

// A74: errors of the Listener or its routes fail the whole config.
TEST_F(XdsDependencyManagerTest, ListenerAndVirtualHostErrorsFailTheConfig) {
  ASSERT_TRUE(cp_->SetResources(kLdsType, {}, "1"));
  Start("svc.example.com", milliseconds(300));
  std::optional<Update> missing = Next();
  ASSERT_TRUE(missing.has_value());
  ASSERT_FALSE(missing->ok());
  EXPECT_EQ(missing->status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing->status().message().find("LDS resource l1"), std::string::npos)
      << missing->status().ToString();
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"l1", ApiListenerWithRoutes("l1", "other.example.com", {{"", "c1"}})}}, "2"));
  std::optional<Update> no_vhost = Next();
  ASSERT_TRUE(no_vhost.has_value());
  ASSERT_FALSE(no_vhost->ok());
  EXPECT_NE(no_vhost->status().message().find("could not find VirtualHost for svc.example.com"),
            std::string::npos)
      << no_vhost->status().ToString();
}

// A88: a NACKed update of a cluster in use is an ambient error: the cluster
// keeps its resource and the note carries the error.
TEST_F(XdsDependencyManagerTest, AmbientErrorsBecomeTheClustersResolutionNote) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"/a/", "c1"}, {"", "c2"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", ValidCluster("c1", "s1")}, {"c2", ValidCluster("c2", "s2")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s1", Endpoints("s1", "10.0.0.1", 80)}, {"s2", Endpoints("s2", "10.0.0.2", 80)}},
      "1"));
  Start();
  ASSERT_NE(NextConfigWhere([](const XdsConfig& c) { return c.clusters.size() == 2; }), nullptr);
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", InvalidCluster("c1")}, {"c2", ValidCluster("c2", "s2")}}, "2"));
  std::shared_ptr<const XdsConfig> config = NextConfigWhere([](const XdsConfig& c) {
    const auto* e = EndpointsOf(c, "c1");
    return e != nullptr && e->resolution_note.find("eds_cluster_config") != std::string::npos;
  });
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(FirstAddress(*config, "c1"), "10.0.0.1:80");
  // Only c1's branch carries c1's error.
  EXPECT_EQ(EndpointsOf(*config, "c2")->resolution_note, std::string("xDS node ID:") + kNodeId);
}

// The Clusters of an aggregate graph `width` wide and `depth` aggregate
// levels deep in which every cluster of a level names every cluster of the
// next: "root" names d1-0..d1-<width-1>, ..., each d<depth-1>-i names the
// EDS leaves d<depth>-0.., which all use endpoints "s-leaf". 3^depth paths
// lead from the root to the leaves, through 1 + width * depth clusters.
std::map<std::string, ResponseResource> SharedAggregateGraph(int width, int depth) {
  std::map<std::string, ResponseResource> clusters;
  auto level = [width](int d) {
    std::vector<std::string> names;
    for (int i = 0; i < width; ++i)
      names.push_back("d" + std::to_string(d) + "-" + std::to_string(i));
    return names;
  };
  clusters.emplace("root", AggregateCluster("root", level(1)));
  for (int d = 1; d < depth; ++d) {
    for (const std::string& name : level(d)) {
      clusters.emplace(name, AggregateCluster(name, level(d + 1)));
    }
  }
  for (const std::string& name : level(depth)) clusters.emplace(name, ValidCluster(name, "s-leaf"));
  return clusters;
}

// A37 (as gRPC): a sub-graph several aggregate clusters share is expanded
// once, not once per path: 3 wide and 16 levels deep (the most A37 allows)
// is 43 million paths but 49 clusters, each expanded once.
TEST_F(XdsDependencyManagerTest, ASharedAggregateGraphIsExpandedOncePerCluster) {
  constexpr int kWidth = 3;
  constexpr int kDepth = XdsDependencyManager::kMaxAggregateDepth;
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"", "root"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, SharedAggregateGraph(kWidth, kDepth), "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-leaf", Endpoints("s-leaf", "10.0.0.1", 80)}}, "1"));
  const auto start = std::chrono::steady_clock::now();
  Start("any.example.com");
  std::shared_ptr<const XdsConfig> config =
      NextConfigWhere([](const XdsConfig& c) { return c.clusters.contains("root"); });
  ASSERT_NE(config, nullptr);
  // A figure for the log, not a bound (bench/ measures).
  std::cout
      << "first config after "
      << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count()
      << " ms\n";
  const auto& root = config->clusters.at("root");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  const auto* children = std::get_if<XdsConfig::ClusterConfig::AggregateConfig>(&root->children);
  ASSERT_NE(children, nullptr);
  EXPECT_EQ(children->leaf_clusters, (std::vector<std::string>{"d16-0", "d16-1", "d16-2"}));
  EXPECT_EQ(config->clusters.size(), 1u + kWidth * kDepth);
  const uint64_t expansions = OnLoop<uint64_t>([&] { return manager_->last_expansion_count(); });
  std::cout << "clusters expanded for that config: " << expansions << "\n";
  EXPECT_LE(expansions, 1u + kWidth * kDepth);
}

// A37: an aggregate graph deeper than 16 fails the cluster the route names
// (TRANSIENT_FAILURE), not just the branch that is too deep; a cluster of
// that branch met again high enough in another graph is fine there.
TEST_F(XdsDependencyManagerTest, ATooDeepAggregateGraphFailsTheRootCluster) {
  // root -> {leaf, deep1}, deep1 -> deep2 -> ... -> deep16 -> leaf2: deep16
  // is an aggregate cluster at depth 16. "shallow" -> deep16.
  std::map<std::string, ResponseResource> clusters;
  clusters.emplace("root", AggregateCluster("root", {"leaf", "deep1"}));
  for (int d = 1; d < 16; ++d) {
    const std::string name = "deep" + std::to_string(d);
    clusters.emplace(name, AggregateCluster(name, {"deep" + std::to_string(d + 1)}));
  }
  clusters.emplace("deep16", AggregateCluster("deep16", {"leaf2"}));
  clusters.emplace("shallow", AggregateCluster("shallow", {"deep16"}));
  clusters.emplace("leaf", ValidCluster("leaf", "s1"));
  clusters.emplace("leaf2", ValidCluster("leaf2", "s2"));
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"/a/", "root"}, {"", "shallow"}})}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, clusters, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s1", Endpoints("s1", "10.0.0.1", 80)}, {"s2", Endpoints("s2", "10.0.0.2", 80)}},
      "1"));
  Start("any.example.com");
  std::shared_ptr<const XdsConfig> config = NextConfigWhere([](const XdsConfig& c) {
    return c.clusters.contains("root") && c.clusters.contains("leaf2");
  });
  ASSERT_NE(config, nullptr);
  const auto& root = config->clusters.at("root");
  ASSERT_FALSE(root.ok()) << "the too-deep branch was dropped and root kept its other leaf";
  EXPECT_EQ(root.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(root.status().message().find("exceeds max depth"), std::string::npos)
      << root.status().ToString();
  const auto& shallow = config->clusters.at("shallow");
  ASSERT_TRUE(shallow.ok()) << shallow.status().ToString();
  EXPECT_EQ(std::get<XdsConfig::ClusterConfig::AggregateConfig>(shallow->children).leaf_clusters,
            std::vector<std::string>{"leaf2"});
}

// A37 (as gRPC): an aggregate cluster none of whose clusters exists fails,
// and says why.
TEST_F(XdsDependencyManagerTest, AnAggregateClusterWithNoLeavesSaysSo) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"", "agg"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"agg", AggregateCluster("agg", {"missing"})}}, "1"));
  Start("any.example.com", milliseconds(300));
  std::shared_ptr<const XdsConfig> config =
      NextConfigWhere([](const XdsConfig& c) { return c.clusters.contains("agg"); });
  ASSERT_NE(config, nullptr);
  const auto& agg = config->clusters.at("agg");
  ASSERT_FALSE(agg.ok());
  EXPECT_EQ(agg.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(agg.status().message().find("aggregate cluster dependency graph for agg has no leaf"),
            std::string::npos)
      << agg.status().ToString();
}

// A37: RequestReresolution() resolves a LOGICAL_DNS cluster's name again and
// a changed answer is published; the addresses keep the resolver's order.
TEST_F(XdsDependencyManagerTest, ReresolutionTakesAChangedDnsAnswer) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"", "dns"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"dns", LogicalDnsCluster("dns", "backend.example.com", 8080)}}, "1"));
  auto answer = std::make_shared<std::atomic<int>>(0);
  Start("svc.example.com", std::chrono::minutes(10),
        [answer](const std::string& host,
                 const std::string& port) -> StatusOr<std::vector<SocketAddress>> {
          EXPECT_EQ(host, "backend.example.com");
          std::vector<std::string> texts = *answer == 0
                                               ? std::vector<std::string>{"10.0.0.2", "10.0.0.1"}
                                               : std::vector<std::string>{"10.0.0.3"};
          std::vector<SocketAddress> addresses;
          for (const std::string& text : texts) {
            addresses.push_back(*SocketAddress::Parse(text + ":" + port));
          }
          return addresses;
        });
  auto addresses_of = [](const XdsConfig& c) {
    std::vector<std::string> addresses;
    const auto* e = EndpointsOf(c, "dns");
    if (e == nullptr || e->endpoints == nullptr) return addresses;
    for (const auto& endpoint : e->endpoints->priorities.at(0).localities.at(0).endpoints) {
      addresses.push_back(endpoint.addresses.at(0));
    }
    return addresses;
  };
  std::shared_ptr<const XdsConfig> config =
      NextConfigWhere([](const XdsConfig& c) { return c.clusters.contains("dns"); });
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(addresses_of(*config), (std::vector<std::string>{"10.0.0.2:8080", "10.0.0.1:8080"}));
  *answer = 1;
  loop_->RunSync([&] { manager_->RequestReresolution(); });
  config = NextConfigWhere([&](const XdsConfig& c) { return !addresses_of(c).empty(); });
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(addresses_of(*config), std::vector<std::string>{"10.0.0.3:8080"});
  EXPECT_EQ(OnLoop<uint64_t>([&] { return manager_->dns_lookups(); }), 2u);
}

// A27: a locality without load_balancing_weight is ignored; when that
// leaves the cluster without endpoints, the note names the locality, so a
// failing pick says more than "no endpoints".
TEST_F(XdsDependencyManagerTest, ALocalityWithoutWeightIsNamedInTheNote) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"", "c1"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c1", ValidCluster("c1", "s1")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s1", EndpointsWithoutLocalityWeight("s1", "10.0.0.1", 80)}}, "1"));
  Start("any.example.com");
  std::shared_ptr<const XdsConfig> config =
      NextConfigWhere([](const XdsConfig& c) { return EndpointsOf(c, "c1") != nullptr; });
  ASSERT_NE(config, nullptr);
  const auto* endpoints = EndpointsOf(*config, "c1");
  ASSERT_NE(endpoints->endpoints, nullptr);
  EXPECT_TRUE(endpoints->endpoints->priorities.empty());
  EXPECT_NE(endpoints->resolution_note.find(
                "EDS resource s1: 1 locality without load_balancing_weight ignored: "
                "{region=\"\", zone=\"z1\", sub_zone=\"\"}"),
            std::string::npos)
      << endpoints->resolution_note;
}

// gRPC's DNS resolver: a name is not resolved again sooner than the
// minimum time after the last lookup started; the request waits for it,
// and requests meanwhile add no lookup.
TEST_F(XdsDependencyManagerTest, ReresolutionWaitsForTheMinimumTimeBetweenResolutions) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"l1", ApiListenerWithRoutes("l1", "*", {{"", "dns"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"dns", LogicalDnsCluster("dns", "backend.example.com", 8080)}}, "1"));
  struct Lookups {
    std::mutex mu;
    std::vector<std::chrono::steady_clock::time_point> times;
  };
  auto lookups = std::make_shared<Lookups>();
  constexpr milliseconds kMinTime(2000);
  Start(
      "svc.example.com", std::chrono::minutes(10),
      [lookups](const std::string&,
                const std::string& port) -> StatusOr<std::vector<SocketAddress>> {
        std::lock_guard lock(lookups->mu);
        lookups->times.push_back(std::chrono::steady_clock::now());
        return std::vector<SocketAddress>{
            *SocketAddress::Parse("10.0.0." + std::to_string(lookups->times.size()) + ":" + port)};
      },
      kMinTime);
  ASSERT_NE(NextConfigWhere([](const XdsConfig& c) { return c.clusters.contains("dns"); }),
            nullptr);
  for (int i = 0; i < 3; ++i) {
    loop_->RunSync([&] { manager_->RequestReresolution(); });
  }
  {
    std::lock_guard lock(lookups->mu);
    EXPECT_EQ(lookups->times.size(), 1u);  // not yet
  }
  ASSERT_NE(
      NextConfigWhere([](const XdsConfig& c) { return FirstAddress(c, "dns") == "10.0.0.2:8080"; }),
      nullptr);
  std::lock_guard lock(lookups->mu);
  ASSERT_EQ(lookups->times.size(), 2u);  // the three requests made one lookup
  // A lower bound only (the first lookup ran a little after its start).
  EXPECT_GE(lookups->times[1] - lookups->times[0], kMinTime * 3 / 4);
}

}  // namespace
}  // namespace uxds::testing
