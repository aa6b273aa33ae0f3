#include "xds_client_test_fixture.h"

#include <algorithm>
#include <future>

#include "uxds/task.h"
#include "xds/client/xds_client_pool_state.h"

namespace uxds::testing {

namespace {

Task<void> ShutdownTask(XdsClient* client, std::promise<void>* done) {
  co_await client->Shutdown();
  done->set_value();
}

}  // namespace

::testing::AssertionResult NextIsCluster(ClusterWatcher& watcher, const std::string& name,
                                         int64_t connect_timeout_ms) {
  auto event = watcher.Next();
  if (!event) return ::testing::AssertionFailure() << "no event";
  if (event->kind != ClusterWatcher::Event::Kind::kResource) {
    return ::testing::AssertionFailure()
           << "got " << event->ToString() << ", want Cluster " << name;
  }
  if (event->resource->name != name ||
      (connect_timeout_ms >= 0 && event->resource->connect_timeout_ms != connect_timeout_ms)) {
    return ::testing::AssertionFailure()
           << "got Cluster " << event->resource->name << " (connect_timeout "
           << event->resource->connect_timeout_ms << " ms), want " << name;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult NextIsEndpoints(EndpointsWatcher& watcher,
                                           const std::string& cluster_name) {
  auto event = watcher.Next();
  if (!event) return ::testing::AssertionFailure() << "no event";
  if (event->kind != EndpointsWatcher::Event::Kind::kResource ||
      event->resource->cluster_name != cluster_name) {
    return ::testing::AssertionFailure()
           << "got " << event->ToString() << ", want ClusterLoadAssignment " << cluster_name;
  }
  return ::testing::AssertionSuccess();
}

envoy::service::status::v3::ClientStatusResponse FetchCsds(LoopThread& loop, XdsClientPool& pool) {
  using Response = envoy::service::status::v3::ClientStatusResponse;
  std::promise<Response> out;
  loop.RunSync([&] {
    auto fetch = [](std::shared_ptr<csds::CsdsClientRegistry> registry, Loop& pool_loop,
                    std::promise<Response>* out) -> Task<void> {
      auto response = co_await registry->Fetch(pool_loop);
      out->set_value(response.ok() ? *std::move(response) : Response());
    };
    loop.loop().Spawn(fetch(xds_internal::StateOf(pool).csds, loop.loop(), &out));
  });
  return out.get_future().get();
}

void XdsClientTest::SetUp() {
  cp_ = FakeControlPlane::Start();
  ASSERT_NE(cp_, nullptr);
  auto loop = LoopThread::Start();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  loop_ = *std::move(loop);
}

void XdsClientTest::TearDown() {
  ShutdownClient();
  loop_.reset();
  cp_.reset();
}

Bootstrap XdsClientTest::MakeBootstrap(const std::string& target,
                                       BootstrapFeatures features) const {
  Bootstrap bootstrap;
  XdsServerConfig server;
  server.server_uri = target;
  server.fail_on_data_errors = features.fail_on_data_errors;
  server.resource_timer_is_transient_error = features.resource_timer_is_transient_error;
  bootstrap.xds_servers.push_back(server);
  bootstrap.node.id = kNodeId;
  bootstrap.node.cluster = "test-cluster";
  bootstrap.node.locality.zone = "test-zone";
  return bootstrap;
}

XdsClientOptions XdsClientTest::TestOptions() {
  XdsClientOptions options;
  options.backoff_initial = std::chrono::milliseconds(50);
  options.backoff_max = std::chrono::milliseconds(200);
  options.resource_does_not_exist_timeout = std::chrono::minutes(10);
  options.resource_transient_error_timeout = std::chrono::minutes(10);
  options.connect_timeout = std::chrono::seconds(10);
  options.client_scope = "test-target";
  return options;
}

void XdsClientTest::StartClient(Bootstrap bootstrap, XdsClientOptions options) {
  loop_->RunSync([&] {
    auto client = XdsClient::Create(loop_->loop(), std::move(bootstrap), std::move(options));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = *std::move(client);
  });
  ASSERT_NE(client_, nullptr);
}

void XdsClientTest::StartClient(BootstrapFeatures features, XdsClientOptions options) {
  StartClient(MakeBootstrap(cp_->target(), features), std::move(options));
}

void XdsClientTest::ShutdownClient() {
  if (client_ == nullptr || loop_ == nullptr) return;
  std::promise<void> done;
  loop_->RunSync([&] { loop_->loop().Spawn(ShutdownTask(client_.get(), &done)); });
  done.get_future().wait();
  loop_->RunSync([&] { client_.reset(); });
}

void XdsClientTest::Flush() {
  // Notifications are delivered by a task the cache wakes; a few loop turns
  // after the last response was handled they have all run.
  for (int i = 0; i < 3; ++i) loop_->RunSync([] {});
}

std::vector<XdsResourceSnapshot> XdsClientTest::Snapshot() {
  std::vector<XdsResourceSnapshot> snapshot;
  loop_->RunSync([&] { snapshot = client_->Snapshot(); });
  return snapshot;
}

bool XdsClientTest::HasEntry(const std::string& type_url, const std::string& name) {
  for (const XdsResourceSnapshot& entry : Snapshot()) {
    if (entry.type_url == type_url && entry.name == name) return true;
  }
  return false;
}

XdsResourceSnapshot XdsClientTest::Entry(const std::string& type_url, const std::string& name) {
  for (XdsResourceSnapshot& entry : Snapshot()) {
    if (entry.type_url == type_url && entry.name == name) return entry;
  }
  ADD_FAILURE() << "no cache entry for " << type_url << " " << name;
  return {};
}

envoy::service::status::v3::ClientConfig XdsClientTest::DumpClientConfig() {
  std::string serialized;
  loop_->RunSync([&] { serialized = client_->DumpClientConfig(); });
  envoy::service::status::v3::ClientConfig config;
  EXPECT_TRUE(config.ParseFromString(serialized));
  return config;
}

XdsClientMetrics XdsClientTest::Metrics() {
  XdsClientMetrics metrics;
  loop_->RunSync([&] { metrics = client_->GetMetrics(); });
  return metrics;
}

std::optional<ObservedRequest> XdsClientTest::WaitForRequest(FakeControlPlane& cp,
                                                             const std::string& type_url,
                                                             std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  auto request = cp.NextRequestMatching(kWait, [&](const ObservedRequest& r) {
    std::vector<std::string> got = r.resource_names;
    std::sort(got.begin(), got.end());
    return r.type_url == type_url && got == names;
  });
  if (!request) ADD_FAILURE() << "no " << type_url << " request naming exactly the expected names";
  return request;
}

std::optional<ObservedRequest> XdsClientTest::WaitForAnswerTo(FakeControlPlane& cp,
                                                              const std::string& nonce) {
  auto request = cp.NextRequestMatching(
      kWait, [&](const ObservedRequest& r) { return r.response_nonce == nonce; });
  if (!request) ADD_FAILURE() << "no request answering nonce " << nonce;
  return request;
}

std::optional<ObservedRequest> XdsClientTest::Respond(
    const std::string& type_url, const std::string& version,
    std::vector<ResponseResource> resources, std::vector<ResourceErrorToSend> resource_errors) {
  ScriptedResponse response;
  response.type_url = type_url;
  response.version_info = version;
  response.resources = std::move(resources);
  response.resource_errors = std::move(resource_errors);
  const std::string nonce = cp_->SendResponse(response);
  if (nonce.empty()) return std::nullopt;
  auto answer = WaitForAnswerTo(nonce);
  Flush();
  return answer;
}

std::shared_ptr<ClusterWatcher> XdsClientTest::WatchAndReceiveCluster(const std::string& name,
                                                                      const std::string& version) {
  auto watcher = Watch(TestClusterType::Get(), name);
  WaitForRequest(kClusterTypeUrl, {name});
  Respond(kClusterTypeUrl, version, {ClusterAny(name)});
  EXPECT_TRUE(NextIsCluster(*watcher, name));
  return watcher;
}

}  // namespace uxds::testing
