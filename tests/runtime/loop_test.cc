// Loop, Task, TaskGroup, timers, Event, Channel, Post: the coroutine runtime.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "uxds/runtime.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Loop> MakeLoop() {
  auto loop = Loop::Create();
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return std::move(*loop);
}

Task<int> AddLater(Loop& loop, int a, int b) {
  Status s = co_await SleepFor(loop, 1ms);
  EXPECT_TRUE(s.ok()) << s.ToString();
  co_return a + b;
}

Task<int> Nested(Loop& loop, int depth) {
  if (depth == 0) co_return co_await AddLater(loop, 1, 0);
  co_return 1 + co_await Nested(loop, depth - 1);
}

TEST(LoopTest, BlockOnReturnsTheTaskResult) {
  auto loop = MakeLoop();
  EXPECT_EQ(loop->BlockOn(AddLater(*loop, 2, 3)), 5);
}

TEST(LoopTest, DeepAwaitChainsUseSymmetricTransfer) {
  auto loop = MakeLoop();
  // Deep enough to overflow the stack without symmetric transfer.
  auto chain = [](Loop& l) -> Task<int> {
    int total = 0;
    for (int i = 0; i < 200000; ++i) {
      total += co_await [](int v) -> Task<int> { co_return v; }(1);
    }
    (void)l;
    co_return total;
  };
  EXPECT_EQ(loop->BlockOn(chain(*loop)), 200000);
  EXPECT_EQ(loop->BlockOn(Nested(*loop, 1000)), 1001);
}

TEST(LoopTest, CancellingAGroupCancelsSleepsDeepInside) {
  auto loop = MakeLoop();
  std::vector<Status> results;
  auto sleeper = [&](Loop& l) -> Task<void> {
    // Nested so that cancellation must flow through an awaited task.
    auto inner = [](Loop& l2) -> Task<Status> { co_return co_await SleepFor(l2, 1h); };
    results.push_back(co_await inner(l));
  };
  auto main_task = [&](Loop& l) -> Task<void> {
    TaskGroup group(l);
    for (int i = 0; i < 3; ++i) group.Spawn(sleeper(l));
    (void)co_await SleepFor(l, 1ms);
    EXPECT_EQ(group.size(), 3u);
    co_await group.CancelAndJoin();
    EXPECT_EQ(group.size(), 0u);
  };
  loop->BlockOn(main_task(*loop));
  ASSERT_EQ(results.size(), 3u);
  for (const Status& s : results) EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
}

TEST(LoopTest, WorkStartedUnderACancelledGroupFailsAtOnce) {
  auto loop = MakeLoop();
  Status seen;
  auto main_task = [&](Loop& l) -> Task<void> {
    TaskGroup group(l);
    group.Cancel();
    group.Spawn(
        [](Loop& l2, Status& out) -> Task<void> { out = co_await SleepFor(l2, 1h); }(l, seen));
    co_await group.Join();
  };
  loop->BlockOn(main_task(*loop));
  EXPECT_EQ(seen.code(), StatusCode::kCancelled);
}

TEST(LoopTest, ChildGroupsAreCancelledWithTheirParent) {
  auto loop = MakeLoop();
  Status seen;
  auto main_task = [&](Loop& l) -> Task<void> {
    TaskGroup parent(l);
    parent.Spawn([](Loop& l2, Status& out) -> Task<void> {
      CancelState* mine = co_await CurrentCancelState();
      TaskGroup child(l2, mine);
      child.Spawn(
          [](Loop& l3, Status& o) -> Task<void> { o = co_await SleepFor(l3, 1h); }(l2, out));
      co_await child.Join();
    }(l, seen));
    (void)co_await SleepFor(l, 1ms);
    co_await parent.CancelAndJoin();
  };
  loop->BlockOn(main_task(*loop));
  EXPECT_EQ(seen.code(), StatusCode::kCancelled);
}

