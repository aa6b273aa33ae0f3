// TCP over io_uring: connect, multishot accept, reads/writes, cancellation.
#include <gtest/gtest.h>
#include <liburing.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "runtime/tcp_socket.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Loop> MakeLoop() {
  auto loop = Loop::Create();
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return std::move(*loop);
}

Task<void> EchoUntilEof(std::unique_ptr<TcpSocket> sock) {
  std::vector<uint8_t> buf(16384);
  while (true) {
    auto n = co_await sock->Read(buf);
    if (!n.ok() || *n == 0) break;
    if (!(co_await sock->Write(std::span(buf.data(), *n))).ok()) break;
  }
  (void)co_await sock->ShutdownWrite();
}

Task<void> Serve(TcpListener& listener, TaskGroup& connections, int max_connections) {
  for (int i = 0; i < max_connections; ++i) {
    auto sock = co_await listener.Accept();
    if (!sock.ok()) co_return;
    connections.Spawn(EchoUntilEof(std::move(*sock)));
  }
}

// A listening socket of another owner on `port` (SO_REUSEADDR, as ours):
// the port in use while it is open.
int ListenOnLoopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const SocketAddress address = SocketAddress::Loopback4(port);
  EXPECT_EQ(::bind(fd, address.sockaddr_ptr(), address.size()), 0) << strerror(errno);
  EXPECT_EQ(::listen(fd, 16), 0) << strerror(errno);
  return fd;
}

// A port of loopback in use by another owner's listening socket (the
// port, the socket).
std::pair<uint16_t, int> PortInUse(Loop& loop) {
  auto probe = TcpListener::Bind(loop, SocketAddress::Loopback4(0));
  EXPECT_TRUE(probe.ok());
  const uint16_t port = (*probe)->port();
  probe->reset();
  return {port, ListenOnLoopback(port)};
}

// A port whose listener goes away within TcpListener::kAddressInUseGrace
// (as a killed io_uring process's does once the kernel has torn its ring
// down) is bound: Bind tries again rather than fail at once.
TEST(TcpTest, BindTakesAPortReleasedWithinTheGrace) {
  auto loop = MakeLoop();
  const std::pair<uint16_t, int> in_use = PortInUse(*loop);
  const uint16_t port = in_use.first;
  const int holder = in_use.second;
  std::thread release([holder] {
    std::this_thread::sleep_for(50ms);
    ::close(holder);
  });
  auto bound = TcpListener::Bind(*loop, SocketAddress::Loopback4(port));
  release.join();
  EXPECT_TRUE(bound.ok()) << bound.status().ToString();
}

// A port held for good fails ALREADY_EXISTS, after the grace; with a grace
// of 0 (a caller that retries on its own loop) at once.
TEST(TcpTest, BindOfAPortHeldForGoodFailsAlreadyExists) {
  auto loop = MakeLoop();
  const std::pair<uint16_t, int> in_use = PortInUse(*loop);
  const uint16_t port = in_use.first;
  const int holder = in_use.second;
  for (auto grace : {TcpListener::kAddressInUseGrace, std::chrono::milliseconds(0)}) {
    auto bound = TcpListener::Bind(*loop, SocketAddress::Loopback4(port), 16, grace);
    ASSERT_FALSE(bound.ok());
    EXPECT_EQ(bound.status().code(), StatusCode::kAlreadyExists) << bound.status().ToString();
    EXPECT_NE(bound.status().message().find("EADDRINUSE"), std::string::npos)
        << bound.status().ToString();
  }
  ::close(holder);
}

