// HostResolver: host names resolved on worker threads, results posted back
// to the loop; the loop never waits for a lookup, a slow lookup does not hold
// up the others, and destroying the resolver ends every wait.
#include "runtime/host_resolver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
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

StatusOr<std::vector<SocketAddress>> ResolveOn(Loop& loop, HostResolver& resolver, std::string host,
                                               std::string port) {
  StatusOr<std::vector<SocketAddress>> result = InternalError("not run");
  loop.BlockOn([&]() -> Task<void> { result = co_await resolver.Resolve(host, port); }());
  return result;
}

TEST(HostResolverTest, LocalhostResolvesToItsLoopbackAddresses) {
  auto loop = MakeLoop();
  HostResolver resolver(*loop);
  auto addresses = ResolveOn(*loop, resolver, "localhost", "8080");
  ASSERT_TRUE(addresses.ok()) << addresses.status().ToString();
  ASSERT_FALSE(addresses->empty());
  for (const SocketAddress& address : *addresses) {
    EXPECT_TRUE(address.ToString() == "127.0.0.1:8080" || address.ToString() == "[::1]:8080")
        << address.ToString();
  }
}

TEST(HostResolverTest, IpLiteralsNeedNoLookup) {
  auto loop = MakeLoop();
  // A lookup that would fail: literals must not reach it.
  HostResolver resolver(*loop, [](const std::string&, const std::string&) {
    return StatusOr<std::vector<SocketAddress>>(InternalError("looked up"));
  });
  auto v4 = ResolveOn(*loop, resolver, "10.1.2.3", "443");
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  EXPECT_EQ((*v4)[0].ToString(), "10.1.2.3:443");
  auto v6 = ResolveOn(*loop, resolver, "2001:db8::1", "443");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ((*v6)[0].ToString(), "[2001:db8::1]:443");
}

TEST(HostResolverTest, ANameThatDoesNotResolveIsUnavailable) {
  auto loop = MakeLoop();
  HostResolver resolver(*loop);
  // RFC 6761: .invalid never resolves.
  auto addresses = ResolveOn(*loop, resolver, "xds.example.invalid", "443");
  ASSERT_FALSE(addresses.ok());
  EXPECT_EQ(addresses.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(addresses.status().message().find("cannot resolve xds.example.invalid:443"),
            std::string::npos)
      << addresses.status().ToString();
}

// A lookup the test holds: names starting with "slow" block until the gate
// opens, others resolve at once. Every call is counted when it starts.
class Gate {
 public:
  static HostResolver::Lookup LookupThrough(std::shared_ptr<Gate> gate) {
    return [gate](const std::string& host,
                  const std::string& port) -> StatusOr<std::vector<SocketAddress>> {
      std::unique_lock lock(gate->mu_);
      ++gate->started_;
      if (host.starts_with("slow")) gate->opened_.wait(lock, [&] { return gate->open_; });
      return std::vector<SocketAddress>{*SocketAddress::Parse("192.0.2.7:" + port)};
    };
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    opened_.notify_all();
  }
  int started() {
    std::lock_guard lock(mu_);
    return started_;
  }

 private:
  std::mutex mu_;
  std::condition_variable opened_;
  bool open_ = false;
  int started_ = 0;
};

// Only a guard against a hang, never a measure of speed: a test whose wait
// outlives it fails.
constexpr auto kHangGuard = 10s;

// Cancels `group` if it is still running after kHangGuard, and says so.
class HangGuard {
 public:
  HangGuard(Loop& loop, TaskGroup& group) : timer_(loop) {
    timer_.Start(kHangGuard, [this, &group] {
      fired_ = true;
      group.Cancel();
    });
  }
  bool fired() const { return fired_; }

 private:
  Timer timer_;
  bool fired_ = false;
};

// Lets the loop turn until `gate` has seen `n` lookups start.
Task<void> UntilStarted(Loop& loop, Gate& gate, int n, const HangGuard& guard) {
  while (gate.started() < n && !guard.fired()) (void)co_await SleepFor(loop, 1ms);
}

Task<void> ResolveNameInto(HostResolver& resolver, std::string host, std::string port,
                           StatusOr<std::vector<SocketAddress>>* out) {
  *out = co_await resolver.Resolve(std::move(host), std::move(port));
}

// True once the workers have let go of `gate` (they share the Lookup that
// holds it, freed with the last of them): they have all ended.
bool WorkersEnded(const std::shared_ptr<Gate>& gate) {
  const auto give_up = std::chrono::steady_clock::now() + kHangGuard;
  while (gate.use_count() > 1 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  return gate.use_count() == 1;
}

TEST(HostResolverTest, TheLoopRunsWhileALookupBlocksAndCancellationEndsTheWait) {
  auto loop = MakeLoop();
  auto gate = std::make_shared<Gate>();
  auto resolver = std::make_unique<HostResolver>(*loop, Gate::LookupThrough(gate));
  StatusOr<std::vector<SocketAddress>> first = InternalError("not run");
  StatusOr<std::vector<SocketAddress>> cancelled = InternalError("not run");
  int ticks = 0;
  loop->BlockOn([&]() -> Task<void> {
    TaskGroup lookups(*loop);
    lookups.Spawn(ResolveNameInto(*resolver, "slow.test", "1", &first));
    TaskGroup doomed(*loop);
    doomed.Spawn(ResolveNameInto(*resolver, "slow.test", "2", &cancelled));
    // The loop goes on turning (timers fire) while the lookups are blocked.
    while (ticks < 5) {
      (void)co_await SleepFor(*loop, 2ms);
      ++ticks;
    }
    co_await doomed.CancelAndJoin();
    EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
    gate->Open();
    co_await lookups.Join();
  }());
  EXPECT_EQ(ticks, 5);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)[0].ToString(), "192.0.2.7:1");
  // The cancelled lookup was skipped, or ran to its end and its result was
  // dropped; destroying the resolver then the loop leaves nothing behind.
  resolver.reset();
  loop.reset();
  EXPECT_TRUE(WorkersEnded(gate));
}

