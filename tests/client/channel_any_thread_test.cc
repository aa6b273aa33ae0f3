// Channel::UnaryCallAsync / StartStreamAsync: calls from threads that run
// no uxds loop (a plain std::thread pool). Each call runs on the channel's
// loop and its `done` runs there, exactly once, whatever happens: a reply,
// a Shutdown() with calls waiting, or a call that arrives after it.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "channel_fixture.h"
#include "test_service/test_service.h"
#include "uxds/client_channel.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

class ChannelAnyThreadTest : public ChannelFixture {
 protected:
  std::thread::id ControlThread() {
    std::thread::id id;
    control_->RunSync([&] { id = std::this_thread::get_id(); });
    return id;
  }
  // Shutdown() on the control loop; returns once it has.
  void ShutdownChannel() {
    RunOnControl<bool>([this]() -> Task<bool> {
      co_await channel_->Shutdown();
      co_return true;
    });
  }
};

TEST_F(ChannelAnyThreadTest, AThreadPoolCallsThroughTheChannelsLoop) {
  CreateChannel(addresses_[0]);
  const std::thread::id control = ControlThread();
  constexpr int kThreads = 4;
  constexpr int kCallsPerThread = 50;
  std::atomic<int> ok{0};
  std::atomic<int> off_loop{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < kCallsPerThread; ++i) {
        std::promise<StatusOr<UnaryResponse>> reply;
        CallOptions options;
        options.timeout = std::chrono::seconds(10);
        options.wait_for_ready = true;
        channel_->UnaryCallAsync(test_service::kEmptyCall, "", options,
                                 [&](StatusOr<UnaryResponse> r) {
                                   if (std::this_thread::get_id() != control) ++off_loop;
                                   reply.set_value(std::move(r));
                                 });
        StatusOr<UnaryResponse> r = reply.get_future().get();
        if (r.ok() && r->peer == addresses_[0]) ++ok;
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  EXPECT_EQ(ok.load(), kThreads * kCallsPerThread);
  EXPECT_EQ(off_loop.load(), 0);
}

TEST_F(ChannelAnyThreadTest, AStreamStartedFromAnotherThreadIsUsedOnTheLoop) {
  CreateChannel(addresses_[0]);
  std::promise<StatusOr<std::unique_ptr<ClientStream>>> started;
  CallOptions options;
  options.timeout = std::chrono::seconds(10);
  options.wait_for_ready = true;
  std::thread caller([&] {
    channel_->StartStreamAsync(test_service::kFullDuplexCall, options,
                               [&](StatusOr<std::unique_ptr<ClientStream>> stream) {
                                 started.set_value(std::move(stream));
                               });
  });
  caller.join();
  StatusOr<std::unique_ptr<ClientStream>> stream = started.get_future().get();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ((*stream)->peer(), addresses_[0]);
  const Status finished = RunOnControl<Status>([&]() -> Task<Status> {
    Status wrote = co_await (*stream)->WritesDone();
    if (!wrote.ok()) co_return wrote;
    while (co_await (*stream)->Read()) {
    }
    co_return co_await (*stream)->Finish();
  });
  EXPECT_TRUE(finished.ok()) << finished.ToString();
  control_->RunSync([&] { stream->reset(); });
}

// Calls that wait for an endpoint that never comes (a name that does not
// resolve, wait_for_ready) when Shutdown() starts each get their `done`
// once, not OK; one made after Shutdown() gets UNAVAILABLE; and once the
// channel is destroyed, a closure still queued for it touches nothing.
TEST_F(ChannelAnyThreadTest, EveryDoneRunsOnceAcrossShutdown) {
  CreateChannel("name.invalid:443");  // RFC 6761: never resolves
  constexpr int kCalls = 16;
  std::mutex mutex;
  std::vector<Status> results;
  std::atomic<int> done_calls{0};
  auto record = [&](Status status) {
    std::lock_guard<std::mutex> lock(mutex);
    results.push_back(std::move(status));
    ++done_calls;
  };
  std::vector<std::thread> callers;
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&] {
      CallOptions options;
      options.timeout = std::chrono::seconds(60);
      options.wait_for_ready = true;
      channel_->UnaryCallAsync(test_service::kEmptyCall, "", options,
                               [&](StatusOr<UnaryResponse> r) { record(r.status()); });
    });
  }
  for (std::thread& thread : callers) thread.join();
  // Every call has reached the loop and waits (a round trip through the
  // loop's queue comes after every closure posted before it).
  control_->RunSync([] {});
  EXPECT_EQ(done_calls.load(), 0);
  ShutdownChannel();
  EXPECT_EQ(done_calls.load(), kCalls);
  for (const Status& status : results) {
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::kCancelled) << status.ToString();
  }
  // After Shutdown(): UNAVAILABLE, at once.
  std::promise<Status> late;
  channel_->UnaryCallAsync(test_service::kEmptyCall, "", {},
                           [&](StatusOr<UnaryResponse> r) { late.set_value(r.status()); });
  const Status late_status = late.get_future().get();
  EXPECT_EQ(late_status.code(), StatusCode::kUnavailable) << late_status.ToString();
  std::promise<Status> late_stream;
  channel_->StartStreamAsync(
      test_service::kFullDuplexCall, {},
      [&](StatusOr<std::unique_ptr<ClientStream>> s) { late_stream.set_value(s.status()); });
  const Status late_stream_status = late_stream.get_future().get();
  EXPECT_EQ(late_stream_status.code(), StatusCode::kUnavailable) << late_stream_status.ToString();
  // A call posted just before the channel goes: its closure runs after the
  // destruction, finds the gate closed, and still answers.
  std::promise<Status> after_destroy;
  control_->RunSync([&] {
    channel_->UnaryCallAsync(test_service::kEmptyCall, "", {}, [&](StatusOr<UnaryResponse> r) {
      after_destroy.set_value(r.status());
    });
    channel_.reset();
  });
  const Status after_destroy_status = after_destroy.get_future().get();
  EXPECT_EQ(after_destroy_status.code(), StatusCode::kUnavailable)
      << after_destroy_status.ToString();
  EXPECT_EQ(done_calls.load(), kCalls);
}

}  // namespace
}  // namespace uxds::testing