TEST(TcpTest, EchoManyConnectionsThroughOneListener) {
  auto loop = MakeLoop();
  auto main_task = [](Loop& l) -> Task<void> {
    auto listener = TcpListener::Bind(l, SocketAddress::Loopback4(0));
    EXPECT_TRUE(listener.ok()) << listener.status().ToString();
    if (!listener.ok()) co_return;
    EXPECT_NE((*listener)->port(), 0);
    TaskGroup server(l);
    TaskGroup connections(l);
    constexpr int kConnections = 20;
    server.Spawn(Serve(**listener, connections, kConnections));
    TaskGroup clients(l);
    int ok_count = 0;
    for (int i = 0; i < kConnections; ++i) {
      clients.Spawn([](Loop& l2, SocketAddress addr, int id, int& ok) -> Task<void> {
        auto sock = co_await TcpSocket::Connect(l2, addr, 5s);
        EXPECT_TRUE(sock.ok()) << sock.status().ToString();
        if (!sock.ok()) co_return;
        // Large enough to need several reads and writes.
        std::vector<uint8_t> out(300000 + id);
        for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<uint8_t>(j * 7 + id);
        TaskGroup writer(l2);
        writer.Spawn([](TcpSocket& s, std::vector<uint8_t>& data) -> Task<void> {
          EXPECT_TRUE((co_await s.Write(data)).ok());
          EXPECT_TRUE((co_await s.ShutdownWrite()).ok());
        }(**sock, out));
        std::vector<uint8_t> in;
        std::vector<uint8_t> buf(8192);
        while (true) {
          auto n = co_await (*sock)->Read(buf);
          EXPECT_TRUE(n.ok()) << n.status().ToString();
          if (!n.ok() || *n == 0) break;
          in.insert(in.end(), buf.begin(), buf.begin() + static_cast<long>(*n));
        }
        co_await writer.Join();
        EXPECT_EQ(in, out);
        if (in == out) ++ok;
      }(l, (*listener)->local_address(), i, ok_count));
    }
    co_await clients.Join();
    EXPECT_EQ(ok_count, kConnections);
    co_await server.Join();
    co_await connections.Join();
  };
  loop->BlockOn(main_task(*loop));
}

