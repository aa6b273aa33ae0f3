// The Channel end to end on loopback against the fake control plane and
// several TestService backends: header routing (A28), weighted clusters,
// priority failover and recovery (A42 / A56), an aggregate cluster (A37),
// and a control plane that goes away while everything is cached (A88).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "channel_fixture.h"
#include "channel_test_resources.h"
#include "support/test_support.h"
#include "test_service/test_service.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class ChannelEndToEndTest : public ChannelFixture {
 protected:
  ChannelEndToEndTest() : ChannelFixture(4) {}

  // One EDS cluster per name, "c<i>" served by backend i.
  void ServeClustersOnBackends(int count) {
    std::map<std::string, ResponseResource> clusters;
    std::map<std::string, ResponseResource> endpoints;
    for (int i = 0; i < count; ++i) {
      const std::string name = "c" + std::to_string(i);
      clusters.emplace(name, ValidCluster(name, "s-" + name));
      endpoints.emplace("s-" + name, EndpointsAt("s-" + name, {addresses_[i]}));
    }
    ASSERT_TRUE(cp_->SetResources(kCdsType, clusters, "1"));
    ASSERT_TRUE(cp_->SetResources(kEdsType, endpoints, "1"));
  }

  // Calls until one is answered by one of `addresses` (the config or a
  // connection may still be on its way); false if none is within 30 s.
  bool EventuallyAnsweredBy(const std::set<std::string>& addresses, CallOptions options = {}) {
    const auto give_up = std::chrono::steady_clock::now() + seconds(30);
    while (std::chrono::steady_clock::now() < give_up) {
      StatusOr<UnaryResponse> reply = Call(test_service::kEmptyCall, options);
      if (reply.ok() && addresses.contains(reply->peer)) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

  // Unary calls from `concurrency` tasks on the control loop, each calling
  // again as soon as its call ends, until Stop().
  class CallLoad {
   public:
    CallLoad(LoopThread& control, Channel& channel, int concurrency)
        : control_(control), channel_(channel) {
      control_.RunSync([&] { control_.loop().Spawn(Run(concurrency)); });
    }
    // Waits (at most 60 s) until `count` calls more than now have ended.
    bool WaitForMoreCalls(int count) {
      const int target = ended() + count;
      const auto give_up = std::chrono::steady_clock::now() + seconds(60);
      while (ended() < target && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(milliseconds(1));
      }
      return ended() >= target;
    }
    // Waits (at most 60 s) until `count` calls more than now have succeeded.
    bool WaitForMoreSuccesses(int count) {
      const int target = ok_ + count;
      const auto give_up = std::chrono::steady_clock::now() + seconds(60);
      while (ok_ < target && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(milliseconds(1));
      }
      return ok_ >= target;
    }
    // Stops calling; the failed calls, keyed by status.
    std::map<std::string, int> Stop() {
      stop_ = true;
      done_.get_future().wait();
      std::lock_guard lock(mu_);
      return failures_;
    }
    int ended() const { return ok_ + failed_; }
    int ok() const { return ok_; }

   private:
    Task<void> Run(int concurrency) {
      TaskGroup workers(control_.loop());
      for (int i = 0; i < concurrency; ++i) workers.Spawn(Work());
      co_await workers.Join();
      done_.set_value();
    }
    Task<void> Work() {
      CallOptions options;
      options.timeout = seconds(10);
      while (!stop_) {
        StatusOr<UnaryResponse> reply =
            co_await channel_.UnaryCall(test_service::kEmptyCall, "", options);
        if (reply.ok()) {
          ++ok_;
          continue;
        }
        ++failed_;
        std::lock_guard lock(mu_);
        ++failures_[reply.status().ToString()];
      }
    }

    LoopThread& control_;
    Channel& channel_;
    std::atomic<bool> stop_{false};
    std::atomic<int> ok_{0};
    std::atomic<int> failed_{0};
    std::mutex mu_;
    std::map<std::string, int> failures_;
    std::promise<void> done_;
  };

  // Once one of `addresses` answers, the next `count` calls all go to them.
  void ExpectCallsSettleOn(const std::set<std::string>& addresses, int count,
                           const CallOptions& options) {
    ASSERT_TRUE(EventuallyAnsweredBy(addresses, options));
    std::map<std::string, int> counts = CountCalls(test_service::kEmptyCall, count, options);
    int answered = 0;
    for (const std::string& address : addresses) answered += counts[address];
    EXPECT_EQ(answered, count) << ::testing::PrintToString(counts);
  }
};

CallOptions WithHeader(std::string name, std::string value) {
  CallOptions options;
  options.metadata = {{std::move(name), std::move(value)}};
  return options;
}

// A28: header matchers pick the route; a request without the header takes
// the default route.
TEST_F(ChannelEndToEndTest, CallsAreRoutedByHeader) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType,
      {{"svc", ApiListenerWithHeaderRoutes(
                   "svc", {{"x-tier", "gold", "c1"}, {"x-tier", "silver", "c2"}}, "c0")}},
      "1"));
  ServeClustersOnBackends(3);
  CreateChannel("xds:///svc");
  ASSERT_TRUE(EventuallyAnsweredBy({addresses_[0]}));
  for (int i = 0; i < 3; ++i) {
    auto gold = Call(test_service::kEmptyCall, WithHeader("x-tier", "gold"));
    ASSERT_TRUE(gold.ok()) << gold.status().ToString();
    EXPECT_EQ(gold->peer, addresses_[1]);
    auto silver = Call(test_service::kUnaryCall, WithHeader("x-tier", "silver"));
    ASSERT_TRUE(silver.ok()) << silver.status().ToString();
    EXPECT_EQ(silver->peer, addresses_[2]);
    auto bronze = Call(test_service::kEmptyCall, WithHeader("x-tier", "bronze"));
    ASSERT_TRUE(bronze.ok()) << bronze.status().ToString();
    EXPECT_EQ(bronze->peer, addresses_[0]);
    auto none = Call(test_service::kEmptyCall);
    ASSERT_TRUE(none.ok()) << none.status().ToString();
    EXPECT_EQ(none->peer, addresses_[0]);
  }
}

