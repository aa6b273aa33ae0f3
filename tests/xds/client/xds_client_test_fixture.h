// Shared setup of the XdsClient tests: a real XdsClient on its own loop
// thread, talking ADS over loopback to the scripted grpcio control plane
// (tests/support/fake_control_plane.h), with watchers that record what they
// are told.
//
// The test thread drives the control plane and waits on the watchers; every
// call into the client hops to its loop thread (XdsClient is loop-thread
// only).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "envoy/service/status/v3/csds.pb.h"
#include "support/fake_control_plane.h"
#include "test_resource_types.h"
#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/xds_client.h"
#include "uxds/xds_client_pool.h"

namespace uxds::testing {

// A generous upper bound for anything the tests wait for.
inline constexpr std::chrono::milliseconds kWait = std::chrono::seconds(30);
inline constexpr char kNodeId[] = "test-node";

// One watcher callback, as received.
template <typename T>
struct WatchEvent {
  enum class Kind { kResource, kError, kAmbient };
  Kind kind;
  std::shared_ptr<const T> resource;  // kResource
  Status status;                      // kError, kAmbient

  std::string ToString() const {
    switch (kind) {
      case Kind::kResource:
        return "OnResourceChanged(resource)";
      case Kind::kError:
        return "OnResourceChanged(" + status.ToString() + ")";
      case Kind::kAmbient:
        return "OnAmbientError(" + status.ToString() + ")";
    }
    return "?";
  }
};

// Records callbacks (on the client's loop thread); the test thread reads them.
template <typename T>
class RecordingWatcher : public XdsResourceWatcher<T> {
 public:
  using Event = WatchEvent<T>;

  void OnResourceChanged(StatusOr<std::shared_ptr<const T>> resource) override {
    if (resource.ok()) {
      Push({Event::Kind::kResource, *resource, Status()});
    } else {
      Push({Event::Kind::kError, nullptr, resource.status()});
    }
  }
  void OnAmbientError(Status status) override {
    Push({Event::Kind::kAmbient, nullptr, std::move(status)});
  }

