// Both runtime backends, each forced through LoopOptions whatever
// UXDS_RUNTIME says: the same TCP semantics over real loopback sockets
// (cancellation, short writes, peer resets, accept fairness, descriptor
// reuse), the epoll connect's deadline, and how a backend is chosen and
// reported.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/tcp_socket.h"
#include "runtime/tcp_socket_epoll.h"
#include "uxds/log.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;

class BackendTest : public ::testing::TestWithParam<RuntimeBackend> {
 protected:
  void SetUp() override {
    LoopOptions options;
    options.backend = GetParam();
    auto loop = Loop::Create(options);
    if (!loop.ok() && GetParam() == RuntimeBackend::kIoUring) {
      GTEST_SKIP() << "io_uring unavailable here: " << loop.status().ToString();
    }
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    ASSERT_EQ(loop_->backend(), GetParam());
  }
  std::unique_ptr<Loop> loop_;
};

struct Pair {
  std::unique_ptr<TcpListener> listener;
  std::unique_ptr<TcpSocket> client;
  std::unique_ptr<TcpSocket> server;
};

Task<Pair> Connected(Loop& loop) {
  Pair p;
  auto listener = TcpListener::Bind(loop, SocketAddress::Loopback4(0));
  EXPECT_TRUE(listener.ok());
  if (!listener.ok()) co_return p;
  p.listener = std::move(*listener);
  auto client = co_await TcpSocket::Connect(loop, p.listener->local_address(), 5s);
  auto server = co_await p.listener->Accept();
  EXPECT_TRUE(client.ok() && server.ok());
  if (client.ok()) p.client = std::move(*client);
  if (server.ok()) p.server = std::move(*server);
  co_return p;
}

// One read of up to 16 bytes, its result in `out`.
Task<void> ReadInto(TcpSocket& socket, StatusOr<size_t>& out) {
  std::vector<uint8_t> buf(16);
  out = co_await socket.Read(buf);
}

// 16 MiB in one Write() against a reader taking 64 KiB at a time: the kernel
// takes it in many short writes, and every byte arrives in order.
TEST_P(BackendTest, AWriteLargerThanTheSocketBuffersArrivesWhole) {
  loop_->BlockOn([](Loop& l) -> Task<void> {
    Pair p = co_await Connected(l);
    if (!p.server) co_return;
    std::vector<uint8_t> data(16 << 20);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
    Status written;
    TaskGroup writer(l);
    writer.Spawn([](TcpSocket& s, std::span<const uint8_t> d, Status& out) -> Task<void> {
      out = co_await s.Write(d);
      (void)co_await s.ShutdownWrite();
    }(*p.client, data, written));
    std::vector<uint8_t> got;
    std::vector<uint8_t> buf(64 << 10);
    while (true) {
      auto n = co_await p.server->Read(buf);
      EXPECT_TRUE(n.ok()) << n.status().ToString();
      if (!n.ok() || *n == 0) break;
      got.insert(got.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(*n));
    }
    co_await writer.Join();
    EXPECT_TRUE(written.ok()) << written.ToString();
    EXPECT_TRUE(got == data) << got.size() << " bytes of " << data.size();
  }(*loop_));
}

// A read (the peer sends nothing) and a write (blocked: the peer reads
// nothing) pending on one socket when their group is cancelled both end with
// CANCELLED; the connection stays usable.
TEST_P(BackendTest, CancellingATaskEndsItsPendingReadAndBlockedWrite) {
  loop_->BlockOn([](Loop& l) -> Task<void> {
    Pair p = co_await Connected(l);
    if (!p.server) co_return;
    StatusOr<size_t> read_result = size_t{0};
    Status write_result;
    std::vector<uint8_t> big(64 << 20, 'x');
    TaskGroup group(l);
    group.Spawn(ReadInto(*p.client, read_result));
    group.Spawn([](TcpSocket& s, std::span<const uint8_t> d, Status& out) -> Task<void> {
      out = co_await s.Write(d);
    }(*p.client, big, write_result));
    (void)co_await SleepFor(l, 20ms);
    co_await group.CancelAndJoin();
    EXPECT_EQ(read_result.status().code(), StatusCode::kCancelled)
        << read_result.status().ToString();
    EXPECT_EQ(write_result.code(), StatusCode::kCancelled) << write_result.ToString();
    // The client's buffers are full of 'x'; the server still reads them.
    std::vector<uint8_t> buf(16);
    auto n = co_await p.server->Read(buf);
    EXPECT_TRUE(n.ok() && *n > 0 && buf[0] == 'x');
  }(*loop_));
}

