// Server-side connection management (gRFC A9): max_connection_idle drains
// connections with no call open, max_connection_age drains every connection
// after a while and max_connection_age_grace bounds its calls in flight.
// Durations are short; every wait has a generous upper bound and nothing
// asserts how fast anything happened.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http2/client_call.h"
#include "http2_test_util.h"
#include "runtime/tcp_socket.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr uint8_t kGoAway = 0x7;

// A client that sends the preface and an empty SETTINGS frame, then only
// reads: it never starts a call, never ACKs and never answers a PING.
struct SilentClient {
  std::unique_ptr<TcpSocket> socket;
  std::string received;
  bool ended = false;  // EOF or a read error

  // GOAWAY frames received, each as its error code.
  std::vector<uint32_t> GoAwayCodes() const {
    std::vector<uint32_t> codes;
    size_t at = 0;
    while (received.size() - at >= 9) {
      auto byte = [&](size_t i) { return static_cast<uint8_t>(received[at + i]); };
      const size_t length = (size_t{byte(0)} << 16) | (size_t{byte(1)} << 8) | byte(2);
      if (received.size() - at - 9 < length) break;
      if (byte(3) == kGoAway && length >= 8) {
        codes.push_back((uint32_t{byte(13)} << 24) | (uint32_t{byte(14)} << 16) |
                        (uint32_t{byte(15)} << 8) | byte(16));
      }
      at += 9 + length;
    }
    return codes;
  }
};

Task<Status> StartSilentClient(Loop& loop, const SocketAddress& address, SilentClient& client) {
  StatusOr<std::unique_ptr<TcpSocket>> socket =
      co_await TcpSocket::Connect(loop, address, milliseconds(5000));
  if (!socket.ok()) co_return socket.status();
  client.socket = *std::move(socket);
  std::string hello(kClientPreface);
  hello.append("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);  // SETTINGS, no parameters
  co_return co_await client.socket->Write(
      std::span(reinterpret_cast<const uint8_t*>(hello.data()), hello.size()));
}

Task<void> ReadUntilEnd(SilentClient& client) {
  std::vector<uint8_t> buffer(4096);
  while (true) {
    StatusOr<size_t> n = co_await client.socket->Read(buffer);
    if (!n.ok() || *n == 0) break;
    client.received.append(reinterpret_cast<const char*>(buffer.data()), *n);
  }
  client.ended = true;
}

TEST_F(Http2Test, DefaultsReclaimIdleConnectionsAndKeepAgeUnlimited) {
  const ServerOptions defaults;
  EXPECT_EQ(defaults.max_connection_idle, kDefaultMaxConnectionIdle);
  EXPECT_GT(defaults.max_connection_idle.count(), 0);
  EXPECT_EQ(defaults.max_connection_age.count(), 0);
  EXPECT_EQ(defaults.max_connection_age_grace, kNoTimeLimit);
}

// The case: clients that only send the preface and SETTINGS held
// every max_connections slot for good. Now each is drained (GOAWAY, then
// EOF) and its slot serves a new client.
TEST_F(Http2Test, IdleConnectionsAreDrainedAndTheirSlotsServeNewClients) {
  ServerOptions options;
  options.max_connections = 2;
  options.max_connection_idle = milliseconds(300);
  RunWithServer(
      [&]() -> Task<void> {
        SilentClient silent[2];  // outlives the readers
        TaskGroup readers(*loop_);
        co_await RunChecksThenJoin(readers, [&]() -> Task<void> {
          for (SilentClient& client : silent) {
            const Status started = co_await StartSilentClient(*loop_, server_address(), client);
            CO_ASSERT_OK(started);
            readers.Spawn(ReadUntilEnd(client));
          }
          const bool both_served =
              co_await WaitUntil(*loop_, [&] { return server_->connection_count() == 2; });
          CO_ASSERT_TRUE(both_served);
          const bool ended =
              co_await WaitUntil(*loop_, [&] { return silent[0].ended && silent[1].ended; });
          CO_ASSERT_TRUE(ended);
          for (const SilentClient& client : silent) {
            const std::vector<uint32_t> codes = client.GoAwayCodes();
            EXPECT_FALSE(codes.empty()) << "no GOAWAY before EOF";
            for (uint32_t code : codes) EXPECT_EQ(code, 0u);  // NO_ERROR
          }
          const bool freed =
              co_await WaitUntil(*loop_, [&] { return server_->connection_count() == 0; });
          CO_ASSERT_TRUE(freed);
          EXPECT_EQ(server_->refused_connections(), 0u);
          // Both slots serve real clients again.
          auto first = co_await Connect();
          CO_ASSERT_OK(first);
          auto second = co_await Connect();
          CO_ASSERT_OK(second);
          StatusOr<std::string> one = co_await UnaryCall(**first, "/test.Echo/Unary", "one");
          CO_ASSERT_OK(one);
          StatusOr<std::string> two = co_await UnaryCall(**second, "/test.Echo/Unary", "two");
          CO_ASSERT_OK(two);
          EXPECT_EQ(server_->refused_connections(), 0u);
          co_await (*first)->Close();
          co_await (*second)->Close();
        });
      },
      options);
}

// A9: idle means no outstanding call. A streaming call open for many times
// max_connection_idle keeps its connection; once it ends, the idle clock
// starts and the connection is drained.
TEST_F(Http2Test, ConnectionWithAStreamingCallOpenIsNotIdle) {
  ServerOptions options;
  options.max_connection_idle = milliseconds(200);
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect();
        CO_ASSERT_OK(conn);
        std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Bidi");
        for (int i = 0; i < 5; ++i) {
          const Status written = co_await call->Write("ping " + std::to_string(i));
          CO_ASSERT_OK(written);
          std::optional<std::string> echoed = co_await call->Read();
          CO_ASSERT_TRUE(echoed.has_value());
          // Far past max_connection_idle with the call open.
          const Status slept = co_await SleepFor(*loop_, milliseconds(300));
          CO_ASSERT_OK(slept);
          EXPECT_TRUE((*conn)->usable()) << "drained with a call open";
        }
        const Status done = co_await call->WritesDone();
        CO_ASSERT_OK(done);
        while (std::optional<std::string> rest = co_await call->Read()) {
        }
        const Status finished = co_await call->Finish();
        EXPECT_TRUE(finished.ok()) << finished.ToString();
        EXPECT_EQ(probe_->handlers_finished, 1);
        // Now idle: GOAWAY, then the server closes the connection.
        const bool closed = co_await WaitUntil(*loop_, [&] { return (*conn)->closed(); });
        EXPECT_TRUE(closed);
        co_await (*conn)->Close();
      },
      options);
}

