// RequestMemoryBudget's own rules, with plain members standing for
// connections (the end-to-end attack is in memory_bound_test.cc).
#include "http2/request_memory_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace uxds::http2::detail {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Holds calls of the given sizes; abandoning ends the largest and tells
// the budget.
struct Connection : RequestMemoryBudget::Member {
  explicit Connection(RequestMemoryBudget& budget) : budget(budget) { budget.Join(this); }
  ~Connection() { budget.Leave(this); }

  void Receive(size_t bytes) {
    messages.push_back(bytes);
    Recount();
  }
  // Credit granted and not used yet: charged, but no call holds it.
  void Grant(size_t bytes) {
    budget.Recharge(held + credit, held + bytes, 0, 0);
    credit = bytes;
  }
  void Recount() {
    size_t now = 0;
    for (size_t message : messages) now += message;
    budget.Recharge(held + credit, now + credit, complete ? 0 : held, complete ? 0 : now);
    held = now;
  }
  void OnBudgetRoom() override { ++rooms_told; }
  size_t held_bytes() const override { return held + credit; }
  size_t abandonable_bytes() const override { return held; }
  void AbandonLargestCall(const Status& reason) override {
    auto largest = std::max_element(messages.begin(), messages.end());
    abandoned.push_back(*largest);
    reasons.push_back(reason.message());
    messages.erase(largest);
    Recount();
  }

  RequestMemoryBudget& budget;
  std::vector<size_t> messages;
  bool complete = false;  // messages a handler will read, or still arriving
  size_t held = 0;
  size_t credit = 0;
  int rooms_told = 0;
  std::vector<size_t> abandoned;
  std::vector<std::string> reasons;
};

TEST(RequestMemoryBudgetTest, WindowGrowthIsCappedAtAQuarterAndOnlyWhileLessThanHalfIsUsed) {
  RequestMemoryBudget budget(64 * kMiB);
  EXPECT_TRUE(budget.TryGrowWindow(8 * kMiB));
  EXPECT_TRUE(budget.TryGrowWindow(8 * kMiB));
  EXPECT_EQ(budget.window_growth(), 16 * kMiB);
  EXPECT_FALSE(budget.TryGrowWindow(1));  // a quarter of 64 MiB is promised
  budget.ReleaseGrowth(8 * kMiB);
  Connection busy(budget);
  busy.Receive(20 * kMiB);
  EXPECT_FALSE(budget.TryGrowWindow(13 * kMiB));  // 33 MiB would pass half
  EXPECT_FALSE(budget.TryGrowWindow(9 * kMiB));   // 17 MiB of growth
  EXPECT_TRUE(budget.TryGrowWindow(8 * kMiB));
  EXPECT_EQ(budget.window_growth(), 16 * kMiB);
  EXPECT_EQ(budget.used(), 20 * kMiB);  // the member charges the credit it grants
}

TEST(RequestMemoryBudgetTest, OverTheLimitTheLargestCallOfTheBiggestHolderIsEnded) {
  RequestMemoryBudget budget(16 * kMiB);
  Connection small(budget), large(budget), waiter(budget);
  small.Receive(3 * kMiB);
  small.Receive(3 * kMiB);
  large.Receive(4 * kMiB);
  large.Receive(7 * kMiB);  // 17 MiB: over
  EXPECT_FALSE(budget.has_room());
  budget.WaitForRoom(&waiter);
  budget.MakeRoom();
  // The 7 MiB call of the connection holding most goes, and that is
  // enough room; the waiter is told once.
  EXPECT_EQ(large.abandoned, std::vector<size_t>{7 * kMiB});
  EXPECT_TRUE(small.abandoned.empty());
  EXPECT_EQ(budget.abandoned_calls(), 1u);
  EXPECT_EQ(waiter.rooms_told, 1);
  EXPECT_TRUE(budget.has_room());
  ASSERT_EQ(large.reasons.size(), 1u);
  EXPECT_NE(large.reasons[0].find("memory budget exhausted"), std::string::npos);
  EXPECT_EQ(budget.peak(), 17 * kMiB);
  // Told once: it must ask again to be told again.
  small.Receive(1);
  small.messages.pop_back();
  small.Recount();
  EXPECT_EQ(waiter.rooms_told, 1);
}

// Complete messages within every connection's share: handlers will read
// them, so nothing is ended.
TEST(RequestMemoryBudgetTest, NobodyHoldingNoMoreThanItsShareIsEnded) {
  RequestMemoryBudget budget(16 * kMiB);
  budget.Recharge(0, 4 * kMiB, 0, 0);  // credit granted and not used yet
  Connection a(budget), b(budget), c(budget), d(budget);
  for (Connection* connection : {&a, &b, &c, &d}) {
    connection->complete = true;
    connection->Receive(3 * kMiB + kMiB / 2);
  }
  EXPECT_EQ(budget.fair_share(), 4 * kMiB);
  EXPECT_FALSE(budget.has_room());  // 14 MiB held + 4 MiB of credit
  budget.WaitForRoom(&d);
  budget.MakeRoom();
  EXPECT_EQ(budget.abandoned_calls(), 0u);
  EXPECT_EQ(d.rooms_told, 0);
  // A handler reads: room again, and the waiter hears of it.
  a.messages.clear();
  a.Recount();
  EXPECT_EQ(d.rooms_told, 1);
}

// Messages that cannot finish fill the budget, each within its share: the
// largest is ended all the same, or nothing would ever move.
TEST(RequestMemoryBudgetTest, UnfinishedMessagesHoldingHalfTheBudgetAreEndedEvenWithinAShare) {
  RequestMemoryBudget budget(16 * kMiB);
  Connection a(budget), b(budget), c(budget), d(budget);
  a.Receive(4 * kMiB);
  b.Receive(4 * kMiB);
  c.Receive(4 * kMiB);
  d.Receive(3 * kMiB);
  d.Receive(kMiB + 1);
  budget.MakeRoom();
  EXPECT_EQ(budget.abandoned_calls(), 1u);
  EXPECT_TRUE(budget.has_room());
  EXPECT_EQ(a.abandoned.size() + b.abandoned.size() + c.abandoned.size() + d.abandoned.size(), 1u);
}

// A connection whose charge is a grown window nobody uses has no call to
// end: the calls of the next holder are ended instead.
TEST(RequestMemoryBudgetTest, AConnectionChargedOnlyForUnusedCreditIsPassedOver) {
  RequestMemoryBudget budget(16 * kMiB);
  Connection idle(budget), a(budget), b(budget);
  idle.Grant(7 * kMiB);
  a.Receive(6 * kMiB);
  b.Receive(5 * kMiB);  // 18 MiB charged; the share is 5.33 MiB
  budget.MakeRoom();
  EXPECT_EQ(a.abandoned, std::vector<size_t>{6 * kMiB});
  EXPECT_TRUE(b.abandoned.empty());
  EXPECT_TRUE(budget.has_room());
  EXPECT_EQ(budget.abandoned_calls(), 1u);
}

}  // namespace
}  // namespace uxds::http2::detail
