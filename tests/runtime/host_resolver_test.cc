// HostResolver: host names resolved on a worker thread, results posted back
// to the loop; the loop never waits for a lookup.
#include "runtime/host_resolver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>

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

// A lookup that blocks until the test lets it go.
std::promise<void>* g_release = nullptr;
std::atomic<int> g_lookups{0};
StatusOr<std::vector<SocketAddress>> BlockingLookup(const std::string&, const std::string& port) {
  ++g_lookups;
  static std::shared_future<void> released = g_release->get_future().share();
  released.wait();
  return std::vector<SocketAddress>{*SocketAddress::Parse("192.0.2.7:" + port)};
}

Task<void> ResolveInto(HostResolver* resolver, std::string port,
                       StatusOr<std::vector<SocketAddress>>* out) {
  *out = co_await resolver->Resolve("slow.test", port);
}

TEST(HostResolverTest, TheLoopRunsWhileALookupBlocksAndCancellationEndsTheWait) {
  std::promise<void> release;
  g_release = &release;
  auto loop = MakeLoop();
  auto resolver = std::make_unique<HostResolver>(*loop, &BlockingLookup);
  StatusOr<std::vector<SocketAddress>> first = InternalError("not run");
  StatusOr<std::vector<SocketAddress>> cancelled = InternalError("not run");
  int ticks = 0;
  loop->BlockOn([&]() -> Task<void> {
    TaskGroup lookups(*loop);
    lookups.Spawn(ResolveInto(resolver.get(), "1", &first));
    TaskGroup doomed(*loop);
    doomed.Spawn(ResolveInto(resolver.get(), "2", &cancelled));
    // The loop goes on turning (timers fire) while the worker is blocked.
    while (ticks < 5) {
      (void)co_await SleepFor(*loop, 2ms);
      ++ticks;
    }
    co_await doomed.CancelAndJoin();
    EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
    release.set_value();
    co_await lookups.Join();
  }());
  EXPECT_EQ(ticks, 5);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)[0].ToString(), "192.0.2.7:1");
  // The cancelled lookup still ran to its end on the worker, and its result
  // was dropped; destroying the resolver then the loop leaves nothing behind.
  resolver.reset();
  loop->BlockOn([&]() -> Task<void> { (void)co_await SleepFor(*loop, 20ms); }());
  EXPECT_GE(g_lookups.load(), 1);
}

}  // namespace
}  // namespace uxds
