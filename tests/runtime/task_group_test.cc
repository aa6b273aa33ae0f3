// TaskGroup: joins end on what the joiner recorded, never on a re-read of a
// group its owner may already have freed.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "runtime/shutdown_once.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

std::unique_ptr<Loop> MakeLoop() {
  auto loop = Loop::Create();
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return std::move(*loop);
}

Task<void> YieldTimes(Loop& loop, int times) {
  for (int i = 0; i < times; ++i) co_await loop.Yield();
}

// An object that owns a group, as every class with a Shutdown() does.
struct Owner {
  explicit Owner(Loop& loop) : group(loop) {}
  TaskGroup group;
};

// Two joiners of one group; the first to resume frees the group's owner.
// The second must return without reading the freed group (under ASan a
// heap-use-after-free before joins owned their wake).
TEST(TaskGroupTest, TheFirstJoinerMayFreeTheGroupUnderTheOthers) {
  auto loop = MakeLoop();
  auto owner = std::make_unique<Owner>(*loop);
  owner->group.Spawn(YieldTimes(*loop, 3));
  std::vector<int> returned;
  auto first = [](std::unique_ptr<Owner>& owner, std::vector<int>& returned) -> Task<void> {
    co_await owner->group.Join();
    returned.push_back(1);
    owner.reset();
  };
  auto second = [](TaskGroup& group, std::vector<int>& returned) -> Task<void> {
    co_await group.Join();
    returned.push_back(2);
  };
  auto both = [&]() -> Task<void> {
    TaskGroup joiners(*loop);
    joiners.Spawn(first(owner, returned));
    joiners.Spawn(second(owner->group, returned));
    co_await joiners.Join();
  };
  loop->BlockOn(both());
  EXPECT_EQ(owner, nullptr);
  EXPECT_EQ(returned, (std::vector<int>{1, 2}));
}

// Many joiners, every one of which frees something of the owner's on
// return: the last one the owner itself.
TEST(TaskGroupTest, EveryJoinerReturnsWhateverTheOthersFreed) {
  auto loop = MakeLoop();
  auto owner = std::make_unique<Owner>(*loop);
  owner->group.Spawn(YieldTimes(*loop, 2));
  int returned = 0;
  auto join = [](Owner* owner, int* returned, std::unique_ptr<Owner>* to_free) -> Task<void> {
    co_await owner->group.Join();
    ++*returned;
    if (to_free != nullptr) to_free->reset();
  };
  auto all = [&]() -> Task<void> {
    TaskGroup joiners(*loop);
    joiners.Spawn(join(owner.get(), &returned, &owner));
    for (int i = 0; i < 8; ++i) joiners.Spawn(join(owner.get(), &returned, nullptr));
    co_await joiners.Join();
  };
  loop->BlockOn(all());
  EXPECT_EQ(returned, 9);
  EXPECT_EQ(owner, nullptr);
}

// A task spawned after the group emptied but before its joiner resumed is
// still waited for: the join had not ended.
TEST(TaskGroupTest, ATaskSpawnedBeforeTheJoinerResumesIsWaitedFor) {
  auto loop = MakeLoop();
  TaskGroup group(*loop);
  bool late_task_done = false;
  bool join_returned = false;
  bool late_task_spawned_while_empty = false;
  auto late = [](Loop& loop, bool* done) -> Task<void> {
    co_await loop.Yield();
    co_await loop.Yield();
    *done = true;
  };
  auto run = [&]() -> Task<void> {
    TaskGroup outer(*loop);
    // The group's only task ends after one yield, which queues the joiner.
    group.Spawn(YieldTimes(*loop, 1));
    outer.Spawn([](TaskGroup& group, bool* returned, bool* late_done) -> Task<void> {
      co_await group.Join();
      *returned = true;
      EXPECT_TRUE(*late_done) << "Join() returned before a task spawned into the group";
    }(group, &join_returned, &late_task_done));
    // Runs in the turn the group empties, after the joiner was queued and
    // before it resumes.
    outer.Spawn([](Loop& loop, TaskGroup& group, bool* spawned_while_empty, bool* late_done,
                   auto late) -> Task<void> {
      co_await loop.Yield();
      *spawned_while_empty = group.size() == 0;
      group.Spawn(late(loop, late_done));
    }(*loop, group, &late_task_spawned_while_empty, &late_task_done, late));
    co_await outer.Join();
  };
  loop->BlockOn(run());
  EXPECT_TRUE(late_task_spawned_while_empty) << "the test did not build the case it is about";
  EXPECT_TRUE(join_returned);
  EXPECT_TRUE(late_task_done);
}