// A peer that resets the connection (SO_LINGER 0) makes the pending read
// fail with UNAVAILABLE naming the peer, and a later write fail too.
TEST_P(BackendTest, APeerResetFailsReadsAndWrites) {
  loop_->BlockOn([](Loop& l) -> Task<void> {
    Pair p = co_await Connected(l);
    if (!p.server) co_return;
    StatusOr<size_t> read_result = size_t{0};
    TaskGroup reader(l);
    reader.Spawn(ReadInto(*p.client, read_result));
    (void)co_await SleepFor(l, 5ms);
    linger reset{1, 0};
    setsockopt(p.server->fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    p.server->Close();
    co_await reader.Join();
    EXPECT_EQ(read_result.status().code(), StatusCode::kUnavailable)
        << read_result.status().ToString();
    std::vector<uint8_t> data(1024, 'y');
    Status w = co_await p.client->Write(data);
    EXPECT_FALSE(w.ok());
  }(*loop_));
}

// 200 connections wait in the backlog and one task accepts them all in a
// tight loop: another task still gets turns in between.
TEST_P(BackendTest, ADeepAcceptBacklogDoesNotStarveOtherTasks) {
  constexpr int kConnections = 200;
  auto listener = TcpListener::Bind(*loop_, SocketAddress::Loopback4(0));
  ASSERT_TRUE(listener.ok());
  std::vector<int> clients;
  for (int i = 0; i < kConnections; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const SocketAddress& a = (*listener)->local_address();
    ASSERT_EQ(connect(fd, a.sockaddr_ptr(), a.size()), 0);
    clients.push_back(fd);
  }
  int ticks_when_done = -1;
  loop_->BlockOn([](Loop& l, TcpListener& lis, int& ticks_when_done) -> Task<void> {
    int ticks = 0;
    bool done = false;
    TaskGroup group(l);
    group.Spawn([](Loop& l, int& ticks, bool& done) -> Task<void> {
      while (!done) {
        ++ticks;
        co_await l.Yield();
      }
    }(l, ticks, done));
    std::vector<std::unique_ptr<TcpSocket>> accepted;
    while (accepted.size() < kConnections) {
      auto s = co_await lis.Accept();
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (!s.ok()) break;
      accepted.push_back(std::move(*s));
    }
    ticks_when_done = ticks;
    done = true;
    co_await group.Join();
  }(*loop_, **listener, ticks_when_done));
  for (int fd : clients) close(fd);
  // At most 32 connections per turn: at least 200 / 32 turns for the other task.
  EXPECT_GE(ticks_when_done, 5);
}

// A socket closed with a read pending, and a new socket that takes the same
// descriptor number: data for the new one reaches it, and only it.
TEST_P(BackendTest, AReusedDescriptorNumberNeverReachesTheClosedSocket) {
  loop_->BlockOn([](Loop& l) -> Task<void> {
    Pair first = co_await Connected(l);
    if (!first.server) co_return;
    const int old_fd = first.server->fd();
    StatusOr<size_t> old_read = size_t{0};
    TaskGroup group(l);
    group.Spawn(ReadInto(*first.server, old_read));
    (void)co_await SleepFor(l, 1ms);
    first.server->Close();
    co_await group.Join();
    EXPECT_EQ(old_read.status().code(), StatusCode::kCancelled);
    first.server.reset();
    auto client = co_await TcpSocket::Connect(l, first.listener->local_address(), 5s);
    auto server = co_await first.listener->Accept();
    EXPECT_TRUE(client.ok() && server.ok());
    if (!client.ok() || !server.ok()) co_return;
    EXPECT_EQ((*client)->fd(), old_fd);  // the kernel hands out the lowest free number
    std::vector<uint8_t> hello = {'h', 'i'};
    EXPECT_TRUE((co_await (*server)->Write(hello)).ok());
    std::vector<uint8_t> buf(16);
    auto n = co_await (*client)->Read(buf);
    EXPECT_TRUE(n.ok() && *n == 2);
  }(*loop_));
}

// A raw loopback listener with one connection waiting in its backlog, for
// an accept4() in the middle of a turn: the kernel gives the accepted socket
// the lowest free descriptor number, as an accept completion or a socket()
// elsewhere in the process would.
struct WaitingConnection {
  WaitingConnection() {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const SocketAddress any = SocketAddress::Loopback4(0);
    EXPECT_EQ(::bind(listener, any.sockaddr_ptr(), any.size()), 0);
    EXPECT_EQ(::listen(listener, 4), 0);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(listener, reinterpret_cast<sockaddr*>(&ss), &len);
    client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&ss), len), 0);
  }
  ~WaitingConnection() {
    for (int fd : {listener, client, accepted}) {
      if (fd >= 0) ::close(fd);
    }
  }
  void Accept() { accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC); }
  int listener = -1;
  int client = -1;
  int accepted = -1;
};