TEST(LoopTest, EventWakesEveryWaiterAndWaitsAreCancellable) {
  auto loop = MakeLoop();
  int woken = 0;
  Status cancelled_wait;
  auto main_task = [&](Loop& l) -> Task<void> {
    Event event(l);
    TaskGroup waiters(l);
    for (int i = 0; i < 2; ++i) {
      waiters.Spawn([](Event& e, int& n) -> Task<void> {
        Status s = co_await e.Wait();
        if (s.ok()) ++n;
      }(event, woken));
    }
    Event never(l);
    TaskGroup cancelled(l);
    cancelled.Spawn([](Event& e, Status& out) -> Task<void> { out = co_await e.Wait(); }(
                                                  never, cancelled_wait));
    (void)co_await SleepFor(l, 1ms);
    EXPECT_EQ(woken, 0);
    event.Set();
    co_await waiters.Join();
    EXPECT_EQ(woken, 2);
    EXPECT_TRUE((co_await event.Wait()).ok());  // already set: no suspension
    co_await cancelled.CancelAndJoin();
  };
  loop->BlockOn(main_task(*loop));
  EXPECT_EQ(cancelled_wait.code(), StatusCode::kCancelled);
}

TEST(LoopTest, ChannelDeliversInOrderThenEndsWhenClosed) {
  auto loop = MakeLoop();
  std::vector<int> got;
  auto main_task = [&](Loop& l) -> Task<void> {
    AsyncQueue<int> ch(l);
    TaskGroup group(l);
    group.Spawn([](AsyncQueue<int>& c, std::vector<int>& out) -> Task<void> {
      while (auto v = co_await c.Receive()) out.push_back(*v);
    }(ch, got));
    for (int i = 0; i < 5; ++i) {
      EXPECT_TRUE(ch.Send(i));
      if (i % 2 == 0) (void)co_await SleepFor(l, 100us);
    }
    ch.Close();
    EXPECT_FALSE(ch.Send(99));
    co_await group.Join();
  };
  loop->BlockOn(main_task(*loop));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(LoopTest, TimersFireInOrderAndCancelledOnesNever) {
  auto loop = MakeLoop();
  std::vector<int> fired;
  auto main_task = [&](Loop& l) -> Task<void> {
    Timer a(l), b(l), c(l), restarted(l);
    a.Start(3ms, [&] { fired.push_back(3); });
    b.Start(1ms, [&] { fired.push_back(1); });
    c.Start(2ms, [&] { fired.push_back(99); });
    restarted.Start(1h, [&] { fired.push_back(98); });
    restarted.Start(2ms, [&] { fired.push_back(2); });  // replaces the 1 h expiry
    EXPECT_TRUE(c.pending());
    c.Cancel();
    EXPECT_FALSE(c.pending());
    {
      Timer destroyed(l);
      destroyed.Start(1ms, [&] { fired.push_back(97); });
    }
    (void)co_await SleepFor(l, 20ms);
    EXPECT_FALSE(a.pending());
  };
  loop->BlockOn(main_task(*loop));
  std::sort(fired.begin(), fired.end());
  EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
}

TEST(LoopTest, TimerCallbackMayRestartItsOwnTimer) {
  auto loop = MakeLoop();
  int count = 0;
  auto main_task = [&](Loop& l) -> Task<void> {
    Timer t(l);
    std::function<void()> tick = [&] {
      if (++count < 3) t.Start(1ms, tick);
    };
    t.Start(1ms, tick);
    while (count < 3) (void)co_await SleepFor(l, 1ms);
  };
  loop->BlockOn(main_task(*loop));
  EXPECT_EQ(count, 3);
}

TEST(LoopTest, PostFromOtherThreadsRunsOnTheLoopThread) {
  auto lt = LoopThread::Start();
  ASSERT_TRUE(lt.ok()) << lt.status().ToString();
  Loop& loop = (*lt)->loop();
  std::atomic<int> ran{0};
  std::atomic<bool> all_on_loop{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        loop.Post([&] {
          if (!loop.InLoopThread()) all_on_loop = false;
          ++ran;
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  (*lt)->RunSync([] {});  // posted after the others: they ran before it
  EXPECT_EQ(ran.load(), 4000);
  EXPECT_TRUE(all_on_loop.load());
}

// LoopThread's destructor posts Stop; the loop may run it, leave Run() and
// close its eventfd while Post() is still returning. Under ThreadSanitizer
// (the TSan build of ./dev test) a Post() that touched wake_fd_ after
// unlocking showed as a race with close() here.
TEST(LoopTest, LoopThreadsEndingRightAfterAPostNeverRace) {
  for (int i = 0; i < 300; ++i) {
    auto lt = LoopThread::Start();
    ASSERT_TRUE(lt.ok()) << lt.status().ToString();
    std::atomic<bool> ran{false};
    (*lt)->loop().Post([&] { ran = true; });
    lt->reset();  // posts Stop and joins
    EXPECT_TRUE(ran.load());
  }
}

// Stop() from another thread, and the loop's thread destroying the loop as
// soon as Run() returns: Stop() must be done with the loop (its eventfd
// above all) by then. Under ThreadSanitizer a wake-up written after the
// loop could see stop_ showed as a race with the destructor's close().
TEST(LoopTest, AStopFromAnotherThreadIsDoneBeforeTheLoopCanEnd) {
  for (int i = 0; i < 200; ++i) {
    std::promise<Loop*> running;
    std::thread owner([&running] {
      auto loop = Loop::Create();
      ASSERT_TRUE(loop.ok());
      (*loop)->Post([&running, l = loop->get()] { running.set_value(l); });
      (*loop)->Run();
      loop->reset();
    });
    running.get_future().get()->Stop();
    owner.join();
  }
}

// A LoopThread whose loop was stopped from inside (so Run() returned and
// the loop was destroyed on its thread): destroying the LoopThread then
// must not post to the freed loop (ASan: heap-use-after-free).
TEST(LoopTest, ALoopThreadWhoseLoopEndedByItselfIsDestroyedSafely) {
  for (int i = 0; i < 20; ++i) {
    auto lt = LoopThread::Start();
    ASSERT_TRUE(lt.ok()) << lt.status().ToString();
    std::promise<void> destroying;
    (*lt)->RunSync([&] {
      Loop& loop = (*lt)->loop();
      // Cancelled when the loop is destroyed: tells us it is going.
      loop.Spawn([](Loop& l, std::promise<void>* destroying) -> Task<void> {
        (void)co_await SleepFor(l, std::chrono::hours(1));
        destroying->set_value();
      }(loop, &destroying));
      loop.Stop();
    });
    destroying.get_future().wait();
    // Let the loop thread finish freeing the loop before ~LoopThread.
    std::this_thread::sleep_for(2ms);
    lt->reset();
  }
}

TEST(LoopTest, DestroyingTheLoopCancelsAndJoinsSpawnedTasks) {
  bool finished = false;
  {
    auto loop = MakeLoop();
    loop->Spawn([](Loop& l, bool& done) -> Task<void> {
      Status s = co_await SleepFor(l, 1h);
      EXPECT_EQ(s.code(), StatusCode::kCancelled);
      done = true;
    }(*loop, finished));
    (void)loop->BlockOn(SleepFor(*loop, 1ms));
  }
  EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace uxds

namespace uxds {
namespace {

TEST(LoopTest, CurrentIsTheLoopWhileBlockOnRunsIt) {
  auto loop = MakeLoop();
  EXPECT_EQ(Loop::Current(), nullptr);
  auto task = []() -> Task<Loop*> { co_return Loop::Current(); };
  EXPECT_EQ(loop->BlockOn(task()), loop.get());
  EXPECT_EQ(Loop::Current(), nullptr);
}

TEST(LoopTest, BlockOnReturnsWhenTheTaskEndsWithoutAnyIo) {
  auto loop = MakeLoop();
  // Finishes during a turn's ready work, after a join: no completion follows.
  auto task = [](Loop& l) -> Task<int> {
    TaskGroup group(l);
    group.Spawn([]() -> Task<void> { co_return; }());
    co_await group.Join();
    co_return 7;
  };
  EXPECT_EQ(loop->BlockOn(task(*loop)), 7);
}

}  // namespace
}  // namespace uxds
