// The loop's timers (one user-space heap, one kernel wait) and a ring under
// pressure (more completions at once than the completion queue holds).
#include <gtest/gtest.h>
#include <liburing.h>

#include <random>
#include <set>
#include <utility>
#include <vector>

#include "runtime/io_awaiter.h"
#include "runtime/timer_heap.h"
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

// The heap itself against an ordered set, through random arms, re-arms,
// cancels and pops of what is due: what falls due is always the earliest
// armed deadline, ties by arming order; no cancelled node ever comes out;
// every node's index stays right (a wrong one would cancel the wrong
// node); and cancelled slots never outnumber armed ones by more than the
// few the heap keeps.
TEST(TimerHeapTest, TheHeapAgreesWithAnOrderedSet) {
  struct Node final : detail::TimerNode {
    void OnExpired() override {}
  };
  constexpr int kNodes = 2000;
  std::vector<Node> nodes(kNodes);
  detail::TimerHeap heap;
  // (deadline, sequence) -> node index: what the heap should hold.
  std::set<std::pair<std::pair<Loop::Clock::time_point, uint64_t>, int>> expected;
  std::mt19937 random(11);
  const Loop::Clock::time_point base{};
  auto key = [&](int i) { return std::make_pair(nodes[i].deadline, nodes[i].sequence); };
  auto pop_due = [&](Loop::Clock::time_point now) {
    detail::TimerNode* due = heap.PopDue(now, heap.sequence_limit());
    if (expected.empty() || expected.begin()->first.first > now) {
      EXPECT_EQ(due, nullptr);
      return false;
    }
    EXPECT_EQ(due, &nodes[expected.begin()->second]);
    expected.erase(expected.begin());
    return due != nullptr;
  };
  for (int step = 0; step < 200'000; ++step) {
    const int i = static_cast<int>(random() % kNodes);
    switch (random() % 8) {
      case 0:
      case 1:
      case 2:  // arm or re-arm; few distinct deadlines, so ties are common
        if (nodes[i].armed()) expected.erase({key(i), i});
        nodes[i].deadline = base + std::chrono::milliseconds(random() % 64);
        heap.Push(&nodes[i]);
        expected.insert({key(i), i});
        break;
      case 3:
      case 4:
      case 5:  // cancel any node, armed or not
        if (nodes[i].armed()) expected.erase({key(i), i});
        heap.Remove(&nodes[i]);
        break;
      case 6:  // what is due at some time
        pop_due(base + std::chrono::milliseconds(random() % 64));
        break;
      case 7:  // cancel the earliest, as a response cancels resource timers
        if (!expected.empty()) {
          const int first = expected.begin()->second;
          expected.erase(expected.begin());
          heap.Remove(&nodes[first]);
        }
        break;
    }
    ASSERT_EQ(heap.size(), expected.size()) << step;
    ASSERT_LE(heap.slot_count(), 2 * expected.size() + detail::TimerHeap::kEmptySlotsKept + 1)
        << step;
    for (int k = 0; k < 3; ++k) {
      const int j = static_cast<int>(random() % kNodes);
      ASSERT_EQ(nodes[j].armed(), expected.contains({key(j), j})) << step;
    }
  }
  const auto end = base + std::chrono::milliseconds(64);
  while (pop_due(end)) {
  }
  EXPECT_TRUE(expected.empty());
  EXPECT_TRUE(heap.empty());
  EXPECT_EQ(heap.slot_count(), 0u);
  for (const Node& node : nodes) EXPECT_FALSE(node.armed());
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
