// The CSDS service (A40) end to end: XdsClients on their own loop threads
// watching resources from the fake control plane (tests/peers), a uxds HTTP/2
// server on another loop thread hosting CSDS, and grpcio
// (tests/peers/csds_client.py) calling it.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/service/status/v3/csds.pb.h"
#include "http2/server.h"
#include "support/fake_control_plane.h"
#include "support/test_support.h"
#include "support/xds_test_resources.h"
#include "uxds/loop.h"
#include "uxds/xds_client.h"
#include "uxds/xds_resources.h"
#include "xds/csds/csds_client_registry.h"
#include "xds/csds/csds_service.h"

namespace uxds::testing {
namespace {

using json = nlohmann::json;
using csds::CsdsClientRegistry;

constexpr std::chrono::milliseconds kWait = std::chrono::seconds(30);
constexpr char kNodeId[] = "csds-test-node";

// Records what one watch was told (on the client's loop thread).
class Watcher : public XdsUntypedResourceWatcher {
 public:
  enum class Kind { kResource, kError, kAmbient };
  struct Event {
    Kind kind;
    Status status;
  };

  void OnResourceChanged(StatusOr<XdsResourceData> resource) override {
    Push({resource.ok() ? Kind::kResource : Kind::kError, resource.status()});
  }
  void OnAmbientError(Status status) override { Push({Kind::kAmbient, std::move(status)}); }

  // Waits for an event of `kind` (skipping others); false after kWait.
  bool WaitFor(Kind kind, StatusCode code = StatusCode::kOk) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] {
      while (!events_.empty()) {
        Event event = std::move(events_.front());
        events_.pop_front();
        if (event.kind == kind && event.status.code() == code) return true;
      }
      return false;
    });
  }

 private:
  void Push(Event event) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(event));
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
};

// One XdsClient on its own loop thread, registered with the CSDS registry.
struct TestClient {
  std::unique_ptr<LoopThread> loop;
  std::unique_ptr<XdsClient> client;
  CsdsClientRegistry::Registration registration;

  std::shared_ptr<Watcher> Watch(const XdsResourceType& type, const std::string& name) {
    auto watcher = std::make_shared<Watcher>();
    loop->RunSync([&] { client->WatchUntypedResource(type, name, watcher); });
    return watcher;
  }

  void Shutdown() {
    registration.Reset();
    if (client == nullptr) return;
    std::promise<void> done;
    loop->RunSync([&] {
      loop->loop().Spawn([](XdsClient& c, std::promise<void>& d) -> Task<void> {
        co_await c.Shutdown();
        d.set_value();
      }(*client, done));
    });
    done.get_future().wait();
    loop->RunSync([&] { client.reset(); });
    loop.reset();
  }
};

// What csds_client.py printed and how it exited.
struct PeerResult {
  std::vector<json> lines;
  int exit_code = -1;
};

class CsdsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cp_ = FakeControlPlane::Start();
    ASSERT_NE(cp_, nullptr);
    auto server_loop = LoopThread::Start();
    ASSERT_TRUE(server_loop.ok()) << server_loop.status().ToString();
    server_loop_ = *std::move(server_loop);
    registry_ = std::make_shared<CsdsClientRegistry>();
    auto services = std::make_shared<http2::ServiceRegistry>();
    csds::RegisterCsdsService(*services, registry_);
    Status listened;
    server_loop_->RunSync([&] {
      auto server =
          http2::Server::Listen(server_loop_->loop(), SocketAddress::Loopback4(0), services);
      if (!server.ok()) {
        listened = server.status();
        return;
      }
      server_ = *std::move(server);
      server_loop_->loop().Spawn([](http2::Server& s, std::promise<void>& served) -> Task<void> {
        co_await s.Serve();
        served.set_value();
      }(*server_, served_));
    });
    ASSERT_TRUE(listened.ok()) << listened.ToString();
  }

  void TearDown() override {
    for (auto& client : clients_) client->Shutdown();
    if (server_ != nullptr) {
      std::promise<void> drained;
      server_loop_->RunSync([&] {
        server_loop_->loop().Spawn([](http2::Server& s, std::promise<void>& d) -> Task<void> {
          co_await s.Shutdown(std::chrono::seconds(1));
          d.set_value();
        }(*server_, drained));
      });
      drained.get_future().wait();
      // Shutdown() can complete before Serve() has left its accept loop, so
      // the server is only destroyed once Serve() has returned.
      served_.get_future().wait();
      server_loop_->RunSync([&] { server_.reset(); });
    }
    server_loop_.reset();
    cp_.reset();
  }

  // A client of cp_ with the given CSDS client_scope and does-not-exist timer.
  TestClient& StartClient(const std::string& scope, std::chrono::milliseconds resource_timeout) {
    auto client = std::make_unique<TestClient>();
    auto loop = LoopThread::Start();
    EXPECT_TRUE(loop.ok()) << loop.status().ToString();
    client->loop = *std::move(loop);
    Bootstrap bootstrap;
    XdsServerConfig server;
    server.server_uri = cp_->target();
    bootstrap.xds_servers.push_back(server);
    bootstrap.node.id = kNodeId;
    bootstrap.node.cluster = "csds-test-cluster";
    XdsClientOptions options;
    options.client_scope = scope;
    options.resource_does_not_exist_timeout = resource_timeout;
    options.backoff_initial = std::chrono::milliseconds(50);
    options.backoff_max = std::chrono::milliseconds(200);
    client->loop->RunSync([&] {
      auto created = XdsClient::Create(client->loop->loop(), std::move(bootstrap), options);
      EXPECT_TRUE(created.ok()) << created.status().ToString();
      if (created.ok()) client->client = *std::move(created);
    });
    if (client->client != nullptr) client->registration = registry_->Add(*client->client);
    clients_.push_back(std::move(client));
    return *clients_.back();
  }

  // Runs csds_client.py against the server with `args`; every line it
  // printed, parsed.
  PeerResult RunCsdsClient(std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {Python(), SourceRoot() + "/tests/peers/csds_client.py",
                                     "--target", "127.0.0.1:" + std::to_string(server_->port())};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess peer = Subprocess::Start(argv);
    PeerResult result;
    while (std::optional<std::string> line = peer.ReadLine(kWait)) {
      json parsed = json::parse(*line, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << *line;
      result.lines.push_back(std::move(parsed));
    }
    result.exit_code = peer.Wait(kWait);
    return result;
  }

  // Fetch() awaited on the server's loop, as the service does.
  StatusOr<envoy::service::status::v3::ClientStatusResponse> FetchOnServerLoop() {
    std::promise<StatusOr<envoy::service::status::v3::ClientStatusResponse>> result;
    server_loop_->RunSync([&] {
      server_loop_->loop().Spawn(
          [](CsdsClientRegistry& registry, Loop& loop, decltype(result)& out) -> Task<void> {
            out.set_value(co_await registry.Fetch(loop));
          }(*registry_, server_loop_->loop(), result));
    });
    return result.get_future().get();
  }

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> server_loop_;
  std::unique_ptr<http2::Server> server_;
  std::promise<void> served_;  // Serve() returned
  std::shared_ptr<CsdsClientRegistry> registry_;
  std::vector<std::unique_ptr<TestClient>> clients_;
};

// The ClientConfig with `scope`, or null.
const json* FindConfig(const json& response, const std::string& scope) {
  for (const json& config : response["config"]) {
    if (config.value("client_scope", "") == scope) return &config;
  }
  return nullptr;
}

// The generic_xds_configs entry of (type_url, name), or null.
const json* FindResource(const json& config, const std::string& type_url, const std::string& name) {
  for (const json& entry : config["generic_xds_configs"]) {
    if (entry.value("type_url", "") == type_url && entry.value("name", "") == name) return &entry;
  }
  return nullptr;
}

