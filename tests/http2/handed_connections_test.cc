// A server without a listening socket serving connections another loop
// accepted and handed over as descriptors (TcpSocket::ReleaseFd, then
// Server::ServeAccepted on the server's loop): calls on them work, they
// count against max_connections, and one handed over after Shutdown() has
// started is closed at once. Real clients on loopback, the acceptor on a
// loop thread of its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "http2_test_util.h"
#include "runtime/tcp_socket.h"
#include "uxds/runtime.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;

// A descriptor on its way to another loop: closed if never taken.
struct HandedFd {
  explicit HandedFd(int fd) : fd(fd) {}
  ~HandedFd() {
    if (fd >= 0) ::close(fd);
  }
  int fd;
};

// Accepts on its own loop thread and hands each connection to `server` on
// `server_loop`.
class Acceptor {
 public:
  Acceptor(Loop& server_loop, Server& server) {
    thread_ = std::move(*LoopThread::Start());
    thread_->RunSync([&] {
      listener_ = std::move(*TcpListener::Bind(thread_->loop(), SocketAddress::Loopback4(0)));
      thread_->loop().Spawn(AcceptAll(server_loop, server));
    });
  }
  ~Acceptor() {
    thread_->RunSync([&] { listener_->Close(); });
    while (!ended_.load()) usleep(1000);
    thread_->RunSync([&] { listener_.reset(); });
  }
  SocketAddress address() const { return SocketAddress::Loopback4(listener_->port()); }
  int handed() const { return handed_.load(); }

 private:
  Task<void> AcceptAll(Loop& server_loop, Server& server) {
    while (true) {
      StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener_->Accept();
      if (!socket.ok()) break;
      auto fd = std::make_shared<HandedFd>((*socket)->ReleaseFd());
      EXPECT_EQ((*socket)->fd(), -1);
      server_loop.Post([fd, &server_loop, &server] {
        server.ServeAccepted(std::make_unique<TcpSocket>(server_loop, std::exchange(fd->fd, -1)));
      });
      ++handed_;
    }
    ended_ = true;
  }

  std::unique_ptr<LoopThread> thread_;
  std::unique_ptr<TcpListener> listener_;
  std::atomic<int> handed_{0};
  std::atomic<bool> ended_{false};
};

// A connection the server closes without a byte fails Connect() at once
// (UNAVAILABLE); one it never answered would fail it with
// DEADLINE_EXCEEDED after this.
ClientConnectionOptions QuickConnect() {
  ClientConnectionOptions options;
  options.connect_timeout = milliseconds(5000);
  return options;
}

TEST_F(Http2Test, AServerServesConnectionsAcceptedOnAnotherLoop) {
  ServerOptions options;
  options.max_connections = 2;
  std::unique_ptr<Server> server = Server::WithoutListener(*loop_, registry_, options);
  Acceptor acceptor(*loop_, *server);
  auto body = [&]() -> Task<void> {
    auto first = co_await ClientConnection::Connect(*loop_, acceptor.address(), {});
    CO_ASSERT_OK(first);
    StatusOr<std::string> echoed = co_await UnaryCall(**first, "/test.Echo/Unary", "handed");
    CO_ASSERT_OK(echoed);
    EXPECT_EQ(*echoed, "handed");
    auto second = co_await ClientConnection::Connect(*loop_, acceptor.address(), {});
    CO_ASSERT_OK(second);
    StatusOr<std::string> also = co_await UnaryCall(**second, "/test.Echo/Unary", "too");
    CO_ASSERT_OK(also);
    EXPECT_EQ(server->connection_count(), 2u);
    // A third is over max_connections: closed without a byte, so the
    // client never sees the server's SETTINGS.
    auto third = co_await ClientConnection::Connect(*loop_, acceptor.address(), QuickConnect());
    EXPECT_EQ(third.status().code(), StatusCode::kUnavailable) << third.status().ToString();
    const bool counted =
        co_await WaitUntil(*loop_, [&] { return server->refused_connections() == 1; });
    EXPECT_TRUE(counted);
    co_await (*first)->Close();
    co_await (*second)->Close();
    co_await server->Shutdown(milliseconds(100));
    EXPECT_EQ(server->connection_count(), 0u);
    // Handed over after Shutdown(): closed at once, without a byte.
    auto late = co_await ClientConnection::Connect(*loop_, acceptor.address(), QuickConnect());
    EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().ToString();
    const bool all_handed = co_await WaitUntil(*loop_, [&] { return acceptor.handed() == 4; });
    EXPECT_TRUE(all_handed);
    EXPECT_EQ(server->connection_count(), 0u);
    EXPECT_EQ(server->refused_connections(), 1u);
  };
  loop_->BlockOn(body());
  // Also when an assertion ended the body early (a second call returns at
  // once).
  loop_->BlockOn(server->Shutdown(milliseconds(100)));
}

}  // namespace
}  // namespace uxds::http2::testing
