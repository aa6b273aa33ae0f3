// The xDS-enabled server's owners of tasks against the ownership rule
// (DESIGN.md, "Ownership"): a Shutdown() awaited by two tasks at once runs
// one teardown and returns to both, and the first to return may destroy the
// owner right there, while the other is still queued to resume.
#include <gtest/gtest.h>

#include <future>
#include <memory>

#include "http2/client_connection.h"
#include "http2/service_registry.h"
#include "runtime/socket_address.h"
#include "server/serving_config.h"
#include "server/serving_listener.h"
#include "support/owner_teardown.h"
#include "support/poll_until.h"
#include "xds_server_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

// What the test's Hold handler saw.
struct HeldCalls {
  explicit HeldCalls(Loop& loop) : release(loop) {}
  Event release;
  int started = 0;
  int cancelled = 0;
};

// "/test.Hold/Hold" waits until `held.release` is set or the call is
// cancelled.
std::shared_ptr<http2::ServiceRegistry> HoldingRegistry(HeldCalls& held) {
  auto registry = std::make_shared<http2::ServiceRegistry>();
  registry->Register("/test.Hold/Hold", [&held](http2::ServerCall& call) -> Task<Status> {
    ++held.started;
    const Status waited = co_await held.release.Wait();
    if (!waited.ok() || call.cancelled()) {
      ++held.cancelled;
      co_return CancelledError("hold cancelled");
    }
    co_return OkStatus();
  });
  return registry;
}

// A configuration whose default filter chain takes every connection and
// serves it with `registry`.
std::shared_ptr<const server::ServingConfig> ServeEveryConnection(
    std::shared_ptr<const http2::ServiceRegistry> registry) {
  ListenerResource::TcpListener tcp;
  tcp.default_filter_chain = FilterChain{};
  auto listener = std::make_shared<ListenerResource>();
  listener->listener = std::move(tcp);
  auto config = std::make_shared<server::ServingConfig>();
  config->listener = std::move(listener);
  config->matcher = std::make_unique<const FilterChainMatcher>(config->tcp_listener());
  config->default_chain_registry = std::move(registry);
  return config;
}

class ServingListenerLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<Loop>> loop = Loop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = *std::move(loop);
    held_ = std::make_unique<HeldCalls>(*loop_);
    StatusOr<SocketAddress> address =
        SocketAddress::FromIpAndPort("127.0.0.1", XdsServerTest::FreePort());
    ASSERT_TRUE(address.ok()) << address.status().ToString();
    address_ = *address;
    listener_ = std::make_unique<server::ServingListener>(
        *loop_, address_, server::ServingListenerOptions(),
        [this](Status status) { bind_status_ = std::move(status); });
    listener_->Apply(ServeEveryConnection(HoldingRegistry(*held_)));
  }
  void TearDown() override {
    if (listener_ != nullptr) {
      loop_->BlockOn(listener_->Shutdown(milliseconds(0)));
      listener_.reset();
    }
    held_.reset();
    loop_.reset();
  }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<HeldCalls> held_;
  SocketAddress address_;
  std::unique_ptr<server::ServingListener> listener_;
  std::optional<Status> bind_status_;
};

// Both callers wait for the accept task to end; the first to return
// destroys the listener while the second is still queued behind it.
TEST_F(ServingListenerLifecycleTest, ShutdownAwaitedTwiceMayBeDestroyedByTheFirstToReturn) {
  loop_->BlockOn([&]() -> Task<void> {
    const bool bound = co_await PollUntil(*loop_, [&] { return bind_status_.has_value(); });
    EXPECT_TRUE(bound && bind_status_->ok()) << (bound ? bind_status_->ToString() : "no bind");
    const TwoTeardownCallers callers = co_await AwaitTeardownTwiceAndDestroy(
        *loop_, listener_, [](server::ServingListener& l) { return l.Shutdown(milliseconds(20)); });
    EXPECT_TRUE(callers.destroyed_by_first);
    EXPECT_EQ(callers.returned, 2);
    EXPECT_EQ(listener_, nullptr);
  }());
}