// Everything `fd` (blocking) reads until the peer shuts its side down.
std::string ReadToEnd(int fd) {
  std::string all;
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return all;
    all.append(buf, static_cast<size_t>(n));
  }
}

// A send queued, its socket closed and a connection accepted, all in one
// turn: the send names the old descriptor by number, and on io_uring it
// reaches the kernel only at the next submit. The new connection must get
// none of the old connection's bytes.
TEST_P(BackendTest, ASendQueuedBeforeCloseNeverReachesAConnectionAcceptedInTheSameTurn) {
  loop_->BlockOn([](Loop& l) -> Task<void> {
    Pair old = co_await Connected(l);
    if (!old.server) co_return;
    WaitingConnection fresh;
    const std::string secret(100, 'S');
    Status write_result;
    TaskGroup group(l);
    // Both run in the next pass, in this order, with no submit between.
    group.Spawn([](TcpSocket& s, const std::string& d, Status& out) -> Task<void> {
      out = co_await s.Write(std::span(reinterpret_cast<const uint8_t*>(d.data()), d.size()));
    }(*old.server, secret, write_result));
    group.Spawn([](TcpSocket& s, WaitingConnection& fresh) -> Task<void> {
      s.Close();
      fresh.Accept();
      co_return;
    }(*old.server, fresh));
    co_await group.Join();
    EXPECT_GE(fresh.accepted, 0);
    // Whatever was sent has been sent: the writer has returned.
    ::shutdown(fresh.accepted, SHUT_WR);
    EXPECT_EQ(ReadToEnd(fresh.client), "") << "the old connection's bytes reached the new one";
  }(*loop_));
}

// A read queued, its socket closed and a connection accepted in one turn,
// with the new peer's bytes already there: they are the new connection's
// alone, never read into the old connection's buffer.
TEST_P(BackendTest, AReadQueuedBeforeCloseNeverTakesTheBytesOfAConnectionAcceptedInTheSameTurn) {
  loop_->BlockOn([](Loop& l) -> Task<void> {
    Pair old = co_await Connected(l);
    if (!old.server) co_return;
    WaitingConnection fresh;
    const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    EXPECT_EQ(::send(fresh.client, preface.data(), preface.size(), 0),
              static_cast<ssize_t>(preface.size()));
    StatusOr<size_t> old_read = size_t{0};
    std::vector<uint8_t> old_buf(64);
    TaskGroup group(l);
    group.Spawn([](TcpSocket& s, std::vector<uint8_t>& buf, StatusOr<size_t>& out) -> Task<void> {
      out = co_await s.Read(buf);
    }(*old.server, old_buf, old_read));
    group.Spawn([](TcpSocket& s, WaitingConnection& fresh) -> Task<void> {
      s.Close();
      fresh.Accept();
      co_return;
    }(*old.server, fresh));
    co_await group.Join();
    EXPECT_FALSE(old_read.ok() && *old_read > 0)
        << "the old socket read " << *old_read << " bytes of the new connection";
    EXPECT_GE(fresh.accepted, 0);
    ::shutdown(fresh.client, SHUT_WR);
    EXPECT_EQ(ReadToEnd(fresh.accepted), preface);
  }(*loop_));
}

