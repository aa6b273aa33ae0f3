// A37 xds_cluster_impl per leaf, end to end on loopback: an aggregate
// cluster's priorities each keep the drops (A27 drop_overloads), the
// circuit breaker (A32 max_requests, one counter per cluster) and the load
// report (A42) of the leaf cluster they come from.
#include <thread>

#include "client/load_reporting_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

class AggregateLeafTest : public LoadReportingTest {
 protected:
  void SetUpRoutes(const std::vector<TestRoute>& routes) {
    ASSERT_TRUE(
        cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", routes)}}, "1"));
  }

  // Starts a FullDuplexCall that stays in flight (nothing is written, the
  // server waits) until the stream is destroyed on the control loop.
  StatusOr<std::unique_ptr<ClientStream>> OpenStream() { return OpenStreamOn(*channel_); }
  StatusOr<std::unique_ptr<ClientStream>> OpenStreamOn(Channel& channel) {
    std::promise<StatusOr<std::unique_ptr<ClientStream>>> result;
    control_->RunSync([&] {
      auto open = [](Channel* channel,
                     std::promise<StatusOr<std::unique_ptr<ClientStream>>>* out) -> Task<void> {
        CallOptions options;
        options.timeout = std::chrono::seconds(60);
        options.wait_for_ready = true;
        out->set_value(co_await channel->StartStream(test_service::kFullDuplexCall, options));
      };
      control_->loop().Spawn(open(&channel, &result));
    });
    return result.get_future().get();
  }

  void CloseStream(std::unique_ptr<ClientStream>& stream) {
    control_->RunSync([&] { stream.reset(); });
  }
};

bool IsDrop(const Status& status, const std::string& text) {
  return status.code() == StatusCode::kUnavailable &&
         status.message().find(text) != std::string::npos;
}

// A37: leaf a drops every call (drop_overloads 100% of "a-throttle"), leaf
// b drops none. While a's priority is picked from, the aggregate's calls are
// dropped with a's category; after failover to b they succeed. The drops
// are reported in cluster a's load report, none in b's.
TEST_F(AggregateLeafTest, EachLeafDropsWithItsOwnDropOverloads) {
  SetUpRoutes({{"", "agg"}});
  ServeAggregateOf(ReportingCluster("a", "s-a"), ReportingCluster("b", "s-b"));
  ServeLeafEndpoints(EndpointsByZone("s-a", {addresses_[0]}, "a-throttle"),
                     EndpointsByZone("s-b", {addresses_[1]}), "1");
  CreateChannel();
  const int64_t stream = AcceptLrsStream();
  constexpr int kDroppedCalls = 5;
  for (int i = 0; i < kDroppedCalls; ++i) {
    StatusOr<UnaryResponse> reply = Call();
    ASSERT_FALSE(reply.ok()) << "leaf a's drop_overloads did not apply; answered by "
                             << reply->peer;
    ASSERT_TRUE(IsDrop(reply.status(), "EDS-configured drop: a-throttle"))
        << reply.status().ToString();
  }

  // Leaf a's only endpoint is now a port nobody listens on: its priority
  // fails and the aggregate's calls go to leaf b, which drops nothing.
  ServeLeafEndpoints(EndpointsByZone("s-a", {"127.0.0.1:1"}, "a-throttle"),
                     EndpointsByZone("s-b", {addresses_[1]}), "2");
  // Calls made before the failover are still dropped by a.
  uint64_t drops_by_a = kDroppedCalls;
  constexpr int kCallsToB = 4;
  int calls_to_b = 0;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (calls_to_b < kCallsToB) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no failover to leaf b";
    StatusOr<UnaryResponse> reply = Call();
    if (reply.ok()) {
      ASSERT_EQ(reply->peer, addresses_[1]);
      ++calls_to_b;
      continue;
    }
    ASSERT_EQ(calls_to_b, 0) << "a call after the failover failed: " << reply.status().ToString();
    ASSERT_TRUE(IsDrop(reply.status(), "EDS-configured drop: a-throttle"))
        << reply.status().ToString();
    ++drops_by_a;
    // Give the failover time without spinning (the loop is bounded by
    // `deadline`, not by this pause).
    std::this_thread::sleep_for(milliseconds(20));
  }
  ReadReportsUntil(stream, [&] {
    return dropped_by_cluster_["a"]["a-throttle"] == drops_by_a &&
           by_cluster_["b"]["z0"].succeeded == static_cast<uint64_t>(calls_to_b);
  });
  EXPECT_EQ(total_dropped_by_cluster_["a"], drops_by_a);
  EXPECT_EQ(total_dropped_by_cluster_["b"], 0u);
  EXPECT_TRUE(dropped_by_cluster_["b"].empty());
  EXPECT_EQ(by_cluster_["a"]["z0"].issued, 0u) << "dropped calls must not count as issued";
  EXPECT_EQ(reported_clusters_.count("agg"), 0u);
}