TEST(HostResolverTest, ALookupThatBlocksDoesNotHoldUpAnotherName) {
  auto loop = MakeLoop();
  auto gate = std::make_shared<Gate>();
  StatusOr<std::vector<SocketAddress>> slow = InternalError("not run");
  StatusOr<std::vector<SocketAddress>> fast = InternalError("not run");
  {
    HostResolver resolver(*loop, Gate::LookupThrough(gate));
    loop->BlockOn([&]() -> Task<void> {
      TaskGroup slow_lookup(*loop);
      slow_lookup.Spawn(ResolveNameInto(resolver, "slow.test", "1", &slow));
      TaskGroup fast_lookup(*loop);
      HangGuard guard(*loop, fast_lookup);
      co_await UntilStarted(*loop, *gate, 1, guard);
      // The slow lookup holds a worker; another name still resolves.
      fast_lookup.Spawn(ResolveNameInto(resolver, "fast.test", "2", &fast));
      co_await fast_lookup.Join();
      EXPECT_FALSE(guard.fired()) << "the second lookup waited for the blocked one";
      EXPECT_EQ(slow.status().message(), "not run");
      gate->Open();
      co_await slow_lookup.Join();
    }());
  }
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_EQ((*fast)[0].ToString(), "192.0.2.7:2");
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ((*slow)[0].ToString(), "192.0.2.7:1");
  EXPECT_TRUE(WorkersEnded(gate));
}

TEST(HostResolverTest, DestroyingTheResolverResumesRunningAndQueuedLookups) {
  auto loop = MakeLoop();
  auto gate = std::make_shared<Gate>();
  auto resolver = std::make_unique<HostResolver>(*loop, Gate::LookupThrough(gate));
  // Every worker blocked, and one lookup queued behind them.
  constexpr int kLookups = HostResolver::kMaxWorkers + 1;
  std::vector<StatusOr<std::vector<SocketAddress>>> results(kLookups, InternalError("not run"));
  bool guard_fired = false;
  loop->BlockOn([&]() -> Task<void> {
    TaskGroup lookups(*loop);
    HangGuard guard(*loop, lookups);
    for (int i = 0; i < kLookups; ++i) {
      lookups.Spawn(ResolveNameInto(*resolver, "slow.test", std::to_string(i), &results[i]));
    }
    co_await UntilStarted(*loop, *gate, HostResolver::kMaxWorkers, guard);
    (void)co_await SleepFor(*loop, 5ms);
    EXPECT_EQ(gate->started(), HostResolver::kMaxWorkers) << "more workers than the bound";
    resolver.reset();
    co_await lookups.Join();
    guard_fired = guard.fired();
  }());
  EXPECT_FALSE(guard_fired) << "a lookup kept waiting on a destroyed resolver";
  for (const auto& result : results) {
    EXPECT_EQ(result.status().code(), StatusCode::kCancelled) << result.status().ToString();
  }
  // The blocked lookups end now, for a resolver that is gone: their results
  // are dropped, and the loop keeps turning without them.
  gate->Open();
  EXPECT_TRUE(WorkersEnded(gate));
  loop->BlockOn([&]() -> Task<void> { (void)co_await SleepFor(*loop, 5ms); }());
  EXPECT_EQ(gate->started(), HostResolver::kMaxWorkers) << "the queued lookup ran";
}

TEST(HostResolverTest, ALateResultOfADestroyedResolverReachesNoLoop) {
  auto loop = MakeLoop();
  auto gate = std::make_shared<Gate>();
  auto resolver = std::make_unique<HostResolver>(*loop, Gate::LookupThrough(gate));
  StatusOr<std::vector<SocketAddress>> cancelled = InternalError("not run");
  StatusOr<std::vector<SocketAddress>> orphaned = InternalError("not run");
  bool guard_fired = false;
  loop->BlockOn([&]() -> Task<void> {
    TaskGroup lookups(*loop);
    HangGuard guard(*loop, lookups);
    lookups.Spawn(ResolveNameInto(*resolver, "slow.orphaned", "1", &orphaned));
    co_await UntilStarted(*loop, *gate, 1, guard);
    // One more task, cancelled and gone before the resolver goes (its lookup
    // queued or running): nothing that follows may resume its frame.
    TaskGroup doomed(*loop);
    doomed.Spawn(ResolveNameInto(*resolver, "slow.cancelled", "2", &cancelled));
    (void)co_await SleepFor(*loop, 1ms);
    co_await doomed.CancelAndJoin();
    resolver.reset();
    co_await lookups.Join();
    guard_fired = guard.fired();
  }());
  EXPECT_FALSE(guard_fired) << "a lookup kept waiting on a destroyed resolver";
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled) << cancelled.status().ToString();
  EXPECT_EQ(orphaned.status().code(), StatusCode::kCancelled) << orphaned.status().ToString();
  // The loop goes too; only then do the lookups return. A result posted now
  // would reach freed memory (ASan) or race with the loop's end (TSan).
  loop.reset();
  gate->Open();
  EXPECT_TRUE(WorkersEnded(gate));
}

}  // namespace
}  // namespace uxds