// The same with a call in flight, drained by the one teardown, and callers
// whose tasks are cancelled: that does not cut the teardown short.
TEST_F(ServingListenerLifecycleTest, CancelledShutdownCallersWaitForTheDrain) {
  loop_->BlockOn([&]() -> Task<void> {
    auto connection = co_await http2::ClientConnection::Connect(*loop_, address_,
                                                                http2::ClientConnectionOptions());
    EXPECT_TRUE(connection.ok()) << connection.status().ToString();
    std::unique_ptr<http2::ClientCall> call;
    if (connection.ok()) {
      call = (*connection)->StartCall("/test.Hold/Hold");
      const bool started = co_await PollUntil(*loop_, [&] { return held_->started == 1; });
      EXPECT_TRUE(started);
    }
    const TwoTeardownCallers callers = co_await AwaitTeardownTwiceAndDestroy(
        *loop_, listener_, [](server::ServingListener& l) { return l.Shutdown(milliseconds(20)); },
        TeardownCallers::kCancelled);
    EXPECT_TRUE(callers.destroyed_by_first);
    EXPECT_EQ(callers.returned, 2);
    EXPECT_EQ(listener_, nullptr);
    // One drain ended the held call when its grace expired.
    EXPECT_EQ(held_->cancelled, 1);
    if (call != nullptr) {
      const Status status = co_await call->Finish();
      EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    }
    if (connection.ok()) co_await (*connection)->Close();
  }());
}

ServerListenerSpec OneChain(const std::string& name, uint16_t port) {
  return Listener(name, "127.0.0.1", port, {Chain("only")});
}

// Runs AwaitTeardownTwiceAndDestroy on the server's Shutdown() on the
// control thread; what the callers saw, or nullopt if they did not both
// return.
std::optional<TwoTeardownCallers> ShutdownTwiceAndDestroy(LoopThread& control,
                                                          std::unique_ptr<XdsServer>& server,
                                                          TeardownCallers how) {
  auto result = std::make_shared<std::promise<TwoTeardownCallers>>();
  std::future<TwoTeardownCallers> returned = result->get_future();
  control.RunSync([&] {
    control.loop().Spawn([](Loop& loop, std::unique_ptr<XdsServer>& server, TeardownCallers how,
                            std::shared_ptr<std::promise<TwoTeardownCallers>> out) -> Task<void> {
      out->set_value(co_await AwaitTeardownTwiceAndDestroy(
          loop, server, [](XdsServer& s) { return s.Shutdown(milliseconds(20)); }, how));
    }(control.loop(), server, how, result));
  });
  if (returned.wait_for(std::chrono::seconds(20)) != std::future_status::ready) return std::nullopt;
  return returned.get();
}

// A connection is open; both callers return only once the one teardown has
// ended, and the first to return destroys the server (its serving thread
// with it) while the second is still queued.
TEST_F(XdsServerTest, ShutdownAwaitedTwiceMayBeDestroyedByTheFirstToReturn) {
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  StartServer(address);
  SetListener(OneChain(ListenerNameFor(address), port_), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  auto connection = client_loop_->BlockOn(
      [](Loop& loop,
         SocketAddress address) -> Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> {
        co_return co_await http2::ClientConnection::Connect(loop, address,
                                                            http2::ClientConnectionOptions());
      }(*client_loop_, *SocketAddress::FromIpAndPort("127.0.0.1", port_)));
  ASSERT_TRUE(connection.ok()) << connection.status().ToString();

  const std::optional<TwoTeardownCallers> callers =
      ShutdownTwiceAndDestroy(*control_, server_, TeardownCallers::kRunning);
  ASSERT_TRUE(callers.has_value()) << "a Shutdown() caller did not return";
  EXPECT_TRUE(callers->destroyed_by_first);
  EXPECT_EQ(callers->returned, 2);
  control_->RunSync([&] { EXPECT_EQ(server_, nullptr); });
  client_loop_->BlockOn((*connection)->Close());
}

// Cancelled callers do not cut the teardown short: when they return, the
// listener has shut down on the serving loop, and the server may go.
TEST_F(XdsServerTest, CancelledShutdownCallersReturnOnlyOnceTheTeardownHasEnded) {
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  StartServer(address);
  SetListener(OneChain(ListenerNameFor(address), port_), "1");
  ASSERT_TRUE(WaitForServing().has_value());

  const std::optional<TwoTeardownCallers> callers =
      ShutdownTwiceAndDestroy(*control_, server_, TeardownCallers::kCancelled);
  ASSERT_TRUE(callers.has_value()) << "a Shutdown() caller did not return";
  EXPECT_TRUE(callers->destroyed_by_first);
  EXPECT_EQ(callers->returned, 2);
  control_->RunSync([&] { EXPECT_EQ(server_, nullptr); });
}

}  // namespace
}  // namespace uxds::testing
