// cluster_impl's circuit breaker (A32): one check-and-take per pick on the
// cluster's sharded call counter, exact on one thread, within the
// documented slack across threads, and never holding a slot for a pick
// its child did not complete.
#include "lb/cluster_impl.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace uxds {
namespace {

// The child: completes on one endpoint, or queues, or fails every pick.
class ChildPicker final : public Picker {
 public:
  enum class Mode { kComplete, kQueue, kFail };
  explicit ChildPicker(Mode mode) : mode_(mode) {}
  PickResult Pick(const PickArgs&) const override {
    switch (mode_) {
      case Mode::kComplete:
        return PickResult::Complete(&endpoint_);
      case Mode::kQueue:
        return PickResult::Queue();
      case Mode::kFail:
        break;
    }
    return PickResult::Fail(&failure_);
  }

 private:
  Mode mode_;
  Endpoint endpoint_{"10.0.0.1:443", nullptr, 0};
  Status failure_ = UnavailableError("child failure");
};

ClusterImplPicker MakePicker(std::shared_ptr<CallCounter> counter, uint32_t max_requests,
                             ChildPicker::Mode mode) {
  ClusterImplConfig config;
  config.counter = std::move(counter);
  config.max_requests = max_requests;
  return ClusterImplPicker(config, std::make_shared<ChildPicker>(mode));
}

// A32: with max_requests calls in flight the next pick drops; once one
// ends a pick goes through again.
TEST(ClusterImplTest, AtMaxRequestsTheNextPickDropsUntilACallEnds) {
  constexpr uint32_t kMax = 5;
  auto counter = CallCounter::Create();
  ClusterImplPicker picker = MakePicker(counter, kMax, ChildPicker::Mode::kComplete);
  std::vector<PickResult> held;
  for (uint32_t i = 0; i < kMax; ++i) {
    held.push_back(picker.Pick({}));
    ASSERT_EQ(held.back().kind, PickResult::Kind::kComplete);
  }
  EXPECT_EQ(counter->Load(), kMax);
  const PickResult over = picker.Pick({});
  ASSERT_EQ(over.kind, PickResult::Kind::kFail);
  EXPECT_TRUE(over.drop);
  EXPECT_EQ(over.status->ToString(), "UNAVAILABLE: circuit breaker drop");
  EXPECT_EQ(counter->Load(), kMax);  // a drop holds no slot
  CallFinished(held.back(), true);
  held.pop_back();
  held.push_back(picker.Pick({}));
  EXPECT_EQ(held.back().kind, PickResult::Kind::kComplete);
  EXPECT_EQ(counter->Load(), kMax);
  for (const PickResult& r : held) CallFinished(r, true);
  EXPECT_EQ(counter->Load(), 0);
}

// A pick the child queues or fails is no call: it leaves the count as it
// was (the slot taken by the check goes back), however many there are.
// At the limit such a pick drops first (A32 comes before the child).
TEST(ClusterImplTest, APickTheChildDoesNotCompleteHoldsNoSlot) {
  auto counter = CallCounter::Create();
  ClusterImplPicker queueing = MakePicker(counter, 1, ChildPicker::Mode::kQueue);
  ClusterImplPicker failing = MakePicker(counter, 1, ChildPicker::Mode::kFail);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(queueing.Pick({}).kind, PickResult::Kind::kQueue);
    const PickResult failed = failing.Pick({});
    ASSERT_EQ(failed.kind, PickResult::Kind::kFail);
    EXPECT_FALSE(failed.drop);
    EXPECT_EQ(failed.status->message(), "child failure");
    ASSERT_EQ(counter->Load(), 0);
  }
  ClusterImplPicker completing = MakePicker(counter, 1, ChildPicker::Mode::kComplete);
  const PickResult call = completing.Pick({});
  ASSERT_EQ(call.kind, PickResult::Kind::kComplete);
  const PickResult queued_at_limit = queueing.Pick({});
  EXPECT_TRUE(queued_at_limit.drop);
  EXPECT_EQ(counter->Load(), 1);
  CallFinished(call, true);
  EXPECT_EQ(counter->Load(), 0);
}