TEST_F(CsdsServiceTest, FetchReportsEveryClientAndResourceState) {
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", ValidCluster("c1", "s1")}, {"c2", ValidCluster("c2", "s2")}}, "1"));
  // No EDS answers at all: those names stay REQUESTED until their timer fires.
  TestClient& a = StartClient("target-a", std::chrono::minutes(10));
  ASSERT_NE(a.client, nullptr);
  auto c1 = a.Watch(ClusterResourceType::Get(), "c1");
  auto c2 = a.Watch(ClusterResourceType::Get(), "c2");
  auto pending = a.Watch(EndpointResourceType::Get(), "pending");
  ASSERT_TRUE(c1->WaitFor(Watcher::Kind::kResource));
  ASSERT_TRUE(c2->WaitFor(Watcher::Kind::kResource));
  // Version 2 changes c1 and breaks c2: the response is NACKed, c1 is used
  // (A46) and c2 keeps version 1 (A88, fail_on_data_errors off).
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", ValidCluster("c1", "s1-v2")}, {"c2", InvalidCluster("c2")}}, "2"));
  ASSERT_TRUE(c1->WaitFor(Watcher::Kind::kResource));
  ASSERT_TRUE(c2->WaitFor(Watcher::Kind::kAmbient, StatusCode::kInvalidArgument));

  TestClient& b = StartClient("target-b", std::chrono::milliseconds(200));
  ASSERT_NE(b.client, nullptr);
  auto missing = b.Watch(EndpointResourceType::Get(), "missing");
  ASSERT_TRUE(missing->WaitFor(Watcher::Kind::kError, StatusCode::kNotFound));

  PeerResult peer = RunCsdsClient();
  ASSERT_EQ(peer.exit_code, 0);
  ASSERT_EQ(peer.lines.size(), 1u);
  const json& response = peer.lines[0]["response"];
  ASSERT_EQ(response["config"].size(), 2u) << response.dump();
  // Clients in the order they were registered.
  EXPECT_EQ(response["config"][0]["client_scope"], "target-a");
  EXPECT_EQ(response["config"][1]["client_scope"], "target-b");

  const json* config_a = FindConfig(response, "target-a");
  ASSERT_NE(config_a, nullptr);
  // A40: the Node the control plane receives.
  EXPECT_EQ((*config_a)["node"]["id"], kNodeId);
  EXPECT_EQ((*config_a)["node"]["cluster"], "csds-test-cluster");
  EXPECT_EQ((*config_a)["generic_xds_configs"].size(), 3u) << config_a->dump();

  const json* r1 = FindResource(*config_a, kCdsType, "c1");
  ASSERT_NE(r1, nullptr) << config_a->dump();
  EXPECT_EQ((*r1)["client_status"], "ACKED");
  EXPECT_EQ((*r1)["version_info"], "2");
  // A40: the resource as received.
  EXPECT_EQ((*r1)["xds_config"]["name"], "c1");
  EXPECT_EQ((*r1)["xds_config"]["eds_cluster_config"]["service_name"], "s1-v2");
  EXPECT_FALSE(r1->contains("error_state")) << r1->dump();

  const json* r2 = FindResource(*config_a, kCdsType, "c2");
  ASSERT_NE(r2, nullptr) << config_a->dump();
  EXPECT_EQ((*r2)["client_status"], "NACKED");
  EXPECT_EQ((*r2)["version_info"], "1");
  EXPECT_EQ((*r2)["xds_config"]["eds_cluster_config"]["service_name"], "s2");
  ASSERT_TRUE(r2->contains("error_state")) << r2->dump();
  EXPECT_EQ((*r2)["error_state"]["version_info"], "2");
  EXPECT_NE((*r2)["error_state"]["details"].get<std::string>().find("eds_cluster_config"),
            std::string::npos)
      << r2->dump();
  EXPECT_TRUE((*r2)["error_state"].contains("last_update_attempt")) << r2->dump();

  const json* r3 = FindResource(*config_a, kEdsType, "pending");
  ASSERT_NE(r3, nullptr) << config_a->dump();
  EXPECT_EQ((*r3)["client_status"], "REQUESTED");
  EXPECT_FALSE(r3->contains("xds_config"));
  EXPECT_EQ((*r3)["version_info"], "");

  const json* config_b = FindConfig(response, "target-b");
  ASSERT_NE(config_b, nullptr);
  ASSERT_EQ((*config_b)["generic_xds_configs"].size(), 1u) << config_b->dump();
  const json* r4 = FindResource(*config_b, kEdsType, "missing");
  ASSERT_NE(r4, nullptr) << config_b->dump();
  EXPECT_EQ((*r4)["client_status"], "DOES_NOT_EXIST");
  EXPECT_FALSE(r4->contains("xds_config"));
}

TEST_F(CsdsServiceTest, StreamAnswersEveryRequestAndCanExcludeContents) {
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c1", ValidCluster("c1", "s1")}}, "7"));
  TestClient& a = StartClient("target-a", std::chrono::minutes(10));
  ASSERT_NE(a.client, nullptr);
  auto c1 = a.Watch(ClusterResourceType::Get(), "c1");
  ASSERT_TRUE(c1->WaitFor(Watcher::Kind::kResource));

  PeerResult peer = RunCsdsClient({"--stream", "3", "--exclude-resource-contents"});
  ASSERT_EQ(peer.exit_code, 0);
  ASSERT_EQ(peer.lines.size(), 3u);
  for (const json& line : peer.lines) {
    const json& response = line["response"];
    ASSERT_EQ(response["config"].size(), 1u) << response.dump();
    const json* r1 = FindResource(response["config"][0], kCdsType, "c1");
    ASSERT_NE(r1, nullptr) << response.dump();
    EXPECT_EQ((*r1)["client_status"], "ACKED");
    EXPECT_EQ((*r1)["version_info"], "7");
    EXPECT_FALSE(r1->contains("xds_config")) << r1->dump();
  }

  // Without the flag the contents are there.
  PeerResult full = RunCsdsClient({"--stream", "1"});
  ASSERT_EQ(full.exit_code, 0);
  ASSERT_EQ(full.lines.size(), 1u);
  const json* r1 = FindResource(full.lines[0]["response"]["config"][0], kCdsType, "c1");
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ((*r1)["xds_config"]["name"], "c1");
}