// A28: weighted_clusters 3:1. Over n = 2000 calls the count of the heavier
// cluster is Binomial(n, 3/4): mean 1500, standard deviation 19.4; the
// bound of 7 standard deviations fails a correct client with probability
// below 1e-11, while a 1:1 split (1000) or a 2:1 split (1333) falls far
// outside it.
TEST_F(ChannelEndToEndTest, WeightedClustersSplitCallsByWeight) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"svc", ApiListenerWithWeightedClusters("svc", {{"c0", 3}, {"c1", 1}})}}, "1"));
  ServeClustersOnBackends(2);
  CreateChannel("xds:///svc");
  // Both clusters connected first, so that every counted call succeeds.
  ASSERT_TRUE(EventuallyAnsweredBy({addresses_[0]}));
  ASSERT_TRUE(EventuallyAnsweredBy({addresses_[1]}));
  constexpr int kCalls = 2000;
  std::map<std::string, int> counts = CountCalls(test_service::kEmptyCall, kCalls);
  EXPECT_EQ(counts[addresses_[0]] + counts[addresses_[1]], kCalls)
      << ::testing::PrintToString(counts);
  const double mean = kCalls * 0.75;
  const double bound = 7 * std::sqrt(kCalls * 0.75 * 0.25);
  EXPECT_NEAR(counts[addresses_[0]], mean, bound) << ::testing::PrintToString(counts);
}

// A42 / A56: when every priority-0 backend dies, calls fail over to
// priority 1; when they come back, calls return to priority 0.
TEST_F(ChannelEndToEndTest, PriorityFailoverAndRecovery) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c", ValidCluster("c", "s-c")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType,
      {{"s-c", EndpointsByPriority(
                   "s-c", {{addresses_[0], addresses_[1]}, {addresses_[2], addresses_[3]}})}},
      "1"));
  CreateChannel("xds:///svc");
  CallOptions waiting;
  waiting.wait_for_ready = true;
  ExpectCallsSettleOn({addresses_[0], addresses_[1]}, 20, waiting);

  StopBackend(0);
  StopBackend(1);
  // Calls in the switch-over may fail while the failure is being noticed;
  // once priority 1 answers, every call goes there.
  ExpectCallsSettleOn({addresses_[2], addresses_[3]}, 20, waiting);

  RestartBackend(0);
  RestartBackend(1);
  // The priority-0 subchannels reconnect after their backoff (at most
  // 500 ms here) and take the calls back.
  ExpectCallsSettleOn({addresses_[0], addresses_[1]}, 20, waiting);
}