// Threads that together never hold max_requests calls are never dropped;
// threads that contend at the limit exceed it by at most their number less
// one (call_counter.h), and the count returns to zero.
TEST(ClusterImplTest, ConcurrentPicksStayWithinTheSlackAndNeverDropUnderTheLimit) {
  constexpr int kThreads = 4;
  constexpr int kPicks = 20000;
  {
    // Each thread holds at most 2 calls: 8 at most, the limit.
    auto counter = CallCounter::Create();
    ClusterImplPicker picker = MakePicker(counter, 2 * kThreads, ChildPicker::Mode::kComplete);
    std::atomic<int> drops{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kPicks; ++i) {
          const PickResult a = picker.Pick({});
          const PickResult b = picker.Pick({});
          for (const PickResult* r : {&a, &b}) {
            if (r->kind == PickResult::Kind::kComplete) {
              CallFinished(*r, true);
            } else {
              drops.fetch_add(1);
            }
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(drops.load(), 0);
    EXPECT_EQ(counter->Load(), 0);
  }
  {
    constexpr uint32_t kMax = 2;
    auto counter = CallCounter::Create();
    ClusterImplPicker picker = MakePicker(counter, kMax, ChildPicker::Mode::kComplete);
    std::atomic<int64_t> most{0};
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kPicks; ++i) {
          const PickResult r = picker.Pick({});
          if (r.kind != PickResult::Kind::kComplete) continue;
          admitted.fetch_add(1);
          int64_t seen = counter->Load();
          int64_t known = most.load();
          while (seen > known && !most.compare_exchange_weak(known, seen)) {
          }
          CallFinished(r, true);
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_GT(admitted.load(), 0);
    EXPECT_LE(most.load(), int64_t{kMax} + kThreads - 1);
    EXPECT_EQ(counter->Load(), 0);
  }
}

// A call holds only the raw counter its pick returned: a counter whose
// owners (the pickers, the tree) let go while calls are counted in it
// lives until the last of them ends, on whichever thread that is. ASan
// sees any use after the free.
TEST(ClusterImplTest, ACounterLivesUntilTheLastCallCountedInItEnds) {
  const size_t awaiting_before = CallCounter::awaiting_calls();
  std::vector<PickResult> calls;
  {
    ClusterImplPicker picker = MakePicker(CallCounter::Create(), 100, ChildPicker::Mode::kComplete);
    for (int i = 0; i < 3; ++i) calls.push_back(picker.Pick({}));
  }  // the picker, the counter's last owner, is gone
  EXPECT_EQ(CallCounter::awaiting_calls(), awaiting_before + 1);
  ASSERT_NE(calls[0].call_counter, nullptr);
  EXPECT_EQ(calls[0].call_counter->Load(), 3);
  CallFinished(calls[0], true);
  std::thread([&] { CallNotStarted(calls[1]); }).join();  // another thread's shard
  EXPECT_EQ(calls[2].call_counter->Load(), 1);
  EXPECT_EQ(CallCounter::awaiting_calls(), awaiting_before + 1);
  CallFinished(calls[2], false);
  EXPECT_EQ(CallCounter::awaiting_calls(), awaiting_before);  // freed now
  // With no call counted, the owners' release frees it at once.
  { ClusterImplPicker idle = MakePicker(CallCounter::Create(), 1, ChildPicker::Mode::kComplete); }
  EXPECT_EQ(CallCounter::awaiting_calls(), awaiting_before);
}

// A37 + A32: a cluster's tree rebuilt while calls of the old one are in
// flight gets the same shared counter back, with those calls counted: the
// new tree does not admit max_requests more.
TEST(ClusterImplTest, ARebuiltTreeGetsItsCounterBackWithTheCallsInFlight) {
  const int scope = 0;
  const size_t awaiting_before = CallCounter::awaiting_calls();
  std::vector<PickResult> calls;
  {
    ClusterImplPicker old_tree =
        MakePicker(SharedCallCounter(&scope, "c", ""), 2, ChildPicker::Mode::kComplete);
    for (int i = 0; i < 2; ++i) calls.push_back(old_tree.Pick({}));
  }  // every owner of the counter is gone; two calls still run
  EXPECT_EQ(CallCounter::awaiting_calls(), awaiting_before + 1);
  std::shared_ptr<CallCounter> again = SharedCallCounter(&scope, "c", "");
  EXPECT_EQ(again.get(), calls[0].call_counter);
  EXPECT_EQ(again->Load(), 2);
  {
    ClusterImplPicker new_tree = MakePicker(again, 2, ChildPicker::Mode::kComplete);
    EXPECT_EQ(new_tree.Pick({}).kind, PickResult::Kind::kFail);  // A32: at the limit
    CallFinished(calls[0], true);
    const PickResult admitted = new_tree.Pick({});
    ASSERT_EQ(admitted.kind, PickResult::Kind::kComplete);
    CallFinished(admitted, true);
  }
  // Another key is another counter.
  EXPECT_NE(SharedCallCounter(&scope, "other", "").get(), again.get());
  again.reset();
  EXPECT_EQ(CallCounter::awaiting_calls(), awaiting_before + 1);  // calls[1] still runs
  CallFinished(calls[1], false);
  EXPECT_EQ(CallCounter::awaiting_calls(), awaiting_before);
}

}  // namespace
}  // namespace uxds