  // The next event not yet taken, waiting up to `timeout`.
  std::optional<Event> Next(std::chrono::milliseconds timeout = kWait) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    Event event = std::move(events_.front());
    events_.pop_front();
    return event;
  }
  // Events received and not yet taken (call XdsClientTest::Flush() first).
  std::vector<Event> TakePending() {
    std::lock_guard lock(mu_);
    std::vector<Event> out(events_.begin(), events_.end());
    events_.clear();
    return out;
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

using ClusterWatcher = RecordingWatcher<TestClusterResource>;
using EndpointsWatcher = RecordingWatcher<TestEndpointsResource>;

// Assertions on the next event of a watcher (waiting up to kWait).
::testing::AssertionResult NextIsCluster(ClusterWatcher& watcher, const std::string& name,
                                         int64_t connect_timeout_ms = -1);
::testing::AssertionResult NextIsEndpoints(EndpointsWatcher& watcher,
                                           const std::string& cluster_name);
// OnResourceChanged(error) with `code` and a message containing `text` and
// ending with the node ID suffix.
template <typename T>
::testing::AssertionResult NextIsError(RecordingWatcher<T>& watcher, StatusCode code,
                                       std::string_view text);
// OnAmbientError with `code` (kOk: the error was cleared) containing `text`.
template <typename T>
::testing::AssertionResult NextIsAmbient(RecordingWatcher<T>& watcher, StatusCode code,
                                         std::string_view text = "");
// Nothing received that was not taken (after XdsClientTest::Flush()).
template <typename T>
::testing::AssertionResult NoMoreEvents(RecordingWatcher<T>& watcher);

// What the pool's CSDS registry reports (one ClientConfig per live client),
// fetched on `loop`, the pool's loop, from the test thread.
envoy::service::status::v3::ClientStatusResponse FetchCsds(LoopThread& loop, XdsClientPool& pool);

struct BootstrapFeatures {
  bool fail_on_data_errors = false;
  bool resource_timer_is_transient_error = false;
};

class XdsClientTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A bootstrap with one top-level server: `target` (the control plane).
  Bootstrap MakeBootstrap(const std::string& target, BootstrapFeatures features = {}) const;
  // Short backoff; resource timers long enough never to fire unless a test
  // shortens them.
  static XdsClientOptions TestOptions();
  void StartClient(Bootstrap bootstrap, XdsClientOptions options = TestOptions());
  // StartClient against cp_.
  void StartClient(BootstrapFeatures features = {}, XdsClientOptions options = TestOptions());
  void ShutdownClient();

  template <typename T>
  std::shared_ptr<RecordingWatcher<T>> Watch(const XdsResourceTypeImpl<T>& type,
                                             const std::string& name) {
    auto watcher = std::make_shared<RecordingWatcher<T>>();
    loop_->RunSync([&] { client_->WatchResource(type, name, watcher); });
    return watcher;
  }
  void CancelWatch(const XdsResourceType& type, const std::string& name,
                   const XdsResourceWatcherInterface* watcher) {
    loop_->RunSync([&] { client_->CancelWatch(type, name, watcher); });
  }
  // Lets the client's loop run what it has queued: watcher notifications of
  // everything the client has already sent requests for are delivered.
  void Flush();

  std::vector<XdsResourceSnapshot> Snapshot();
  // The cache entry of (type_url, name); fails the test if there is none.
  XdsResourceSnapshot Entry(const std::string& type_url, const std::string& name);
  bool HasEntry(const std::string& type_url, const std::string& name);
  envoy::service::status::v3::ClientConfig DumpClientConfig();
  XdsClientMetrics Metrics();

  // --- Control plane helpers --------------------------------------------
  // The next request of `type_url` whose resource names are exactly `names`.
  std::optional<ObservedRequest> WaitForRequest(FakeControlPlane& cp, const std::string& type_url,
                                                std::vector<std::string> names);
  std::optional<ObservedRequest> WaitForRequest(const std::string& type_url,
                                                std::vector<std::string> names) {
    return WaitForRequest(*cp_, type_url, std::move(names));
  }
  // The request answering the response with `nonce`.
  std::optional<ObservedRequest> WaitForAnswerTo(FakeControlPlane& cp, const std::string& nonce);
  std::optional<ObservedRequest> WaitForAnswerTo(const std::string& nonce) {
    return WaitForAnswerTo(*cp_, nonce);
  }
  // Sends a response on the newest stream and waits for the client's ACK or
  // NACK of it; returns that request.
  std::optional<ObservedRequest> Respond(const std::string& type_url, const std::string& version,
                                         std::vector<ResponseResource> resources,
                                         std::vector<ResourceErrorToSend> resource_errors = {});
  // Watches cluster `name`, answers with a valid Cluster and waits for it.
  std::shared_ptr<ClusterWatcher> WatchAndReceiveCluster(const std::string& name,
                                                         const std::string& version = "1");

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> loop_;
  std::unique_ptr<XdsClient> client_;
};

// --- template definitions ----------------------------------------------------

template <typename T>
::testing::AssertionResult NextIsError(RecordingWatcher<T>& watcher, StatusCode code,
                                       std::string_view text) {
  auto event = watcher.Next();
  if (!event) return ::testing::AssertionFailure() << "no event";
  if (event->kind != WatchEvent<T>::Kind::kError || event->status.code() != code ||
      event->status.message().find(text) == std::string::npos ||
      !event->status.message().ends_with(std::string(" (node ID:") + kNodeId + ")")) {
    return ::testing::AssertionFailure()
           << "got " << event->ToString() << ", want OnResourceChanged(" << StatusCodeName(code)
           << ": ..." << text << "... (node ID:" << kNodeId << "))";
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult NextIsAmbient(RecordingWatcher<T>& watcher, StatusCode code,
                                         std::string_view text) {
  auto event = watcher.Next();
  if (!event) return ::testing::AssertionFailure() << "no event";
  const bool suffix_ok = code == StatusCode::kOk || event->status.message().ends_with(
                                                        std::string(" (node ID:") + kNodeId + ")");
  if (event->kind != WatchEvent<T>::Kind::kAmbient || event->status.code() != code ||
      event->status.message().find(text) == std::string::npos || !suffix_ok) {
    return ::testing::AssertionFailure() << "got " << event->ToString() << ", want OnAmbientError("
                                         << StatusCodeName(code) << ": ..." << text << "...)";
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult NoMoreEvents(RecordingWatcher<T>& watcher) {
  auto pending = watcher.TakePending();
  if (pending.empty()) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure() << "unexpected events:";
  for (const auto& event : pending) failure << " " << event.ToString();
  return failure;
}

}  // namespace uxds::testing
