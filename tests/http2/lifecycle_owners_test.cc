// The HTTP/2 owners of tasks against the ownership rule (DESIGN.md,
// "Ownership"): a teardown awaited by two tasks at once runs once and
// returns to both, and the first to return may destroy the owner right
// there; a teardown called after the end returns at once.
#include <gtest/gtest.h>

#include <memory>

#include "http2_test_util.h"
#include "support/owner_teardown.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;
using ::uxds::testing::AwaitTeardownTwiceAndDestroy;
using ::uxds::testing::TeardownCallers;
using ::uxds::testing::TwoTeardownCallers;

// Listens on 127.0.0.1 with the test service; the test owns the server.
std::unique_ptr<Server> ListenOnLoopback(Loop& loop, std::shared_ptr<ServiceRegistry> registry) {
  StatusOr<std::unique_ptr<Server>> server =
      Server::Listen(loop, SocketAddress::Loopback4(0), std::move(registry));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? *std::move(server) : nullptr;
}

// Two Shutdown() callers while Serve() runs and a call is being drained;
// the first to return destroys the server while the second and Serve() are
// still queued to resume.
TEST_F(Http2Test, ServerShutdownAwaitedTwiceMayBeDestroyedByTheFirstToReturn) {
  std::unique_ptr<Server> server = ListenOnLoopback(*loop_, registry_);
  ASSERT_NE(server, nullptr);
  const SocketAddress address = SocketAddress::Loopback4(server->port());
  loop_->BlockOn([&]() -> Task<void> {
    TaskGroup serving(*loop_);
    bool serve_returned = false;
    serving.Spawn([](Server& s, bool& returned) -> Task<void> {
      co_await s.Serve();
      returned = true;
    }(*server, serve_returned));
    co_await RunChecksThenJoin(serving, [&]() -> Task<void> {
      auto conn = co_await ClientConnection::Connect(*loop_, address, ClientConnectionOptions());
      CO_ASSERT_OK(conn);
      std::unique_ptr<ClientCall> held = (*conn)->StartCall("/test.Echo/Hold");
      CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));

      const TwoTeardownCallers callers = co_await AwaitTeardownTwiceAndDestroy(
          *loop_, server, [](Server& s) { return s.Shutdown(milliseconds(20)); });
      EXPECT_TRUE(callers.destroyed_by_first);
      EXPECT_EQ(callers.returned, 2);
      EXPECT_EQ(server, nullptr);
      // One drain ended the held call: its grace expired.
      const Status status = co_await held->Finish();
      EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
      EXPECT_EQ(probe_->handlers_cancelled, 1);
      co_await serving.Join();
      EXPECT_TRUE(serve_returned);
      co_await (*conn)->Close();
    });
  }());
}

// Shutdown() awaited by two tasks that are cancelled, while a call is being
// drained: cancelling a caller does not cut the teardown short, so when
// they return Serve() has left the listener, and the server may be
// destroyed under it.
TEST_F(Http2Test, CancelledShutdownCallersReturnOnlyOnceTheTeardownHasEnded) {
  std::unique_ptr<Server> server = ListenOnLoopback(*loop_, registry_);
  ASSERT_NE(server, nullptr);
  const SocketAddress address = SocketAddress::Loopback4(server->port());
  loop_->BlockOn([&]() -> Task<void> {
    TaskGroup serving(*loop_);
    serving.Spawn(server->Serve());
    co_await RunChecksThenJoin(serving, [&]() -> Task<void> {
      auto conn = co_await ClientConnection::Connect(*loop_, address, ClientConnectionOptions());
      CO_ASSERT_OK(conn);
      std::unique_ptr<ClientCall> held = (*conn)->StartCall("/test.Echo/Hold");
      CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));

      const TwoTeardownCallers callers = co_await AwaitTeardownTwiceAndDestroy(
          *loop_, server, [](Server& s) { return s.Shutdown(milliseconds(20)); },
          TeardownCallers::kCancelled);
      EXPECT_TRUE(callers.destroyed_by_first);
      EXPECT_EQ(callers.returned, 2);
      EXPECT_EQ(server, nullptr);
      const Status status = co_await held->Finish();
      EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
      co_await serving.Join();
      co_await (*conn)->Close();
    });
  }());
}

// After the end, Shutdown() and Serve() return at once: without letting the
// loop run anything else.
TEST_F(Http2Test, ServerShutdownAndServeAfterTheEndReturnAtOnce) {
  std::unique_ptr<Server> server = ListenOnLoopback(*loop_, registry_);
  ASSERT_NE(server, nullptr);
  loop_->BlockOn([&]() -> Task<void> {
    TaskGroup serving(*loop_);
    serving.Spawn(server->Serve());
    co_await loop_->Yield();
    co_await server->Shutdown(milliseconds(20));
    co_await serving.Join();

    TaskGroup later(*loop_);
    bool loop_ran = false;
    later.Spawn([](bool& ran) -> Task<void> {
      ran = true;
      co_return;
    }(loop_ran));
    co_await server->Shutdown(milliseconds(20));
    co_await server->Serve();
    EXPECT_FALSE(loop_ran) << "a call after the end waited";
    co_await later.Join();
  }());
}

// Close() awaited by two tasks; the first to return destroys the
// connection while the second is still queued to resume.
TEST_F(Http2Test, ClientCloseAwaitedTwiceMayBeDestroyedByTheFirstToReturn) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "before close"));
    std::unique_ptr<ClientConnection> owned = *std::move(conn);
    const TwoTeardownCallers callers = co_await AwaitTeardownTwiceAndDestroy(
        *loop_, owned, [](ClientConnection& c) { return c.Close(); });
    EXPECT_TRUE(callers.destroyed_by_first);
    EXPECT_EQ(callers.returned, 2);
    EXPECT_EQ(owned, nullptr);
  });
}

// A Close() after the end returns at once.
TEST_F(Http2Test, ClientCloseAfterTheEndReturnsAtOnce) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    co_await (*conn)->Close();
    TaskGroup later(*loop_);
    bool loop_ran = false;
    later.Spawn([](bool& ran) -> Task<void> {
      ran = true;
      co_return;
    }(loop_ran));
    co_await (*conn)->Close();
    EXPECT_FALSE(loop_ran) << "a Close() after the end waited";
    co_await later.Join();
  });
}

}  // namespace
}  // namespace uxds::http2::testing