// A32/A37: leaf a allows one call in flight, leaf b one of its own. A stream
// through the aggregate holds a's one call: a second call through the
// aggregate, and a call routed to a directly (the counter is a's, whoever
// uses a), get the circuit-breaker drop, reported in a's load report;
// b's limit is untouched. Once the stream ends, a takes calls again.
TEST_F(AggregateLeafTest, EachLeafHasItsOwnCircuitBreaker) {
  // Streams go through the aggregate (leaf a first); unary calls to leaf a
  // alone, empty calls to leaf b alone.
  SetUpRoutes({{test_service::kFullDuplexCall, "agg"},
               {test_service::kUnaryCall, "a"},
               {test_service::kEmptyCall, "b"}});
  ServeAggregateOf(ReportingCluster("a", "s-a", 1), ReportingCluster("b", "s-b", 1));
  ServeLeafEndpoints(EndpointsByZone("s-a", {addresses_[0]}),
                     EndpointsByZone("s-b", {addresses_[1]}), "1");
  CreateChannel();
  const int64_t lrs = AcceptLrsStream();
  StatusOr<std::unique_ptr<ClientStream>> held = OpenStream();
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ((*held)->peer(), addresses_[0]);

  StatusOr<std::unique_ptr<ClientStream>> second = OpenStream();
  ASSERT_FALSE(second.ok()) << "a second call through the aggregate passed leaf a's max_requests 1";
  EXPECT_TRUE(IsDrop(second.status(), "circuit breaker drop")) << second.status().ToString();
  StatusOr<UnaryResponse> direct = Call();
  ASSERT_FALSE(direct.ok()) << "leaf a's counter is not shared with the aggregate";
  EXPECT_TRUE(IsDrop(direct.status(), "circuit breaker drop")) << direct.status().ToString();

  // Leaf b has its own limit: nothing is in flight on it.
  StatusOr<UnaryResponse> on_b = Call(0, test_service::kEmptyCall);
  ASSERT_TRUE(on_b.ok()) << on_b.status().ToString();
  EXPECT_EQ(on_b->peer, addresses_[1]);

  CloseStream(*held);
  // The stream's end is counted on the control loop; calls to a are taken
  // again from then on.
  bool a_again = false;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!a_again) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "leaf a's stream never ended";
    StatusOr<UnaryResponse> reply = Call();
    a_again = reply.ok();
    if (!a_again) std::this_thread::sleep_for(milliseconds(20));
  }
  ReadReportsUntil(lrs, [&] { return total_dropped_by_cluster_["a"] >= 2; });
  EXPECT_EQ(total_dropped_by_cluster_["b"], 0u);
  // Circuit-breaker drops carry no category (as in gRPC).
  EXPECT_TRUE(dropped_by_cluster_["a"].empty());
}

// A37: the circuit-breaking counter of a cluster is shared across the
// channels of one XdsClient: a stream through one channel's aggregate holds
// leaf a's one call, and another channel's call to a is dropped.
TEST_F(AggregateLeafTest, ALeafsCircuitBreakerIsSharedAcrossChannels) {
  SetUpRoutes({{test_service::kFullDuplexCall, "agg"}, {"", "a"}});
  ServeAggregateOf(ReportingCluster("a", "s-a", 1), ReportingCluster("b", "s-b", 1));
  ServeLeafEndpoints(EndpointsByZone("s-a", {addresses_[0]}),
                     EndpointsByZone("s-b", {addresses_[1]}), "1");
  CreateChannel();
  second_channel_ = MakeChannel();
  AcceptLrsStream();
  StatusOr<std::unique_ptr<ClientStream>> held = OpenStream();
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ((*held)->peer(), addresses_[0]);
  StatusOr<UnaryResponse> other = CallOn(*second_channel_);
  ASSERT_FALSE(other.ok()) << "the second channel does not share leaf a's counter";
  EXPECT_TRUE(IsDrop(other.status(), "circuit breaker drop")) << other.status().ToString();
  CloseStream(*held);
}

}  // namespace
}  // namespace uxds::testing