TEST(TcpTest, ConnectionRefusedIsUnavailable) {
  auto loop = MakeLoop();
  uint16_t port;
  {
    // Bind then close: nothing listens on this port any more.
    auto l = TcpListener::Bind(*loop, SocketAddress::Loopback4(0));
    ASSERT_TRUE(l.ok());
    port = (*l)->port();
  }
  auto sock = loop->BlockOn(TcpSocket::Connect(*loop, SocketAddress::Loopback4(port), 5s));
  ASSERT_FALSE(sock.ok());
  EXPECT_EQ(sock.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(sock.status().message().find("ECONNREFUSED"), std::string::npos)
      << sock.status().ToString();
}

TEST(TcpTest, ConnectTimesOutAgainstAFullAcceptQueue) {
  auto loop = MakeLoop();
  // A listener that never accepts, with the smallest backlog: once its queue
  // is full the kernel drops further SYNs, so a connect can only time out.
  auto listener = TcpListener::Bind(*loop, SocketAddress::Loopback4(0), 0);
  ASSERT_TRUE(listener.ok());
  SocketAddress addr = (*listener)->local_address();
  std::vector<std::unique_ptr<TcpSocket>> filled;
  Status last;
  for (int i = 0; i < 8 && last.ok(); ++i) {
    auto s = loop->BlockOn(TcpSocket::Connect(*loop, addr, 300ms));
    if (s.ok())
      filled.push_back(std::move(*s));
    else
      last = s.status();
  }
  ASSERT_FALSE(last.ok()) << "every connect succeeded";
  EXPECT_EQ(last.code(), StatusCode::kDeadlineExceeded) << last.ToString();
  EXPECT_NE(last.message().find("timed out after 300 ms"), std::string::npos) << last.ToString();
}

// Fails the next `g_failed_submits` submits with EINTR, as a signal would.
std::atomic<int> g_failed_submits{0};
int SubmitFailingSome(io_uring* ring) {
  if (g_failed_submits.fetch_sub(1) > 0) return -EINTR;
  return io_uring_submit(ring);
}

// A connect and its link timeout must go in one submission. With the
// submission queue one entry short and the submit that makes room failing
// once, the connect used to go out alone: against a full accept queue it
// then waited for the kernel's SYN retries (minutes), not for its timeout.
TEST(TcpTest, AConnectKeepsItsTimeoutWhenASubmitFails) {
  LoopOptions options;
  options.backend = RuntimeBackend::kIoUring;
  options.queue_entries = 2;
  auto created = Loop::Create(options);
  if (!created.ok()) GTEST_SKIP() << "io_uring unavailable: " << created.status().ToString();
  Loop& loop = **created;
  auto listener = TcpListener::Bind(loop, SocketAddress::Loopback4(0), 0);
  ASSERT_TRUE(listener.ok());
  const SocketAddress addr = (*listener)->local_address();
  std::vector<std::unique_ptr<TcpSocket>> filled;
  Status last;
  for (int i = 0; i < 8 && last.ok(); ++i) {
    auto s = loop.BlockOn(TcpSocket::Connect(loop, addr, 300ms));
    if (s.ok())
      filled.push_back(std::move(*s));
    else
      last = s.status();
  }
  ASSERT_EQ(last.code(), StatusCode::kDeadlineExceeded) << "the accept queue did not fill";
  Status connect_result;
  loop.BlockOn([](Loop& l, const SocketAddress& addr, Status& out) -> Task<void> {
    TaskGroup group(l);
    // A guard far beyond the timeout: without it a lost link would hang here.
    group.Spawn([](Loop& l, TaskGroup& group) -> Task<void> {
      const Status slept = co_await SleepFor(l, 10s);
      if (slept.ok()) group.Cancel();
    }(l, group));
    group.Spawn(
        [](Loop& l, TaskGroup& group, const SocketAddress& addr, Status& out) -> Task<void> {
          // One entry of the two taken, and the submit that makes room fails once.
          io_uring_prep_nop(l.PrepareSqe(nullptr));
          g_failed_submits = 1;
          detail::SetIoUringSubmitForTesting(&SubmitFailingSome);
          auto s = co_await TcpSocket::Connect(l, addr, 200ms);
          detail::SetIoUringSubmitForTesting(nullptr);
          out = s.status();
          group.Cancel();  // ends the guard
        }(l, group, addr, out));
    co_await group.Join();
  }(loop, addr, connect_result));
  EXPECT_LT(g_failed_submits.load(), 0) << "the failing submit was never tried";
  EXPECT_EQ(connect_result.code(), StatusCode::kDeadlineExceeded) << connect_result.ToString();
  EXPECT_NE(connect_result.message().find("timed out after 200 ms"), std::string::npos)
      << connect_result.ToString();
}

TEST(TcpTest, CloseAndCancellationEndPendingOperations) {
  auto loop = MakeLoop();
  auto main_task = [](Loop& l) -> Task<void> {
    auto listener = TcpListener::Bind(l, SocketAddress::Loopback4(0));
    EXPECT_TRUE(listener.ok());
    auto client = co_await TcpSocket::Connect(l, (*listener)->local_address(), 5s);
    auto server = co_await (*listener)->Accept();
    EXPECT_TRUE(client.ok() && server.ok());
    if (!client.ok() || !server.ok()) co_return;

    // A read pending on a socket that gets closed completes with CANCELLED.
    StatusOr<size_t> read_result = size_t{0};
    TaskGroup reader(l);
    reader.Spawn([](TcpSocket& s, StatusOr<size_t>& out) -> Task<void> {
      std::vector<uint8_t> buf(16);
      out = co_await s.Read(buf);
    }(**server, read_result));
    (void)co_await SleepFor(l, 1ms);
    (*server)->Close();
    co_await reader.Join();
    EXPECT_EQ(read_result.status().code(), StatusCode::kCancelled);

    // The peer sees EOF.
    std::vector<uint8_t> buf(16);
    auto n = co_await (*client)->Read(buf);
    EXPECT_TRUE(n.ok() && *n == 0);

    // A pending accept is ended by cancelling its task.
    StatusOr<std::unique_ptr<TcpSocket>> accepted = Status(StatusCode::kUnknown, "unset");
    TaskGroup acceptor(l);
    acceptor.Spawn([](TcpListener& lis, StatusOr<std::unique_ptr<TcpSocket>>& out) -> Task<void> {
      out = co_await lis.Accept();
    }(**listener, accepted));
    (void)co_await SleepFor(l, 1ms);
    co_await acceptor.CancelAndJoin();
    EXPECT_EQ(accepted.status().code(), StatusCode::kCancelled);
  };
  loop->BlockOn(main_task(*loop));
}

TEST(SocketAddressTest, ParsesAndPrintsBothFamilies) {
  auto v4 = SocketAddress::Parse("127.0.0.1:8080");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->ToString(), "127.0.0.1:8080");
  auto v6 = SocketAddress::Parse("[::1]:443");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->ToString(), "[::1]:443");
  EXPECT_EQ(v6->port(), 443);
  EXPECT_EQ(SocketAddress::Parse("localhost:80").status().message(),
            "address \"localhost:80\": \"localhost\" is not an IPv4 or IPv6 address");
  EXPECT_EQ(SocketAddress::Parse("1.2.3.4").status().message(),
            "address \"1.2.3.4\": missing port");
  EXPECT_EQ(SocketAddress::Parse("1.2.3.4:99999").status().message(),
            "address \"1.2.3.4:99999\": bad port");
}

}  // namespace
}  // namespace uxds