// A37: an aggregate cluster is one priority list over its children: calls go
// to the first child while it has endpoints, then to the next.
TEST_F(ChannelEndToEndTest, AggregateClusterFailsOverBetweenItsChildren) {
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "agg"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType,
                                {{"agg", AggregateCluster("agg", {"primary", "secondary"})},
                                 {"primary", ValidCluster("primary", "s-primary")},
                                 {"secondary", ValidCluster("secondary", "s-secondary")}},
                                "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-primary", EndpointsAt("s-primary", {addresses_[0]})},
                                 {"s-secondary", EndpointsAt("s-secondary", {addresses_[1]})}},
                                "1"));
  CreateChannel("xds:///svc");
  CallOptions waiting;
  waiting.wait_for_ready = true;
  ExpectCallsSettleOn({addresses_[0]}, 10, waiting);

  // The primary loses its endpoints: the secondary takes over.
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-primary", EndpointsByPriority("s-primary", {})},
                                 {"s-secondary", EndpointsAt("s-secondary", {addresses_[1]})}},
                                "2"));
  ExpectCallsSettleOn({addresses_[1]}, 10, waiting);

  // A dying backend fails over the same way.
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-primary", EndpointsAt("s-primary", {addresses_[2]})},
                                 {"s-secondary", EndpointsAt("s-secondary", {addresses_[1]})}},
                                "3"));
  ExpectCallsSettleOn({addresses_[2]}, 10, waiting);
  StopBackend(2);
  ExpectCallsSettleOn({addresses_[1]}, 10, waiting);
}

// A62 through load_balancing_policy: pick_first over every endpoint of the
// priority, in order: every call goes to the first;
// when it dies, to the next, and it stays there when the first returns
// (pick_first keeps the connection in use).
TEST_F(ChannelEndToEndTest, APickFirstClusterSendsEveryCallToOneEndpoint) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c", PickFirstCluster("c", "s-c")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s-c", EndpointsAt("s-c", {addresses_[0], addresses_[1], addresses_[2]})}}, "1"));
  CreateChannel("xds:///svc");
  CallOptions waiting;
  waiting.wait_for_ready = true;
  std::map<std::string, int> seen = CountCalls(test_service::kEmptyCall, 20, waiting);
  EXPECT_EQ(seen[addresses_[0]], 20);
  StopBackend(0);
  ExpectCallsSettleOn({addresses_[1]}, 10, waiting);
  RestartBackend(0);
  seen = CountCalls(test_service::kEmptyCall, 20, waiting);
  EXPECT_EQ(seen[addresses_[1]], 20);
}

// A48: LEAST_REQUEST sends calls away from the endpoint that has a call in
// flight (a stream held open), and back to it once that call ends. The
// unary calls below run one at a time, so the other two endpoints have
// none in flight: drawing two of three, a call goes to the busy endpoint
// only when both draws are it (about 33 of 300; round_robin: 100).
TEST_F(ChannelEndToEndTest, ALeastRequestClusterSendsCallsAwayFromABusyEndpoint) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c", LeastRequestCluster("c", "s-c")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s-c", EndpointsAt("s-c", {addresses_[0], addresses_[1], addresses_[2]})}}, "1"));
  CreateChannel("xds:///svc");
  CallOptions waiting;
  waiting.wait_for_ready = true;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(EventuallyAnsweredBy({addresses_[i]}, waiting));
  std::unique_ptr<ClientStream> held =
      RunOnControl<std::unique_ptr<ClientStream>>([&]() -> Task<std::unique_ptr<ClientStream>> {
        auto stream = co_await channel_->StartStream(test_service::kFullDuplexCall, waiting);
        co_return stream.ok() ? *std::move(stream) : nullptr;
      });
  ASSERT_NE(held, nullptr);
  const std::string busy = held->peer();
  std::map<std::string, int> counts = CountCalls(test_service::kEmptyCall, 300, waiting);
  EXPECT_LT(counts[busy], 66) << ::testing::PrintToString(counts);
  EXPECT_EQ(counts[addresses_[0]] + counts[addresses_[1]] + counts[addresses_[2]], 300);
  const Status finished = RunOnControl<Status>([&]() -> Task<Status> {
    (void)co_await held->WritesDone();
    Status status = co_await held->Finish();
    held.reset();
    co_return status;
  });
  EXPECT_TRUE(finished.ok()) << finished.ToString();
  counts = CountCalls(test_service::kEmptyCall, 300, waiting);
  EXPECT_GT(counts[busy], 50) << ::testing::PrintToString(counts);
}

