// Shared pieces of the http2 tests: a loop per test, a test service whose
// handlers report what they saw, and coroutine-friendly assertions.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "http2/client_connection.h"
#include "http2/server.h"
#include "http2/service_registry.h"
#include "runtime/socket_address.h"
#include "uxds/loop.h"

// gtest's ASSERT_* `return;`, which a coroutine cannot: these co_return.
//
// g++ 12.2 miscompiles a coroutine whose first co_await sits in an if/while
// condition and yields a class temporary (`if (!(co_await f()).ok())`): its
// body never runs. Results are therefore always bound to a variable first,
// here and in the library.
#define CO_ASSERT_TRUE(cond)                       \
  do {                                             \
    const bool co_assert_holds_ = (cond);          \
    if (!co_assert_holds_) {                       \
      ADD_FAILURE() << "assertion failed: " #cond; \
      co_return;                                   \
    }                                              \
  } while (0)
#define CO_ASSERT_OK(expr)                                                           \
  do {                                                                               \
    const ::uxds::Status co_assert_status_ = ::uxds::http2::testing::StatusOf(expr); \
    if (!co_assert_status_.ok()) {                                                   \
      ADD_FAILURE() << #expr << ": " << co_assert_status_.ToString();                \
      co_return;                                                                     \
    }                                                                                \
  } while (0)

namespace uxds::http2::testing {

inline Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const StatusOr<T>& s) {
  return s.status();
}

// What the test service's handlers observed, for assertions.
struct ServiceProbe {
  explicit ServiceProbe(Loop& loop) : release(loop) {}
  Event release;  // "/test.Echo/Hold" and ".../ReadLater" wait for it
  int handlers_started = 0;
  int handlers_cancelled = 0;  // saw cancelled() / a CANCELLED operation
  int handlers_finished = 0;
  size_t bytes_read = 0;
  size_t messages_read = 0;
  size_t messages_written = 0;
  std::optional<Loop::Clock::time_point> last_deadline;
  Metadata last_request_metadata;
  std::string last_authority;
  // What "/test.Echo/Unary" saw of its connection and content-type.
  ConnectionInfo last_connection;
  std::string last_content_type;
};

// Methods of the test service (all under /test.Echo/):
//   Unary      echoes one request
//   Bidi       echoes every message until the client half-closes
//   Hold       waits for probe.release or cancellation; counts cancellation
//   ReadLater  waits for probe.release, then reads everything (slow reader)
//   Flood      writes x-count messages of x-size bytes (slow-reader peer)
//   Status     returns the status named by x-code / x-message (or the bytes of
//              x-message-bin) without writing
//   Large      replies with x-size bytes
//   Metadata   echoes x-echo-* request metadata as initial metadata (sent at
//              once) and as trailing metadata, then replies "ok"
//   FailAfter  writes two messages, then fails with ABORTED
std::shared_ptr<ServiceRegistry> MakeTestService(ServiceProbe& probe);

// Runs `checks`, which may stop early at a CO_ASSERT, then cancels and joins
// `group`: a test's background tasks never outlive it.
Task<void> RunChecksThenJoin(TaskGroup& group, std::function<Task<void>()> checks);

// Polls `condition` every millisecond, up to `limit`; true once it holds.
Task<bool> WaitUntil(Loop& loop, std::function<bool()> condition,
                     std::chrono::milliseconds limit = std::chrono::seconds(20));

// A loop per test, a server on 127.0.0.1:0 serving MakeTestService.
class Http2Test : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Runs `body` with the server up (serving in the background); shuts the
  // server down afterwards.
  void RunWithServer(std::function<Task<void>()> body, ServerOptions options = {});
  Task<StatusOr<std::unique_ptr<ClientConnection>>> Connect(ClientConnectionOptions options = {});
  SocketAddress server_address() const { return SocketAddress::Loopback4(server_->port()); }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<ServiceProbe> probe_;
  std::shared_ptr<ServiceRegistry> registry_;
  std::unique_ptr<Server> server_;
};

}  // namespace uxds::http2::testing
