// Deadlines, cancellation, keepalive, GOAWAY drain, and peers that misbehave.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http2/server_connection.h"
#include "http2_test_util.h"
#include "runtime/tcp_socket.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;

std::span<const uint8_t> Bytes(std::string_view s) {
  return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// Everything `socket` receives until the peer closes (or `limit` passes).
Task<std::string> ReadUntilClosed(Loop& loop, TcpSocket& socket, milliseconds limit) {
  std::string received;
  bool timed_out = false;
  Timer timer(loop);
  timer.Start(limit, [&] {
    timed_out = true;
    socket.Close();
  });
  std::vector<uint8_t> buffer(4096);
  while (!timed_out) {
    StatusOr<size_t> n = co_await socket.Read(buffer);
    if (!n.ok() || *n == 0) break;
    received.append(reinterpret_cast<const char*>(buffer.data()), *n);
  }
  EXPECT_FALSE(timed_out) << "the peer did not close the connection";
  co_return received;
}

struct FrameHeader {
  uint32_t length;
  uint8_t type;
  uint32_t stream_id;
  std::string payload;
};

std::vector<FrameHeader> ParseFrames(std::string_view bytes) {
  std::vector<FrameHeader> frames;
  while (bytes.size() >= 9) {
    const auto b = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
    FrameHeader f;
    f.length = (uint32_t{b(0)} << 16) | (uint32_t{b(1)} << 8) | b(2);
    f.type = b(3);
    f.stream_id = ((uint32_t{b(5)} << 24) | (uint32_t{b(6)} << 16) | (uint32_t{b(7)} << 8) | b(8)) &
                  0x7fffffff;
    if (bytes.size() < 9 + f.length) break;
    f.payload = std::string(bytes.substr(9, f.length));
    frames.push_back(f);
    bytes.remove_prefix(9 + f.length);
  }
  return frames;
}

// The error code of the last GOAWAY in `frames`, or -1.
int64_t GoAwayErrorCode(const std::vector<FrameHeader>& frames) {
  int64_t code = -1;
  for (const FrameHeader& f : frames) {
    if (f.type != 7 || f.payload.size() < 8) continue;
    const auto b = [&](size_t i) { return static_cast<uint8_t>(f.payload[i]); };
    code = (int64_t{b(4)} << 24) | (int64_t{b(5)} << 16) | (int64_t{b(6)} << 8) | b(7);
  }
  return code;
}

constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::string_view kEmptySettings("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);

TEST_F(Http2Test, ClientDeadlineExceededCancelsTheServerHandler) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call =
        (*conn)->StartCall("/test.Echo/Hold", {}, Loop::Clock::now() + milliseconds(100));
    const Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status.ToString();
    EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 1; }));
    EXPECT_TRUE(probe_->last_deadline.has_value());
    // A deadline already past fails the call before it starts.
    std::unique_ptr<ClientCall> late =
        (*conn)->StartCall("/test.Echo/Unary", {}, Loop::Clock::now() - milliseconds(1));
    EXPECT_EQ(late->status().code(), StatusCode::kDeadlineExceeded);
    EXPECT_TRUE((*conn)->usable());
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, ClientCancelIsCancelledOnBothSides) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Hold");
    CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));
    call->Cancel();
    const Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kCancelled);
    EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 1; }));
    EXPECT_EQ(probe_->handlers_finished, 0);
    // Destroying an unfinished call cancels it too.
    std::unique_ptr<ClientCall> dropped = (*conn)->StartCall("/test.Echo/Hold");
    CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 2; }));
    dropped.reset();
    EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 2; }));
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, CancellingTheAwaitingTaskCancelsTheCall) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Hold");
    Status observed;
    TaskGroup group(*loop_);
    group.Spawn([](ClientCall& call, Status& out) -> Task<void> { out = co_await call.Finish(); }(
                                                      *call, observed));
    const bool started = co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; });
    EXPECT_TRUE(started);
    co_await group.CancelAndJoin();
    EXPECT_EQ(observed.code(), StatusCode::kCancelled);
    EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 1; }));
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, ServerDrainLetsInFlightCallsFinish) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> held = (*conn)->StartCall("/test.Echo/Hold");
    CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));

    bool shutdown_done = false;
    TaskGroup group(*loop_);
    group.Spawn([](Server& server, bool& done) -> Task<void> {
      co_await server.Shutdown(std::chrono::seconds(20));
      done = true;
    }(*server_, shutdown_done));

    // GOAWAY: the connection takes no new calls, the listener is closed.
    // (No CO_ASSERT while `group` runs: it must be joined.)
    const bool goaway = co_await WaitUntil(*loop_, [&] { return !(*conn)->usable(); });
    EXPECT_TRUE(goaway);
    std::unique_ptr<ClientCall> refused = (*conn)->StartCall("/test.Echo/Unary");
    EXPECT_TRUE(refused->finished());
    EXPECT_EQ(refused->status().code(), StatusCode::kUnavailable);
    auto second = co_await Connect();
    EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();

    // The call in flight is still served.
    EXPECT_FALSE(shutdown_done);
    EXPECT_FALSE((*conn)->closed());
    probe_->release.Set();
    const Status status = co_await held->Finish();
    EXPECT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(probe_->handlers_finished, 1);

    // Then the server closes the connection and Shutdown() completes.
    const Status closed = co_await (*conn)->closed_event().Wait();
    EXPECT_TRUE(closed.ok());
    EXPECT_EQ((*conn)->close_status().code(), StatusCode::kUnavailable);
    co_await group.Join();
    EXPECT_TRUE(shutdown_done);
    EXPECT_EQ(server_->connection_count(), 0u);
  });
}

