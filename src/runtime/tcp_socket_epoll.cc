// The epoll backend's TCP operations: non-blocking syscalls first, a wait for
// readiness (src/runtime/epoll_poller.h) only after EAGAIN.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/epoll_poller.h"
#include "runtime/tcp_socket.h"
#include "runtime/tcp_socket_epoll.h"

namespace uxds {
namespace {

using detail::FdWatch;
using Direction = detail::FdWatch::Direction;

bool WouldBlock(int error) { return error == EAGAIN || error == EWOULDBLOCK; }

bool Cancelled(CancelState* cancel) { return cancel != nullptr && cancel->cancelled(); }

// Operations that complete at once spend the loop's per-turn budget; once it
// is spent the task yields, as every io_uring operation does.
struct YieldIfBudgetSpent {
  explicit YieldIfBudgetSpent(Loop& loop) : loop(loop) {}
  bool await_ready() const { return !loop.epoll()->SpendImmediateBudget(); }
  void await_suspend(std::coroutine_handle<> h) const { loop.Schedule(h); }
  void await_resume() const noexcept {}
  Loop& loop;
};

// The connect deadline, in the loop's timer heap: it wakes the waiting
// connect with ETIMEDOUT, and records that it expired. The wake alone can be
// lost: a writable edge in the same turn has already woken the connect (the
// poller runs before the timers), a wake of no waiter is dropped, and the
// connect, finding itself not connected yet, would wait again for a deadline
// that never comes back.
struct ConnectDeadline final : detail::TimerNode {
  explicit ConnectDeadline(FdWatch& watch) : watch(watch) {}
  void OnExpired() override {
    expired = true;
    watch.Wake(Direction::kWrite, -ETIMEDOUT);
  }
  FdWatch& watch;
  bool expired = false;
};

// No deadline is further away than this (and now + it never overflows).
constexpr std::chrono::milliseconds kLongestConnectTimeout = std::chrono::hours(24 * 365);

}  // namespace

Task<int> detail::AwaitEpollConnect(Loop& loop, int fd, Loop::Clock::time_point deadline) {
  FdWatch watch(*loop.epoll(), fd);
  ConnectDeadline timer(watch);
  loop.ArmTimer(&timer, deadline);
  int error = 0;
  while (true) {
    const int waited = co_await watch.Wait(Direction::kWrite);
    if (waited < 0) {
      error = -waited;
      break;
    }
    socklen_t len = sizeof error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
    if (error != 0) break;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0) break;
    // Writable and no error, but not connected yet: a spurious edge. It may
    // have come in the turn the deadline expired, whose wake then found no
    // waiter: the expiry is checked here, after every wake.
    if (timer.expired) {
      error = ETIMEDOUT;
      break;
    }
  }
  loop.DisarmTimer(&timer);
  co_return error;
}

Task<StatusOr<std::unique_ptr<TcpSocket>>> TcpSocket::ConnectEpoll(
    Loop& loop, const SocketAddress& address, std::chrono::milliseconds timeout) {
  std::string what = "connect to " + address.ToString();
  CancelState* cancel = co_await CurrentCancelState();
  if (Cancelled(cancel)) co_return CancelledError(what + ": cancelled");
  int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) co_return ErrnoToStatus(errno, what);
  int error = 0;
  if (::connect(fd, address.sockaddr_ptr(), address.size()) != 0) error = errno;
  // EINTR: the connection goes on in the background, as with EINPROGRESS.
  if (error == EINPROGRESS || error == EINTR) {
    error = co_await detail::AwaitEpollConnect(
        loop, fd, Loop::Clock::now() + std::min(timeout, kLongestConnectTimeout));
  }
  if (error != 0) {
    ::close(fd);
    if (error == ECANCELED) co_return CancelledError(what + ": cancelled");
    if (error == ETIMEDOUT) {
      co_return DeadlineExceededError(what + ": timed out after " +
                                      std::to_string(timeout.count()) + " ms");
    }
    co_return ErrnoToStatus(error, what);
  }
  auto socket = std::make_unique<TcpSocket>(loop, fd);
  // Named now: once the peer resets the connection, getpeername() fails,
  // and the read or write error that follows must still say where to.
  socket->peer_name_ = address.ToString();
  co_return socket;
}

Task<StatusOr<size_t>> TcpSocket::ReadEpoll(std::span<uint8_t> buf) {
  CancelState* cancel = co_await CurrentCancelState();
  co_await YieldIfBudgetSpent(loop_);
  while (true) {
    if (closed_) co_return CancelledError("read from closed socket");
    if (Cancelled(cancel)) co_return ErrnoToStatus(ECANCELED, "read from " + PeerName());
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n >= 0) co_return static_cast<size_t>(n);
    const int error = errno;
    if (error == EINTR) continue;
    if (!WouldBlock(error)) co_return ErrnoToStatus(error, "read from " + PeerName());
    const int waited = co_await watch_->Wait(Direction::kRead);
    if (closed_) co_return CancelledError("socket closed");
    if (waited < 0) co_return ErrnoToStatus(-waited, "read from " + PeerName());
  }
}

Task<Status> TcpSocket::WriteEpoll(std::span<const uint8_t> data) {
  CancelState* cancel = co_await CurrentCancelState();
  co_await YieldIfBudgetSpent(loop_);
  while (!data.empty()) {
    if (closed_) co_return CancelledError("write to closed socket");
    if (Cancelled(cancel)) co_return ErrnoToStatus(ECANCELED, "write to " + PeerName());
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      data = data.subspan(static_cast<size_t>(n));  // a short write goes round again
      continue;
    }
    const int error = errno;
    if (error == EINTR) continue;
    if (!WouldBlock(error)) co_return ErrnoToStatus(error, "write to " + PeerName());
    const int waited = co_await watch_->Wait(Direction::kWrite);
    if (closed_) co_return CancelledError("socket closed");
    if (waited < 0) co_return ErrnoToStatus(-waited, "write to " + PeerName());
  }
  co_return OkStatus();
}

Task<StatusOr<std::unique_ptr<TcpSocket>>> TcpListener::AcceptEpoll() {
  CancelState* cancel = co_await CurrentCancelState();
  co_await YieldIfBudgetSpent(loop_);
  while (true) {
    if (fd_ < 0) co_return CancelledError("listener on " + local_.ToString() + " closed");
    if (Cancelled(cancel)) co_return CancelledError("accept cancelled");
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) co_return std::make_unique<TcpSocket>(loop_, fd);
    const int error = errno;
    // ECONNABORTED: that connection is gone, the next may be waiting.
    if (error == EINTR || error == ECONNABORTED) continue;
    // EMFILE and friends: report, and let the caller decide to retry.
    if (!WouldBlock(error)) co_return ErrnoToStatus(error, "accept");
    const int waited = co_await watch_->Wait(Direction::kRead);
    if (fd_ < 0) continue;  // closed: reported at the top
    if (waited == -ECANCELED) co_return CancelledError("accept cancelled");
    if (waited < 0) co_return ErrnoToStatus(-waited, "accept");
  }
}

}  // namespace uxds