// A37: a LOGICAL_DNS cluster uses pick_first over every address of its
// name, in order: the first refuses connections, calls go to the second.
// When the connection in use closes, the name is resolved again and the
// changed answer is used.
TEST_F(ChannelEndToEndTest, ALogicalDnsClusterTriesEachAddressAndReresolves) {
  struct Answers {
    std::mutex mu;
    std::vector<std::string> addresses;
    int lookups = 0;
  };
  auto answers = std::make_shared<Answers>();
  answers->addresses = {"127.0.0.1:1", addresses_[0]};  // nothing listens on port 1
  resolve_host_ = [answers](const std::string& host,
                            const std::string&) -> StatusOr<std::vector<std::string>> {
    EXPECT_EQ(host, "backend.example.com");
    std::lock_guard lock(answers->mu);
    ++answers->lookups;
    return answers->addresses;
  };
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "dns"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"dns", LogicalDnsCluster("dns", "backend.example.com", 443)}}, "1"));
  CreateChannel("xds:///svc");
  CallOptions waiting;
  waiting.wait_for_ready = true;
  ExpectCallsSettleOn({addresses_[0]}, 10, waiting);
  {
    std::lock_guard lock(answers->mu);
    EXPECT_EQ(answers->lookups, 1);
    answers->addresses = {addresses_[1]};
  }
  StopBackend(0);
  ExpectCallsSettleOn({addresses_[1]}, 10, waiting);
  std::lock_guard lock(answers->mu);
  EXPECT_GE(answers->lookups, 2);
}

// A37: a failing pick of an aggregate cluster carries the note of every
// leaf, not only the first's: here the second leaf's name does not resolve,
// and that is what the caller needs to read.
TEST_F(ChannelEndToEndTest, AnAggregateClustersFailureCarriesEveryLeafsNote) {
  resolve_host_ = [](const std::string& host,
                     const std::string&) -> StatusOr<std::vector<std::string>> {
    return Status(StatusCode::kUnavailable, "no address for " + host);
  };
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "agg"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType,
                                {{"agg", AggregateCluster("agg", {"eds", "dns"})},
                                 {"eds", ValidCluster("eds", "s-eds")},
                                 {"dns", LogicalDnsCluster("dns", "backend.example.com", 443)}},
                                "1"));
  // Nothing listens on port 1: the EDS leaf's only priority fails.
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-eds", EndpointsAt("s-eds", {"127.0.0.1:1"})}}, "1"));
  CreateChannel("xds:///svc");
  Status failed;
  const auto give_up = std::chrono::steady_clock::now() + seconds(30);
  while (std::chrono::steady_clock::now() < give_up) {
    StatusOr<UnaryResponse> reply = Call(test_service::kEmptyCall);
    ASSERT_FALSE(reply.ok()) << "answered by " << reply->peer;
    failed = reply.status();
    if (failed.message().find("backend.example.com") != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(failed.code(), StatusCode::kUnavailable);
  EXPECT_NE(failed.message().find("DNS resolution failed for backend.example.com:443"),
            std::string::npos)
      << failed.ToString();
}

// A88: the control plane going away leaves the cached resources in use:
// calls keep working, and a new channel for the same target resolves from
// the cache.
TEST_F(ChannelEndToEndTest, CallsKeepWorkingWhileTheControlPlaneIsDown) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c0"}})}}, "1"));
  ServeClustersOnBackends(1);
  CreateChannel("xds:///svc");
  ASSERT_TRUE(EventuallyAnsweredBy({addresses_[0]}));
  const std::optional<int64_t> stream =
      cp_->OpenStreams().empty() ? std::nullopt : std::optional(cp_->OpenStreams().back());
  ASSERT_TRUE(stream.has_value());

  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(cp_->DropAllConnections());
  ASSERT_TRUE(cp_->WaitForStreamClosed(seconds(30), stream).has_value());
  std::map<std::string, int> counts = CountCalls(test_service::kEmptyCall, 50);
  EXPECT_EQ(counts[addresses_[0]], 50) << ::testing::PrintToString(counts);

  // A second channel shares the XdsClient (same target) and its cache.
  std::unique_ptr<Channel> first = std::move(channel_);
  CreateChannel("xds:///svc");
  std::map<std::string, int> second = CountCalls(test_service::kEmptyCall, 10);
  EXPECT_EQ(second[addresses_[0]], 10) << ::testing::PrintToString(second);
  RunOnControl<bool>([&]() -> Task<bool> {
    co_await first->Shutdown();
    co_return true;
  });
  control_->RunSync([&] { first.reset(); });
}