TEST(ServerShutdownTest, TheServerMayBeDestroyedAsSoonAsShutdownReturns) {
  auto loop = Loop::Create();
  ASSERT_TRUE(loop.ok());
  auto server =
      Server::Listen(**loop, SocketAddress::Loopback4(0), std::make_shared<ServiceRegistry>());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*loop)->BlockOn([](Loop& l, std::unique_ptr<Server> s) -> Task<void> {
    TaskGroup serving(l);
    serving.Spawn(s->Serve());
    // Serve() is now waiting in Accept(); Shutdown() closes the listener,
    // and must not return before Serve() has woken and left it (under ASan
    // a use after free otherwise).
    const Status slept = co_await SleepFor(l, milliseconds(1));
    EXPECT_TRUE(slept.ok());
    co_await s->Shutdown(milliseconds(100));
    s.reset();
    co_await serving.Join();
  }(**loop, std::move(*server)));
}

TEST_F(Http2Test, ServerDrainGraceExpiryEndsRemainingCalls) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> held = (*conn)->StartCall("/test.Echo/Hold");
    CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));
    co_await server_->Shutdown(milliseconds(50));
    const Status status = co_await held->Finish();
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    EXPECT_EQ(probe_->handlers_cancelled, 1);
    EXPECT_TRUE((*conn)->closed());
  });
}

TEST_F(Http2Test, ServerConnectionCloseAndDrainOnAcceptedSockets) {
  // The xDS-enabled server accepts itself and drives ServerConnection.
  auto listener = TcpListener::Bind(*loop_, SocketAddress::Loopback4(0));
  ASSERT_TRUE(listener.ok());
  loop_->BlockOn([&]() -> Task<void> {
    TaskGroup group(*loop_);
    std::vector<std::unique_ptr<ServerConnection>> connections;
    group.Spawn([](TcpListener& listener, Loop& loop, std::shared_ptr<ServiceRegistry> registry,
                   std::vector<std::unique_ptr<ServerConnection>>& out,
                   TaskGroup& group) -> Task<void> {
      const ServerOptions options;
      for (int i = 0; i < 2; ++i) {
        StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener.Accept();
        if (!socket.ok()) co_return;
        out.push_back(ServerConnection::Create(loop, std::move(*socket), registry, options));
        group.Spawn(out.back()->Serve());
      }
    }(**listener, *loop_, registry_, connections, group));

    const SocketAddress address = (*listener)->local_address();
    co_await RunChecksThenJoin(group, [&]() -> Task<void> {
      auto first = co_await ClientConnection::Connect(*loop_, address, ClientConnectionOptions());
      CO_ASSERT_OK(first);
      std::unique_ptr<ClientCall> held = (*first)->StartCall("/test.Echo/Hold");
      CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));
      CO_ASSERT_TRUE(connections.size() == 1);
      EXPECT_EQ(connections[0]->active_calls(), 1u);
      connections[0]->Close();
      const Status closed_call = co_await held->Finish();
      EXPECT_EQ(closed_call.code(), StatusCode::kUnavailable);
      EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 1; }));

      auto second = co_await ClientConnection::Connect(*loop_, address, ClientConnectionOptions());
      CO_ASSERT_OK(second);
      CO_ASSERT_OK(co_await UnaryCall(**second, "/test.Echo/Unary", "before drain"));
      CO_ASSERT_TRUE(connections.size() == 2);
      connections[1]->Drain(milliseconds(5000));
      EXPECT_TRUE(connections[1]->draining());
      const Status closed = co_await (*second)->closed_event().Wait();
      EXPECT_TRUE(closed.ok());
      co_await group.Join();
      EXPECT_TRUE(connections[1]->closed());
      co_await (*first)->Close();
      co_await (*second)->Close();
    });
  }());
}

TEST_F(Http2Test, KeepalivePingsAreAcknowledged) {
  ServerOptions server_options;
  server_options.keepalive_time = milliseconds(10);
  RunWithServer(
      [&]() -> Task<void> {
        ClientConnectionOptions options;
        options.keepalive_time = milliseconds(10);
        options.keepalive_timeout = milliseconds(5000);
        auto conn = co_await Connect(options);
        CO_ASSERT_OK(conn);
        EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return (*conn)->pings_acked() >= 3; }));
        const Status pinged = co_await (*conn)->Ping(milliseconds(5000));
        EXPECT_TRUE(pinged.ok()) << pinged.ToString();
        EXPECT_TRUE((*conn)->usable());
        CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "still alive"));
        co_await (*conn)->Close();
      },
      server_options);
}

