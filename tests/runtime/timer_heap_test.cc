// The loop's timers (one user-space heap, one kernel wait) and a ring under
// pressure (more completions at once than the completion queue holds).
#include <gtest/gtest.h>
#include <liburing.h>

#include <random>
#include <vector>

#include "runtime/io_awaiter.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Loop> MakeLoop(unsigned queue_entries = 256) {
  LoopOptions options;
  options.queue_entries = queue_entries;
  auto loop = Loop::Create(options);
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return std::move(*loop);
}

// 100 000 timers armed in one turn, half of them cancelled in the next: each
// costs a heap entry, not a kernel request (with a kernel timeout per timer,
// the 200 000 requests and their completions would overflow the 512-entry
// completion queue many times over). The rest fire, each once, never
// before its deadline.
TEST(TimerHeapTest, AHundredThousandTimersAreArmedCancelledAndFired) {
  auto loop = MakeLoop();
  constexpr int kTimers = 100'000;
  std::vector<std::unique_ptr<Timer>> timers;
  std::vector<int> fired;
  std::mt19937 random(7);
  std::vector<int> delay_ms(kTimers);
  std::vector<Loop::Clock::time_point> armed_at(kTimers);
  std::vector<Loop::Clock::time_point> fired_at(kTimers);
  loop->BlockOn([&]() -> Task<void> {
    for (int i = 0; i < kTimers; ++i) {
      // Far enough out that none expires while the others are armed, even
      // in a sanitizer build on a loaded machine (arming 100 000 took
      // 300+ ms there).
      delay_ms[i] = 2000 + static_cast<int>(random() % 50);
      timers.push_back(std::make_unique<Timer>(*loop));
      armed_at[i] = Loop::Clock::now();
      timers.back()->Start(std::chrono::milliseconds(delay_ms[i]), [&fired, &fired_at, i] {
        fired.push_back(i);
        fired_at[i] = Loop::Clock::now();
      });
    }
    EXPECT_EQ(loop->armed_timers(), static_cast<size_t>(kTimers));
    (void)co_await SleepFor(*loop, 0ms);
    for (int i = 0; i < kTimers; i += 2) timers[i]->Cancel();
    EXPECT_EQ(loop->armed_timers(), static_cast<size_t>(kTimers / 2));
    (void)co_await SleepFor(*loop, 2100ms);
  }());
  ASSERT_EQ(fired.size(), static_cast<size_t>(kTimers / 2));
  for (const int i : fired) {
    EXPECT_EQ(i % 2, 1);
    // Never early.
    EXPECT_GE(fired_at[i], armed_at[i] + std::chrono::milliseconds(delay_ms[i])) << i;
  }
  EXPECT_EQ(loop->armed_timers(), 0u);
}

// Equal deadlines fire in arming order; a restarted timer takes its new
// place; a cancelled sleep returns CANCELLED and leaves nothing armed.
TEST(TimerHeapTest, TiesKeepArmingOrderAndCancelledSleepsDisarm) {
  auto loop = MakeLoop();
  std::vector<int> order;
  Timer a(*loop), b(*loop), c(*loop);
  Status cancelled_sleep;
  loop->BlockOn([&]() -> Task<void> {
    a.Start(5ms, [&] { order.push_back(1); });
    b.Start(5ms, [&] { order.push_back(2); });
    c.Start(1ms, [&] { order.push_back(3); });
    c.Start(5ms, [&] { order.push_back(3); });  // now after b
    TaskGroup group(*loop);
    group.Spawn([](Loop& loop, Status& out) -> Task<void> {
      out = co_await SleepFor(loop, std::chrono::hours(1));
    }(*loop, cancelled_sleep));
    (void)co_await SleepFor(*loop, 20ms);
    EXPECT_EQ(loop->armed_timers(), 1u);  // the hour-long sleep
    co_await group.CancelAndJoin();
  }());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(cancelled_sleep.code(), StatusCode::kCancelled);
  EXPECT_EQ(loop->armed_timers(), 0u);
}

Task<void> Nop(Loop& loop, int& done) {
  const int result =
      co_await detail::SubmitIo(loop, [](io_uring_sqe* sqe) { io_uring_prep_nop(sqe); });
  if (result == 0) ++done;
}

// A ring of 4 submission and 8 completion entries, and 2 000 requests
// started in one turn: their completions overflow the completion queue.
// Kernels that answer the next io_uring_submit with EBUSY then get their
// completions reaped (for dispatch later in the turn) rather than a submit
// retried forever; every request completes once either way.
TEST(TimerHeapTest, FarMoreRequestsThanTheRingHoldsAllComplete) {
  auto loop = MakeLoop(/*queue_entries=*/4);
  if (loop->backend() != RuntimeBackend::kIoUring) GTEST_SKIP() << "io_uring requests only";
  int done = 0;
  loop->BlockOn([&]() -> Task<void> {
    TaskGroup group(*loop);
    for (int i = 0; i < 2000; ++i) group.Spawn(Nop(*loop, done));
    co_await group.Join();
  }());
  EXPECT_EQ(done, 2000);
}

}  // namespace
}  // namespace uxds