// An accept queued, its listener closed and a new listener made in one
// turn: the connection waiting on the new listener is the new listener's.
TEST_P(BackendTest, AnAcceptQueuedBeforeCloseNeverTakesANewListenersConnection) {
  loop_->BlockOn([](Loop& l) -> Task<void> {
    auto old = TcpListener::Bind(l, SocketAddress::Loopback4(0));
    EXPECT_TRUE(old.ok());
    if (!old.ok()) co_return;
    WaitingConnection* fresh = nullptr;
    StatusOr<std::unique_ptr<TcpSocket>> old_accept = CancelledError("not run");
    TaskGroup group(l);
    group.Spawn([](TcpListener& lis, StatusOr<std::unique_ptr<TcpSocket>>& out) -> Task<void> {
      out = co_await lis.Accept();
    }(**old, old_accept));
    group.Spawn([](TcpListener& lis, WaitingConnection*& fresh) -> Task<void> {
      lis.Close();
      // Takes the lowest free numbers: the listener's first.
      fresh = new WaitingConnection();
      co_return;
    }(**old, fresh));
    co_await group.Join();
    std::unique_ptr<WaitingConnection> owned(fresh);
    EXPECT_FALSE(old_accept.ok()) << "the closed listener accepted a connection";
    // Let any stale accept that reached the kernel complete first.
    (void)co_await SleepFor(l, 10ms);
    // Non-blocking: a taken connection must fail the test, not hang it.
    ::fcntl(owned->listener, F_SETFL, O_NONBLOCK);
    const int accepted = ::accept4(owned->listener, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_GE(accepted, 0) << "the new listener's connection was taken: " << std::strerror(errno);
    if (accepted >= 0) ::close(accepted);
  }(*loop_));
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest,
                         ::testing::Values(RuntimeBackend::kIoUring, RuntimeBackend::kEpoll),
                         [](const auto& info) {
                           return std::string(RuntimeBackendName(info.param));
                         });

// The epoll connect's wait, woken by a writable edge that is not a connection
// in the very turn its deadline expires. A TCP socket that was never
// connected gives that edge for real: epoll reports it writable (EPOLLOUT |
// EPOLLHUP) as soon as it is registered, while SO_ERROR is 0 and
// getpeername() says "not connected", as for a spurious edge during a
// connect. With the deadline due at once, the loop's next turn first hands
// the edge to the waiting connect, then fires the deadline, whose wake finds
// no waiter; the connect must still end, with ETIMEDOUT.
TEST(EpollConnectTest, ADeadlineInTheTurnOfASpuriousWritableEdgeEndsTheConnect) {
  LoopOptions options;
  options.backend = RuntimeBackend::kEpoll;
  auto loop = Loop::Create(options);
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(fd, 0) << strerror(errno);
  int result = 0;
  bool hung = false;
  (*loop)->BlockOn([](Loop& l, int fd, int& result, bool& hung) -> Task<void> {
    TaskGroup connect(l);
    // Only a guard against a hang, never a measure of speed.
    Timer guard(l);
    guard.Start(10s, [&] {
      hung = true;
      connect.Cancel();
    });
    connect.Spawn([](Loop& l, int fd, int& result) -> Task<void> {
      result = co_await detail::AwaitEpollConnect(l, fd, Loop::Clock::now());
    }(l, fd, result));
    co_await connect.Join();
  }(**loop, fd, result, hung));
  ::close(fd);
  EXPECT_FALSE(hung) << "the connect outlived its deadline";
  EXPECT_EQ(result, ETIMEDOUT) << strerror(result);
}

// Captures log lines for the life of the object.
class CapturedLog {
 public:
  CapturedLog() {
    SetLogSink([this](LogSeverity, std::string_view message) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(message);
    });
  }
  ~CapturedLog() { SetLogSink({}); }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(RuntimeBackendChoiceTest, AForcedBackendIsLoggedOnceWithItsReason) {
  CapturedLog log;
  LoopOptions options;
  options.backend = RuntimeBackend::kEpoll;
  auto loop = Loop::Create(options);
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  EXPECT_EQ((*loop)->backend(), RuntimeBackend::kEpoll);
  EXPECT_EQ(log.lines(),
            std::vector<std::string>{"uxds: runtime: epoll (forced by LoopOptions::backend)"});
}

TEST(RuntimeBackendChoiceTest, UxdsRuntimeForcesABackendAndRejectsOtherValues) {
  const char* saved = std::getenv("UXDS_RUNTIME");
  const std::string previous = saved != nullptr ? saved : "";
  {
    setenv("UXDS_RUNTIME", "epoll", 1);
    CapturedLog log;
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    EXPECT_EQ((*loop)->backend(), RuntimeBackend::kEpoll);
    EXPECT_EQ(log.lines(),
              std::vector<std::string>{"uxds: runtime: epoll (forced by UXDS_RUNTIME=epoll)"});
  }
  setenv("UXDS_RUNTIME", "kqueue", 1);
  auto bad = Loop::Create();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "UXDS_RUNTIME: \"kqueue\" is neither \"io_uring\" nor \"epoll\"");
  if (saved != nullptr) {
    setenv("UXDS_RUNTIME", previous.c_str(), 1);
  } else {
    unsetenv("UXDS_RUNTIME");
  }
}

}  // namespace
}  // namespace uxds