// max_connection_age drains a busy connection: GOAWAY at once, the call in
// flight finishes within max_connection_age_grace, then the connection
// closes; a new connection is served.
TEST_F(Http2Test, MaxConnectionAgeDrainsABusyConnectionAndItsCallFinishes) {
  ServerOptions options;
  options.max_connection_idle = milliseconds(0);
  options.max_connection_age = milliseconds(300);
  options.max_connection_age_grace = milliseconds(60'000);
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect();
        CO_ASSERT_OK(conn);
        std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Hold");
        const Status sent = co_await call->WritesDone();
        CO_ASSERT_OK(sent);
        const bool started =
            co_await WaitUntil(*loop_, [&] { return probe_->handlers_started > 0; });
        CO_ASSERT_TRUE(started);
        const bool goaway = co_await WaitUntil(*loop_, [&] { return !(*conn)->usable(); });
        CO_ASSERT_TRUE(goaway);
        EXPECT_FALSE(call->finished());
        // A new call on the draining connection is refused; the one in
        // flight goes on.
        std::unique_ptr<ClientCall> late = (*conn)->StartCall("/test.Echo/Unary");
        EXPECT_TRUE(late->finished());
        EXPECT_EQ(late->status().code(), StatusCode::kUnavailable);
        probe_->release.Set();
        const Status finished = co_await call->Finish();
        EXPECT_TRUE(finished.ok()) << finished.ToString();
        EXPECT_EQ(probe_->handlers_finished, 1);
        EXPECT_EQ(probe_->handlers_cancelled, 0);
        const bool closed = co_await WaitUntil(*loop_, [&] { return (*conn)->closed(); });
        EXPECT_TRUE(closed);
        co_await (*conn)->Close();
        auto next = co_await Connect();
        CO_ASSERT_OK(next);
        StatusOr<std::string> echoed = co_await UnaryCall(**next, "/test.Echo/Unary", "again");
        CO_ASSERT_OK(echoed);
        co_await (*next)->Close();
      },
      options);
}

// After max_connection_age_grace the calls still running are cancelled and
// the connection closes.
TEST_F(Http2Test, MaxConnectionAgeGraceCancelsCallsStillRunning) {
  ServerOptions options;
  options.max_connection_idle = milliseconds(0);
  options.max_connection_age = milliseconds(200);
  options.max_connection_age_grace = milliseconds(200);
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect();
        CO_ASSERT_OK(conn);
        std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Hold");
        const Status sent = co_await call->WritesDone();
        CO_ASSERT_OK(sent);
        // Never released: the grace ends it.
        const bool ended = co_await WaitUntil(*loop_, [&] { return call->finished(); });
        CO_ASSERT_TRUE(ended);
        const Status finished = co_await call->Finish();
        EXPECT_TRUE(finished.code() == StatusCode::kUnavailable ||
                    finished.code() == StatusCode::kCancelled)
            << finished.ToString();
        const bool cancelled =
            co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 1; });
        EXPECT_TRUE(cancelled);
        EXPECT_EQ(probe_->handlers_finished, 0);
        const bool closed = co_await WaitUntil(*loop_, [&] { return (*conn)->closed(); });
        EXPECT_TRUE(closed);
        co_await (*conn)->Close();
      },
      options);
}

// Keepalive PINGs the client answers do not make a connection busy.
TEST_F(Http2Test, KeepalivePingsDoNotKeepAConnectionFromBeingIdle) {
  ServerOptions options;
  options.keepalive_time = milliseconds(50);
  options.max_connection_idle = milliseconds(400);
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect();
        CO_ASSERT_OK(conn);
        const bool closed = co_await WaitUntil(*loop_, [&] { return (*conn)->closed(); });
        EXPECT_TRUE(closed);
        co_await (*conn)->Close();
      },
      options);
}

}  // namespace
}  // namespace uxds::http2::testing