TEST(TaskGroupTest, AJoinOfAnEmptyGroupReturnsAtOnce) {
  auto loop = MakeLoop();
  TaskGroup group(*loop);
  loop->BlockOn(group.Join());
  group.Spawn(YieldTimes(*loop, 1));
  loop->BlockOn(group.Join());
  EXPECT_EQ(group.size(), 0u);
}

// An owner with tasks and a Shutdown() built on ShutdownOnce.
struct Service {
  explicit Service(Loop& loop) : loop(loop), tasks(loop), shutdown(loop) {
    tasks.Spawn(
        [](Loop& l) -> Task<void> { (void)co_await SleepFor(l, std::chrono::hours(1)); }(loop));
  }
  Task<void> Shutdown() {
    co_await shutdown.Run([this]() -> Task<void> {
      ++teardowns;
      co_await loop.Yield();
      co_await tasks.CancelAndJoin();
    });
  }
  Loop& loop;
  TaskGroup tasks;
  ShutdownOnce shutdown;
  int teardowns = 0;
};

// Shutdown() awaited from two tasks, and the service destroyed by the first
// to return: one teardown, both callers return, nothing read after free.
TEST(ShutdownOnceTest, TwoCallersAndTheFirstToReturnDestroysTheOwner) {
  auto loop = MakeLoop();
  auto service = std::make_unique<Service>(*loop);
  int returned = 0;
  int teardowns = 0;
  auto first = [](std::unique_ptr<Service>& service, int& returned, int& teardowns) -> Task<void> {
    co_await service->Shutdown();
    ++returned;
    teardowns = service->teardowns;
    service.reset();
  };
  auto second = [](Service* service, int& returned) -> Task<void> {
    co_await service->Shutdown();
    ++returned;
  };
  auto both = [&]() -> Task<void> {
    TaskGroup callers(*loop);
    callers.Spawn(first(service, returned, teardowns));
    callers.Spawn(second(service.get(), returned));
    co_await callers.Join();
    // A third caller after the end returns at once, on a new owner.
  };
  loop->BlockOn(both());
  EXPECT_EQ(service, nullptr);
  EXPECT_EQ(returned, 2);
  EXPECT_EQ(teardowns, 1);
}

// The caller that started the teardown is cancelled: the teardown still
// runs to its end, and a later caller waits for it.
TEST(ShutdownOnceTest, ACancelledCallerDoesNotCutTheTeardownShort) {
  auto loop = MakeLoop();
  Service service(*loop);
  auto run = [&]() -> Task<void> {
    TaskGroup cancelled(*loop);
    cancelled.Spawn([](Service& s) -> Task<void> { co_await s.Shutdown(); }(service));
    cancelled.Cancel();
    co_await cancelled.Join();
    co_await service.Shutdown();
    EXPECT_TRUE(service.shutdown.done());
    EXPECT_EQ(service.tasks.size(), 0u);
  };
  loop->BlockOn(run());
  EXPECT_EQ(service.teardowns, 1);
}

using TaskGroupDeathTest = ::testing::Test;

TEST(TaskGroupDeathTest, DestroyingAGroupWithALiveTaskTerminates) {
  EXPECT_DEATH(
      {
        auto loop = MakeLoop();
        auto group = std::make_unique<TaskGroup>(*loop);
        group->Spawn(YieldTimes(*loop, 1));
        group.reset();
      },
      "TaskGroup destroyed with 1 live tasks");
}

TEST(TaskGroupDeathTest, DestroyingAGroupWithAWaitingJoinerTerminates) {
  EXPECT_DEATH(
      {
        auto loop = MakeLoop();
        auto group = std::make_unique<TaskGroup>(*loop);
        Event never(*loop);
        group->Spawn([](Event& e) -> Task<void> { (void)co_await e.Wait(); }(never));
        TaskGroup joiners(*loop);
        joiners.Spawn([](TaskGroup& g) -> Task<void> { co_await g.Join(); }(*group));
        loop->BlockOn(YieldTimes(*loop, 3));
        group->Cancel();
        // The cancelled task has not run yet: still live, and a joiner waits.
        group.reset();
      },
      "TaskGroup destroyed with 1 live tasks and 1 waiting joiners");
}

}  // namespace
}  // namespace uxds
