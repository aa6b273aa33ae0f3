// PickerSlot and PickScope: publication, and reclamation only after every
// scope that might see a retired picker has ended.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "uxds/channel.h"

namespace uxds {
namespace {

// Counts its own destruction.
class CountedPicker final : public Picker {
 public:
  CountedPicker(int tag, std::atomic<int>& destroyed) : tag_(tag), destroyed_(destroyed) {}
  ~CountedPicker() override { destroyed_.fetch_add(1); }
  PickResult Pick(const PickArgs&) const override {
    return PickResult::Fail(tag_ == 1 ? &one_ : &two_);
  }

 private:
  int tag_;
  std::atomic<int>& destroyed_;
  Status one_ = UnavailableError("one");
  Status two_ = UnavailableError("two");
};

std::string PickMessage(const PickerSlot& slot) {
  PickScope scope(slot);
  const PickResult r = scope.Pick(PickArgs{});
  return r.kind == PickResult::Kind::kFail ? r.status->message() : "queue";
}

TEST(PickerSlotTest, PicksSeeTheLatestPublishedPicker) {
  std::atomic<int> destroyed{0};
  PickerSlot slot;
  EXPECT_EQ(PickMessage(slot), "queue");
  slot.Publish(new CountedPicker(1, destroyed));
  EXPECT_EQ(PickMessage(slot), "one");
  slot.Publish(new CountedPicker(2, destroyed));
  EXPECT_EQ(PickMessage(slot), "two");
  // No scope is open: the first picker goes at once.
  EXPECT_EQ(slot.Reclaim(), 0u);
  EXPECT_EQ(destroyed.load(), 1);
  slot.Publish(nullptr);
  EXPECT_EQ(PickMessage(slot), "queue");
  EXPECT_EQ(slot.Reclaim(), 0u);
  EXPECT_EQ(destroyed.load(), 2);
}

TEST(PickerSlotTest, ARetiredPickerLivesUntilEveryScopeThatMaySeeItEnds) {
  std::atomic<int> destroyed{0};
  PickerSlot slot;
  slot.Publish(new CountedPicker(1, destroyed));
  std::atomic<bool> in_scope{false};
  std::atomic<bool> leave{false};
  std::string seen_inside;
  std::thread reader([&] {
    PickScope scope(slot);
    in_scope = true;
    while (!leave) std::this_thread::yield();
    // The picker this scope saw is still alive, though replaced.
    const PickResult r = scope.Pick(PickArgs{});
    seen_inside = r.status->message();
  });
  while (!in_scope) std::this_thread::yield();
  slot.Publish(new CountedPicker(2, destroyed));
  EXPECT_EQ(slot.Reclaim(), 1u);  // the reader may still see picker 1
  EXPECT_EQ(destroyed.load(), 0);
  // A scope opened after the swap sees the new picker.
  EXPECT_EQ(PickMessage(slot), "two");
  EXPECT_EQ(slot.Reclaim(), 1u);
  leave = true;
  reader.join();
  EXPECT_EQ(seen_inside, "one");
  EXPECT_EQ(slot.Reclaim(), 0u);
  EXPECT_EQ(destroyed.load(), 1);
}

TEST(PickerSlotTest, NestedScopesOnOneThread) {
  std::atomic<int> destroyed{0};
  PickerSlot a;
  PickerSlot b;
  a.Publish(new CountedPicker(1, destroyed));
  b.Publish(new CountedPicker(2, destroyed));
  {
    PickScope outer(a);
    {
      PickScope inner(b);
      EXPECT_EQ(inner.Pick(PickArgs{}).status->message(), "two");
    }
    // The inner scope's end does not end the outer one.
    a.Publish(new CountedPicker(2, destroyed));
    EXPECT_EQ(a.Reclaim(), 1u);
    EXPECT_EQ(outer.Pick(PickArgs{}).status->message(), "one");
  }
  EXPECT_EQ(a.Reclaim(), 0u);
  EXPECT_EQ(destroyed.load(), 1);
}

TEST(PickerSlotTest, ThreadsThatExitGiveTheirRecordBack) {
  std::atomic<int> destroyed{0};
  PickerSlot slot;
  slot.Publish(new CountedPicker(1, destroyed));
  for (int i = 0; i < 200; ++i) {
    std::thread t([&] { EXPECT_EQ(PickMessage(slot), "one"); });
    t.join();
  }
  // Reclamation still works with every exited thread's record idle.
  slot.Publish(new CountedPicker(2, destroyed));
  EXPECT_EQ(slot.Reclaim(), 0u);
  EXPECT_EQ(destroyed.load(), 1);
}

}  // namespace
}  // namespace uxds