TEST_F(CsdsServiceTest, NodeMatchersAreRejected) {
  PeerResult peer = RunCsdsClient({"--node-matcher"});
  EXPECT_EQ(peer.exit_code, 1);
  ASSERT_EQ(peer.lines.size(), 1u);
  EXPECT_EQ(peer.lines[0]["error"]["code"], "INVALID_ARGUMENT") << peer.lines[0].dump();
  EXPECT_NE(peer.lines[0]["error"]["details"].get<std::string>().find("node_matchers"),
            std::string::npos);
}

TEST_F(CsdsServiceTest, NoClientsIsAnEmptyResponse) {
  PeerResult peer = RunCsdsClient();
  ASSERT_EQ(peer.exit_code, 0);
  ASSERT_EQ(peer.lines.size(), 1u);
  EXPECT_TRUE(peer.lines[0]["response"]["config"].empty()) << peer.lines[0].dump();
}

TEST_F(CsdsServiceTest, ClientsLeaveTheRegistry) {
  TestClient& a = StartClient("target-a", std::chrono::minutes(10));
  TestClient& b = StartClient("target-b", std::chrono::minutes(10));
  ASSERT_NE(a.client, nullptr);
  ASSERT_NE(b.client, nullptr);
  EXPECT_EQ(registry_->size(), 2u);
  a.Shutdown();
  EXPECT_EQ(registry_->size(), 1u);

  PeerResult peer = RunCsdsClient();
  ASSERT_EQ(peer.exit_code, 0);
  ASSERT_EQ(peer.lines.size(), 1u);
  const json& response = peer.lines[0]["response"];
  ASSERT_EQ(response["config"].size(), 1u) << response.dump();
  EXPECT_EQ(response["config"][0]["client_scope"], "target-b");
}

// A client that leaves after its dump was posted to its (busy) loop, but
// before the dump ran, is left out; the fetch still completes.
TEST_F(CsdsServiceTest, ClientLeavingWhileItsDumpIsQueuedIsLeftOut) {
  TestClient& a = StartClient("target-a", std::chrono::minutes(10));
  TestClient& b = StartClient("target-b", std::chrono::minutes(10));
  ASSERT_NE(a.client, nullptr);
  ASSERT_NE(b.client, nullptr);

  // Keep a's loop busy so the dump waits in its queue.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> busy;
  a.loop->loop().Post([&busy, released] {
    busy.set_value();
    released.wait();
  });
  busy.get_future().wait();

  using Response = StatusOr<envoy::service::status::v3::ClientStatusResponse>;
  std::promise<Response> fetched;
  server_loop_->RunSync([&] {
    server_loop_->loop().Spawn(
        [](CsdsClientRegistry& registry, Loop& loop, std::promise<Response>& out) -> Task<void> {
          out.set_value(co_await registry.Fetch(loop));
        }(*registry_, server_loop_->loop(), fetched));
  });
  // Two turns of the server loop: the fetch has started and posted its dumps.
  server_loop_->RunSync([] {});
  server_loop_->RunSync([] {});
  a.registration.Reset();
  release.set_value();

  std::future<Response> result = fetched.get_future();
  ASSERT_EQ(result.wait_for(kWait), std::future_status::ready);
  Response response = result.get();
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  ASSERT_EQ(response->config_size(), 1);
  EXPECT_EQ(response->config(0).client_scope(), "target-b");
}

// The server and the client on one loop: the dump is posted to the same loop.
TEST_F(CsdsServiceTest, ClientOnTheServerLoop) {
  std::unique_ptr<XdsClient> client;
  server_loop_->RunSync([&] {
    Bootstrap bootstrap;
    XdsServerConfig server;
    server.server_uri = cp_->target();
    bootstrap.xds_servers.push_back(server);
    bootstrap.node.id = kNodeId;
    XdsClientOptions options;
    options.client_scope = "same-loop";
    auto created = XdsClient::Create(server_loop_->loop(), std::move(bootstrap), options);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    client = *std::move(created);
  });
  ASSERT_NE(client, nullptr);
  CsdsClientRegistry::Registration registration = registry_->Add(*client);

  auto response = FetchOnServerLoop();
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  ASSERT_EQ(response->config_size(), 1);
  EXPECT_EQ(response->config(0).client_scope(), "same-loop");
  EXPECT_EQ(response->config(0).node().id(), kNodeId);

  registration.Reset();
  std::promise<void> done;
  server_loop_->RunSync([&] {
    server_loop_->loop().Spawn([](XdsClient& c, std::promise<void>& d) -> Task<void> {
      co_await c.Shutdown();
      d.set_value();
    }(*client, done));
  });
  done.get_future().wait();
  server_loop_->RunSync([&] { client.reset(); });
}

}  // namespace
}  // namespace uxds::testing