// gRPC transparent retry: a backend that stops gracefully sends GOAWAY;
// calls picked for its connection in the meantime, and streams it refuses,
// never reached its application and are re-picked onto the other backend.
// Not one call of a steady load fails.
TEST_F(ChannelEndToEndTest, GracefulStopOfOneBackendUnderLoadFailsNoCall) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c", ValidCluster("c", "s-c")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s-c", EndpointsAt("s-c", {addresses_[0], addresses_[1]})}}, "1"));
  CreateChannel("xds:///svc");
  CallOptions waiting;
  waiting.wait_for_ready = true;
  ASSERT_TRUE(EventuallyAnsweredBy({addresses_[0]}, waiting));
  ASSERT_TRUE(EventuallyAnsweredBy({addresses_[1]}, waiting));

  for (int round = 0; round < 3; ++round) {
    CallLoad load(*control_, *channel_, 16);
    ASSERT_TRUE(load.WaitForMoreCalls(500));
    StopBackend(0, seconds(5));
    ASSERT_TRUE(load.WaitForMoreCalls(500));
    RestartBackend(0);
    std::map<std::string, int> failures = load.Stop();
    EXPECT_TRUE(failures.empty()) << "round " << round << ": "
                                  << ::testing::PrintToString(failures);
    ASSERT_TRUE(EventuallyAnsweredBy({addresses_[0]}, waiting));
  }
}

// A host:port channel whose one backend stops gracefully (GOAWAY) and
// comes back, under a load of calls that do not wait for ready: the
// subchannel replaces the connection that got GOAWAY, reconnects (with
// backoff while the backend is down), and calls reach the backend again.
// Calls while it is down fail fast, and each lets the loop turn.
TEST_F(ChannelEndToEndTest, SingleBackendThatRestartsIsReachedAgain) {
  CreateChannel(addresses_[0]);
  CallOptions waiting;
  waiting.wait_for_ready = true;
  ASSERT_TRUE(EventuallyAnsweredBy({addresses_[0]}, waiting));
  CallLoad load(*control_, *channel_, 16);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(load.WaitForMoreSuccesses(200)) << "round " << round;
    StopBackend(0, seconds(1));
    RestartBackend(0);
    ASSERT_TRUE(load.WaitForMoreSuccesses(200)) << "round " << round << " after the restart";
  }
  load.Stop();
}

// Request metadata over what the server accepts (its
// SETTINGS_MAX_HEADER_LIST_SIZE) fails RESOURCE_EXHAUSTED naming the limit,
// not UNAVAILABLE "The length of the frame is invalid": against our server
// (16 KiB) and a gRPC C++ 1.51 server (8 KiB; skipped in builds without the
// C++ peers).
TEST_F(ChannelEndToEndTest, OversizeRequestMetadataIsResourceExhausted) {
  std::vector<std::string> targets = {addresses_[0]};
  std::optional<Subprocess> peer;
  const std::string binary = BuildRoot() + "/tests/peers/grpc_cpp_test_server";
  if (access(binary.c_str(), X_OK) == 0) {
    peer.emplace(Subprocess::Start({binary}));
    std::optional<std::string> port = peer->WaitForLine("PORT ", seconds(60));
    ASSERT_TRUE(port.has_value()) << "gRPC C++ server did not start";
    targets.push_back("127.0.0.1:" + *port);
  }
  for (const std::string& target : targets) {
    CreateChannel(target);
    CallOptions options = WithHeader("x-big", std::string(130 * 1024, 'm'));
    options.wait_for_ready = true;
    StatusOr<UnaryResponse> reply = Call(test_service::kEmptyCall, options);
    EXPECT_EQ(reply.status().code(), StatusCode::kResourceExhausted)
        << target << ": " << reply.status().ToString();
    EXPECT_NE(reply.status().message().find("SETTINGS_MAX_HEADER_LIST_SIZE"), std::string::npos)
        << target << ": " << reply.status().ToString();
    // The channel and its connection go on serving.
    StatusOr<UnaryResponse> small = Call(test_service::kEmptyCall);
    EXPECT_TRUE(small.ok()) << target << ": " << small.status().ToString();
    RunOnControl<bool>([&]() -> Task<bool> {
      co_await channel_->Shutdown();
      co_return true;
    });
    control_->RunSync([&] { channel_.reset(); });
  }
}

}  // namespace
}  // namespace uxds::testing
