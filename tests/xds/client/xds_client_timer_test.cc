// Resource timers (A57, A88) with shortened durations: a timer starts once
// the request naming the resource has been written on a connected stream,
// never for a cached resource, stops when the stream ends, and starts afresh
// with its full duration on the next stream.
//
// Waits that check a timer did NOT fire are several times the timer's
// duration; they can only pass wrongly on a slow machine, never fail wrongly.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class XdsClientTimerTest : public XdsClientTest {
 protected:
  void StartWithTimer(milliseconds timer) {
    XdsClientOptions options = TestOptions();
    options.resource_does_not_exist_timeout = timer;
    options.resource_transient_error_timeout = timer;
    StartClient(BootstrapFeatures{}, options);
  }
};

// A57: while no stream is connected, no timer runs: only the transient
// error reaches the watcher, however long it takes.
TEST_F(XdsClientTimerTest, NoTimerRunsWhileTheServerCannotBeReached) {
  ASSERT_TRUE(cp_->StopListening());
  StartWithTimer(milliseconds(200));
  auto watcher = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kUnavailable, "connection failed"));
  std::this_thread::sleep_for(milliseconds(1200));
  Flush();
  for (const auto& event : watcher->TakePending()) {
    EXPECT_EQ(event.status.code(), StatusCode::kUnavailable) << event.ToString();
  }
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kRequested);
  // Once the subscription is sent on a connected stream, the timer runs.
  ASSERT_TRUE(cp_->RestartListening());
  WaitForRequest(kClusterTypeUrl, {"c1"});
  for (;;) {
    auto event = watcher->Next();
    ASSERT_TRUE(event.has_value());
    if (event->status.code() == StatusCode::kNotFound) break;
    EXPECT_EQ(event->status.code(), StatusCode::kUnavailable) << event->ToString();
  }
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kDoesNotExist);
}

// A57: "the client should start the timeout period again when it sends the
// initial subscription for the resource on the reestablished ADS stream".
TEST_F(XdsClientTimerTest, TimerStopsWithTheStreamAndRestartsWithItsFullDuration) {
  const milliseconds timer(1500);
  StartWithTimer(timer);
  auto watcher = Watch(TestClusterType::Get(), "c1");
  auto first = WaitForRequest(kClusterTypeUrl, {"c1"});
  ASSERT_TRUE(first.has_value());
  // Two thirds of the timer pass on the first stream, which then fails.
  std::this_thread::sleep_for(milliseconds(1000));
  ASSERT_TRUE(cp_->CloseStream(14, "restart"));
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kUnavailable, "no responses received"));
  auto second = cp_->NextRequestMatching(
      kWait, [&](const ObservedRequest& r) { return r.stream != first->stream; });
  ASSERT_TRUE(second.has_value());
  const auto second_sent = Clock::now();
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kNotFound, "does not exist"));
  // Had the first stream's timer kept running it would have fired ~0.5 s
  // after the second request; a fresh one fires 1.5 s after it (the request
  // is written a little before the control plane reports it).
  EXPECT_GE(Clock::now() - second_sent, timer - milliseconds(300));
}

// A57: no timer for a resource already cached when a new stream starts.
TEST_F(XdsClientTimerTest, NoTimerForACachedResourceOnANewStream) {
  StartWithTimer(milliseconds(200));
  auto watcher = WatchAndReceiveCluster("c1");
  ASSERT_TRUE(cp_->CloseStream(0, "rebalance"));
  WaitForRequest(kClusterTypeUrl, {"c1"});  // never answered on this stream
  std::this_thread::sleep_for(milliseconds(1000));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
}

// A88 / NOTES: the timer stops when the resource, an invalid version of it,
// or a TP3 error for it arrives.
TEST_F(XdsClientTimerTest, AnythingReceivedForTheResourceStopsItsTimer) {
  StartWithTimer(milliseconds(400));
  auto valid = Watch(TestClusterType::Get(), "valid");
  auto invalid = Watch(TestClusterType::Get(), "invalid");
  auto error = Watch(TestClusterType::Get(), "error");
  WaitForRequest(kClusterTypeUrl, {"valid", "invalid", "error"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("valid"), ClusterAny("invalid", -1)},
          {{"error", static_cast<int>(StatusCode::kUnavailable), "try later"}});
  EXPECT_TRUE(NextIsCluster(*valid, "valid"));
  EXPECT_TRUE(NextIsError(*invalid, StatusCode::kInvalidArgument, "invalid resource"));
  EXPECT_TRUE(NextIsError(*error, StatusCode::kUnavailable, "try later"));
  std::this_thread::sleep_for(milliseconds(1500));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*valid));
  EXPECT_TRUE(NoMoreEvents(*invalid));
  EXPECT_TRUE(NoMoreEvents(*error));
  EXPECT_EQ(Entry(kClusterTypeUrl, "valid").state, XdsCacheState::kAcked);
  EXPECT_EQ(Entry(kClusterTypeUrl, "invalid").state, XdsCacheState::kNacked);
  EXPECT_EQ(Entry(kClusterTypeUrl, "error").state, XdsCacheState::kReceivedError);
}

// A resource subscribed later on a running stream gets its own timer; once
// it fired, a new stream does not fire it again.
TEST_F(XdsClientTimerTest, ALaterSubscriptionGetsItsOwnTimer) {
  StartWithTimer(milliseconds(300));
  auto c1 = WatchAndReceiveCluster("c1");
  auto c2 = Watch(TestClusterType::Get(), "c2");
  WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  EXPECT_TRUE(NextIsError(*c2, StatusCode::kNotFound, "does not exist"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c2").state, XdsCacheState::kDoesNotExist);
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
  ASSERT_TRUE(cp_->CloseStream(0, "rebalance"));
  WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  std::this_thread::sleep_for(milliseconds(1000));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*c1));
  EXPECT_TRUE(NoMoreEvents(*c2));
  // The resource may still appear.
  Respond(kClusterTypeUrl, "2", {ClusterAny("c1"), ClusterAny("c2")});
  EXPECT_TRUE(NextIsCluster(*c2, "c2"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c2").state, XdsCacheState::kAcked);
}

}  // namespace
}  // namespace uxds::testing
