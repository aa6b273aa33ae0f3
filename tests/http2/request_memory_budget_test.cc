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

// Holds unfinished messages of the given sizes; abandoning drops the
// largest and tells the budget.
struct Connection : RequestMemoryBudget::Member {
  explicit Connection(RequestMemoryBudget& budget) : budget(budget) { budget.Join(this); }
  ~Connection() { budget.Leave(this); }

  void Receive(size_t bytes) {
    messages.push_back(bytes);
    Recount();
  }
  void Recount() {
    size_t now = 0;
    for (size_t message : messages) now += message;
    budget.Recharge(held, now, held, now);
    held = now;
  }
  void OnBudgetRoom() override { ++rooms_told; }
  size_t unfinished_bytes() const override { return held; }
  void AbandonLargestUnfinished(const Status& reason) override {
    auto largest = std::max_element(messages.begin(), messages.end());
    abandoned.push_back(*largest);
    reasons.push_back(reason.message());
    messages.erase(largest);
    Recount();
  }

  RequestMemoryBudget& budget;
  std::vector<size_t> messages;
  size_t held = 0;
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
  busy.Receive(20 * kMiB);  // 28 MiB used: 4 MiB more passes half
  EXPECT_FALSE(budget.TryGrowWindow(5 * kMiB));
  EXPECT_TRUE(budget.TryGrowWindow(4 * kMiB));
  EXPECT_EQ(budget.used(), 32 * kMiB);
}

TEST(RequestMemoryBudgetTest, AStalledWaiterAbandonsTheLargestUnfinishedMessagesUntilThereIsRoom) {
  RequestMemoryBudget budget(16 * kMiB);
  Connection small(budget), large(budget), waiter(budget);
  small.Receive(3 * kMiB);
  small.Receive(3 * kMiB);
  large.Receive(4 * kMiB);
  large.Receive(7 * kMiB);  // 17 MiB: full
  EXPECT_FALSE(budget.has_room());
  budget.WaitForRoom(&waiter);
  // The 7 MiB message of the connection holding most goes, and that is
  // enough room; the waiter is told once.
  EXPECT_EQ(large.abandoned, std::vector<size_t>{7 * kMiB});
  EXPECT_TRUE(small.abandoned.empty());
  EXPECT_EQ(budget.abandoned_messages(), 1u);
  EXPECT_EQ(waiter.rooms_told, 1);
  EXPECT_TRUE(budget.has_room());
  ASSERT_EQ(large.reasons.size(), 1u);
  EXPECT_NE(large.reasons[0].find("memory budget exhausted"), std::string::npos);
  EXPECT_EQ(budget.peak(), 17 * kMiB);
}

TEST(RequestMemoryBudgetTest, NothingIsAbandonedWhileCompleteMessagesHoldMostOfTheBudget) {
  RequestMemoryBudget budget(16 * kMiB);
  Connection waiter(budget);
  // Complete messages a handler will read: held, but not unfinished.
  budget.Recharge(0, 12 * kMiB, 0, 0);
  Connection arriving(budget);
  arriving.Receive(5 * kMiB);
  budget.WaitForRoom(&waiter);
  EXPECT_TRUE(arriving.abandoned.empty());
  EXPECT_EQ(waiter.rooms_told, 0);
  // The handler reads: room, and the waiter hears of it.
  budget.Recharge(12 * kMiB, 0, 0, 0);
  EXPECT_EQ(waiter.rooms_told, 1);
  // Told once: it must ask again to be told again.
  budget.Recharge(0, 1, 0, 0);
  budget.Recharge(1, 0, 0, 0);
  EXPECT_EQ(waiter.rooms_told, 1);
}

}  // namespace
}  // namespace uxds::http2::detail
