// Load reporting (LRS, A27/A42) end to end on loopback: what one channel
// reports, per locality and per drop category, and when its stream runs.
#include "client/load_reporting_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

// A42: calls count in the locality of the endpoint they were picked to;
// failed calls (status != OK) count as errors; the reports add up to
// exactly the calls made, with none left in progress.
TEST_F(LoadReportingTest, ReportsCallsPerLocality) {
  SetUpService("c");
  const int64_t stream = AcceptLrsStream();
  std::map<std::string, LocalityTotals> expected;  // by zone
  constexpr int kCalls = 30;
  for (int i = 0; i < kCalls; ++i) {
    const bool fail = i % 3 == 0;
    StatusOr<UnaryResponse> reply = Call(fail ? 13 : 0);
    std::string peer;
    if (fail) {
      ASSERT_FALSE(reply.ok());
      ASSERT_EQ(reply.status().code(), StatusCode::kInternal) << reply.status().ToString();
    } else {
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      peer = reply->peer;
    }
    if (fail) {
      // The failing backend is not named in the status: count failures per
      // cluster below, successes per zone here.
      expected["failed"].failed++;
      continue;
    }
    for (size_t b = 0; b < addresses_.size(); ++b) {
      if (addresses_[b] == peer) expected["z" + std::to_string(b)].succeeded++;
    }
  }
  ReadReportsUntil(stream, [&] {
    uint64_t issued = 0;
    uint64_t finished = 0;
    for (const auto& [zone, t] : localities_) {
      issued += t.issued;
      finished += t.succeeded + t.failed;
    }
    return issued == kCalls && finished == kCalls;
  });
  uint64_t failed = 0;
  for (const auto& [zone, t] : localities_) {
    EXPECT_EQ(t.succeeded, expected[zone].succeeded) << zone;
    EXPECT_EQ(t.in_progress, 0u) << zone;
    failed += t.failed;
  }
  EXPECT_EQ(failed, expected["failed"].failed);
  EXPECT_EQ(total_dropped_, 0u);
}

// A27: drop_overloads drops are reported per category and in the total.
TEST_F(LoadReportingTest, ReportsDropsPerCategory) {
  SetUpService("c", "throttle");
  const int64_t stream = AcceptLrsStream();
  constexpr int kCalls = 12;
  for (int i = 0; i < kCalls; ++i) {
    StatusOr<UnaryResponse> reply = Call();
    ASSERT_FALSE(reply.ok());
    ASSERT_EQ(reply.status().code(), StatusCode::kUnavailable);
    ASSERT_NE(reply.status().message().find("EDS-configured drop: throttle"), std::string::npos)
        << reply.status().ToString();
  }
  ReadReportsUntil(stream, [&] { return total_dropped_ >= kCalls; });
  EXPECT_EQ(total_dropped_, static_cast<uint64_t>(kCalls));
  EXPECT_EQ(dropped_["throttle"], static_cast<uint64_t>(kCalls));
  for (const auto& [zone, t] : localities_) EXPECT_EQ(t.issued, 0u) << zone;
}

// A server that names clusters gets reports of those alone.
TEST_F(LoadReportingTest, ReportsOnlyTheClustersTheServerAsksFor) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType,
      {{"svc", ApiListenerWithRoutes(
                   "svc", "*", {{"/grpc.testing.TestService/UnaryCall", "asked"}, {"", "other"}})}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType,
                                {{"asked", ReportingCluster("asked", "s-asked")},
                                 {"other", ReportingCluster("other", "s-other")}},
                                "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-asked", EndpointsByZone("s-asked", {addresses_[0]})},
                                 {"s-other", EndpointsByZone("s-other", {addresses_[1]})}},
                                "1"));
  CreateChannel();
  const int64_t stream = AcceptLrsStream({"asked"});
  constexpr int kCalls = 5;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(Call().ok());
    ASSERT_TRUE(Call(0, test_service::kEmptyCall).ok());
  }
  ReadReportsUntil(stream, [&] { return localities_["z0"].succeeded == kCalls; });
  EXPECT_EQ(reported_clusters_, std::set<std::string>{"asked"});
}

// A failed LRS stream is opened again (with backoff); when the routes stop
// naming the reporting cluster the stream ends, and it opens again when the
// cluster comes back.
TEST_F(LoadReportingTest, StreamFollowsTheClustersThatReport) {
  SetUpService("c");
  const int64_t first = AcceptLrsStream();
  ASSERT_TRUE(cp_->CloseLrsStream(14, "LRS server restarting", first));
  const int64_t second = AcceptLrsStream();
  ASSERT_NE(second, first);
  ASSERT_TRUE(Call().ok());
  ReadReportsUntil(second,
                   [&] { return localities_["z0"].issued + localities_["z1"].issued == 1; });

  // The routes now name a cluster without lrs_server: the last report goes
  // out and the stream closes.
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c", ReportingCluster("c", "s-c")}, {"plain", ValidCluster("plain", "s-c")}},
      "2"));
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "plain"}})}}, "2"));
  ASSERT_TRUE(cp_->WaitForLrsStreamClosed(kWait, second).has_value());
  ASSERT_TRUE(Call().ok());

  // Back to the reporting cluster: a new stream.
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c"}})}}, "3"));
  const int64_t third = AcceptLrsStream();
  EXPECT_NE(third, second);
}

// A37: an aggregate cluster's leaves report their own load: calls to the
// priority of leaf "a" count in cluster "a" (service "s-a"), and once "a"
// fails over to "b", calls count in "b". The aggregate cluster itself
// reports nothing.
TEST_F(LoadReportingTest, AggregateClusterLeavesReportTheirOwnLoad) {
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "agg"}})}}, "1"));
  ServeAggregateOf(ReportingCluster("a", "s-a"), ReportingCluster("b", "s-b"));
  ServeLeafEndpoints(EndpointsByZone("s-a", {addresses_[0]}),
                     EndpointsByZone("s-b", {addresses_[1]}), "1");
  CreateChannel();
  const int64_t stream = AcceptLrsStream();
  constexpr int kCallsToA = 4;
  for (int i = 0; i < kCallsToA; ++i) {
    StatusOr<UnaryResponse> reply = Call();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_EQ(reply->peer, addresses_[0]);
  }
  ReadReportsUntil(stream, [&] { return by_cluster_["a"]["z0"].succeeded == kCallsToA; });

  // Leaf a's only endpoint is now a port nobody listens on: priority 0
  // fails and the aggregate's calls go to leaf b.
  ServeLeafEndpoints(EndpointsByZone("s-a", {"127.0.0.1:1"}),
                     EndpointsByZone("s-b", {addresses_[1]}), "2");
  // Calls made before the update reaches the channel still go to a.
  constexpr int kCallsToB = 3;
  uint64_t calls_to_a = kCallsToA;
  uint64_t calls_to_b = 0;
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (calls_to_b < kCallsToB) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no failover to leaf b";
    StatusOr<UnaryResponse> reply = Call();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ++(reply->peer == addresses_[1] ? calls_to_b : calls_to_a);
  }
  ReadReportsUntil(stream, [&] {
    return by_cluster_["b"]["z0"].succeeded == calls_to_b &&
           by_cluster_["a"]["z0"].succeeded == calls_to_a;
  });
  EXPECT_EQ(by_cluster_["a"]["z0"].issued, calls_to_a);
  EXPECT_EQ(by_cluster_["b"]["z0"].issued, calls_to_b);
  EXPECT_EQ(reported_clusters_, (std::set<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace uxds::testing