namespace uxds {
namespace {

size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

TEST(TcpTest, ShutdownWithWorkInFlightLeaksNoDescriptor) {
  const size_t before = OpenDescriptors();
  {
    auto loop = MakeLoop();
    auto listener = TcpListener::Bind(*loop, SocketAddress::Loopback4(0));
    ASSERT_TRUE(listener.ok());
    SocketAddress address = (*listener)->local_address();
    // Connections, a pending accept, pending reads and a timer, all still in
    // flight when the loop goes away: its destructor cancels and joins them.
    // The accept task owns the listener: it outlives every Accept() call.
    loop->Spawn([](std::unique_ptr<TcpListener> l, Loop& lp) -> Task<void> {
      TaskGroup readers(lp);
      while (true) {
        auto socket = co_await l->Accept();
        if (!socket.ok()) break;
        readers.Spawn([](std::unique_ptr<TcpSocket> s) -> Task<void> {
          std::vector<uint8_t> buf(64);
          auto n = co_await s->Read(buf);
          (void)n;
        }(std::move(*socket)));
      }
      co_await readers.Join();
    }(std::move(*listener), *loop));
    for (int i = 0; i < 3; ++i) {
      loop->Spawn([](Loop& lp, SocketAddress a) -> Task<void> {
        auto socket = co_await TcpSocket::Connect(lp, a, 5s);
        if (!socket.ok()) co_return;
        std::vector<uint8_t> buf(64);
        auto n = co_await (*socket)->Read(buf);
        (void)n;
      }(*loop, address));
    }
    Timer timer(*loop);
    timer.Start(1h, [] {});
    (void)loop->BlockOn(SleepFor(*loop, 20ms));
    timer.Cancel();
  }
  EXPECT_EQ(OpenDescriptors(), before);
}

// A multishot accept that nobody takes from stops at a bounded queue (the
// rest wait in the kernel's backlog) and starts again once Accept() has
// taken what it queued. Clients connect in batches of 10, each followed by
// a loop turn, so the queue can exceed its cap by one batch at most.
TEST(TcpTest, AcceptedConnectionsNotTakenAreBounded) {
  auto loop = MakeLoop();
  auto main_task = [](Loop& l) -> Task<void> {
    auto listener = TcpListener::Bind(l, SocketAddress::Loopback4(0));
    EXPECT_TRUE(listener.ok()) << listener.status().ToString();
    if (!listener.ok()) co_return;
    const SocketAddress address = (*listener)->local_address();
    std::vector<int> clients;
    auto connect_one = [&] {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      EXPECT_GE(fd, 0);
      EXPECT_EQ(::connect(fd, address.sockaddr_ptr(), address.size()), 0);
      clients.push_back(fd);
    };
    connect_one();
    auto first = co_await (*listener)->Accept();  // arms the accept
    EXPECT_TRUE(first.ok()) << first.status().ToString();
    constexpr int kBatches = 20;
    for (int batch = 0; batch < kBatches; ++batch) {
      for (int i = 0; i < 10; ++i) connect_one();
      EXPECT_TRUE((co_await SleepFor(l, 20ms)).ok());
      EXPECT_LE((*listener)->queued_connections(), 64u + 10u);
    }
    // Every connection is still there to be accepted.
    std::vector<std::unique_ptr<TcpSocket>> accepted;
    while (accepted.size() < static_cast<size_t>(kBatches * 10)) {
      auto socket = co_await (*listener)->Accept();
      EXPECT_TRUE(socket.ok()) << socket.status().ToString();
      if (!socket.ok()) break;
      accepted.push_back(*std::move(socket));
    }
    EXPECT_EQ(accepted.size(), static_cast<size_t>(kBatches * 10));
    for (auto& socket : accepted) socket->Close();
    (*first)->Close();
    for (int fd : clients) ::close(fd);
  };
  loop->BlockOn(main_task(*loop));
}

}  // namespace
}  // namespace uxds