TEST_F(Http2Test, UnansweredKeepaliveClosesTheConnection) {
  // A peer that speaks just enough HTTP/2 to connect, then goes silent.
  auto listener = TcpListener::Bind(*loop_, SocketAddress::Loopback4(0));
  ASSERT_TRUE(listener.ok());
  loop_->BlockOn([&]() -> Task<void> {
    TaskGroup group(*loop_);
    group.Spawn([](TcpListener& listener, Loop& loop) -> Task<void> {
      StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener.Accept();
      if (!socket.ok()) co_return;
      const Status wrote = co_await (*socket)->Write(Bytes(kEmptySettings));
      if (!wrote.ok()) co_return;
      (void)co_await ReadUntilClosed(loop, **socket, milliseconds(20000));
    }(**listener, *loop_));
    co_await RunChecksThenJoin(group, [&]() -> Task<void> {
      ClientConnectionOptions options;
      options.keepalive_time = milliseconds(20);
      options.keepalive_timeout = milliseconds(50);
      auto conn = co_await ClientConnection::Connect(*loop_, (*listener)->local_address(), options);
      CO_ASSERT_OK(conn);
      std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Hold");
      const Status status = co_await call->Finish();
      EXPECT_EQ(status.code(), StatusCode::kUnavailable);
      EXPECT_NE(status.message().find("PING"), std::string::npos) << status.ToString();
      EXPECT_TRUE((*conn)->closed());
      co_await group.Join();
    });
  }());
}

TEST_F(Http2Test, GarbageFromAClientClosesOnlyItsConnection) {
  RunWithServer([&]() -> Task<void> {
    auto healthy = co_await Connect();
    CO_ASSERT_OK(healthy);

    auto raw = co_await TcpSocket::Connect(*loop_, server_address(), milliseconds(5000));
    CO_ASSERT_OK(raw);
    const Status wrote =
        co_await (*raw)->Write(Bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n\x01\x02garbage garbage"));
    CO_ASSERT_TRUE(wrote.ok());
    (void)co_await ReadUntilClosed(*loop_, **raw, milliseconds(10000));

    // A valid preface followed by a DATA frame on stream 0: a connection
    // error, answered with GOAWAY PROTOCOL_ERROR.
    auto raw2 = co_await TcpSocket::Connect(*loop_, server_address(), milliseconds(5000));
    CO_ASSERT_OK(raw2);
    std::string bytes(kClientPreface);
    bytes += kEmptySettings;
    bytes += std::string_view("\x00\x00\x01\x00\x00\x00\x00\x00\x00x", 10);
    const Status wrote2 = co_await (*raw2)->Write(Bytes(bytes));
    CO_ASSERT_TRUE(wrote2.ok());
    const std::string received = co_await ReadUntilClosed(*loop_, **raw2, milliseconds(10000));
    EXPECT_EQ(GoAwayErrorCode(ParseFrames(received)), 1);  // PROTOCOL_ERROR

    // Other connections are untouched.
    CO_ASSERT_OK(co_await UnaryCall(**healthy, "/test.Echo/Unary", "fine"));
    auto fresh = co_await Connect();
    CO_ASSERT_OK(fresh);
    CO_ASSERT_OK(co_await UnaryCall(**fresh, "/test.Echo/Unary", "fine"));
    co_await (*healthy)->Close();
    co_await (*fresh)->Close();
  });
}

TEST_F(Http2Test, SilentClientIsDisconnectedAfterTheHandshakeTimeout) {
  ServerOptions options;
  options.handshake_timeout = milliseconds(100);
  RunWithServer(
      [&]() -> Task<void> {
        auto silent = co_await TcpSocket::Connect(*loop_, server_address(), milliseconds(5000));
        CO_ASSERT_OK(silent);
        // We send nothing; the server gives up on us and closes.
        (void)co_await ReadUntilClosed(*loop_, **silent, milliseconds(10000));
        EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return server_->connection_count() == 0; }));
        // A client that speaks up in time is served as usual.
        auto conn = co_await Connect();
        CO_ASSERT_OK(conn);
        CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "hello"));
        co_await (*conn)->Close();
      },
      options);
}

TEST_F(Http2Test, ConnectingToANonHttp2ServerIsUnavailable) {
  auto listener = TcpListener::Bind(*loop_, SocketAddress::Loopback4(0));
  ASSERT_TRUE(listener.ok());
  loop_->BlockOn([&]() -> Task<void> {
    TaskGroup group(*loop_);
    group.Spawn([](TcpListener& listener) -> Task<void> {
      StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener.Accept();
      if (!socket.ok()) co_return;
      (void)co_await (*socket)->Write(
          Bytes("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
      (*socket)->Close();
    }(**listener));
    auto conn = co_await ClientConnection::Connect(*loop_, (*listener)->local_address(),
                                                   ClientConnectionOptions());
    EXPECT_EQ(conn.status().code(), StatusCode::kUnavailable) << conn.status().ToString();
    co_await group.Join();
  }());
}

}  // namespace
}  // namespace uxds::http2::testing
