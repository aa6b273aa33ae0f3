#include <liburing.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cassert>
#include <chrono>
#include <deque>
#include <thread>

#include "runtime/epoll_poller.h"
#include "runtime/tcp_socket.h"

namespace uxds {

// The epoll backend yields after the same number (EpollPoller's budget).
constexpr int kAcceptsPerTurn = 32;
// Accepted connections a multishot accept may queue before nobody takes
// them: at this many it is cancelled, and re-armed once Accept() has taken
// them all. Without it a flood would move the whole listen backlog, again
// and again, into descriptors of this process (and to EMFILE) while the
// server is busy; with it the rest wait in the kernel's backlog.
constexpr size_t kMaxQueuedAccepts = 64;

// The accept request: multishot where the kernel has it, so one submission
// keeps delivering connections; accepted sockets queue until Accept() takes
// them. It owns the listening descriptor on io_uring: an accept prepared in
// this turn names it by number, so it is closed only once no accept is in
// flight (see ReleaseListenFdIfIdle).
class TcpListener::AcceptOp final : public detail::IoOp {
 public:
  AcceptOp(Loop& loop, int listen_fd, bool multishot)
      : IoOp(loop), listen_fd_(listen_fd), multishot_(multishot) {}
  ~AcceptOp() override {
    // Destroyed by its listener when idle, or by the loop after its last CQE.
    assert(!in_flight());
    CloseReadyFds();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  // Stops accepting: cancels the request in flight; the listening
  // descriptor goes with its last completion.
  void Close() {
    closed = true;
    loop_.CancelOp(this);
    CloseReadyFds();
    ReleaseListenFdIfIdle();
  }

  void CloseReadyFds() {
    for (int fd : ready_fds) ::close(fd);
    ready_fds.clear();
  }

  void Arm() {
    if (in_flight() || closed) return;
    pausing = false;
    io_uring_sqe* sqe = loop_.PrepareSqe(this);
    if (multishot_) {
      io_uring_prep_multishot_accept(sqe, listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    } else {
      io_uring_prep_accept(sqe, listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    }
  }

  void OnComplete(int result, unsigned /*flags*/) override {
    if (closed) {
      // Accepted as the cancel raced it: nobody will take it.
      if (result >= 0) ::close(result);
      ReleaseListenFdIfIdle();
    } else if (result >= 0) {
      ready_fds.push_back(result);
      if (ready_fds.size() >= kMaxQueuedAccepts && in_flight() && !pausing) {
        // CQEs already on their way still arrive (a few more), then the
        // last one, ECANCELED.
        pausing = true;
        loop_.CancelOp(this);
      }
    } else if (result == -EINVAL && multishot_ && ready_fds.empty()) {
      // Multishot accept not supported after all: fall back to single-shot.
      multishot_ = false;
    } else if (result != -ECANCELED) {
      error = ErrnoToStatus(-result, "accept");
    }
    if (waiter) loop_.Schedule(std::exchange(waiter, {}));
  }

  std::deque<int> ready_fds;
  // Connections handed out since the last wait: one multishot batch can
  // queue hundreds, and handing them all out in one turn would starve the
  // loop's other tasks.
  int taken_without_waiting = 0;
  Status error;
  std::coroutine_handle<> waiter;
  bool closed = false;
  bool pausing = false;  // cancelled for a full queue (kMaxQueuedAccepts)

 private:
  void ReleaseListenFdIfIdle() {
    if (!closed || in_flight() || listen_fd_ < 0) return;
    ::close(listen_fd_);
    listen_fd_ = -1;
  }

  int listen_fd_;
  bool multishot_;
};

namespace {

// Waits for the AcceptOp to deliver; cancellable by the waiting task.
struct AcceptWait : CancelState::Callback {
  AcceptWait(TcpListener::AcceptOpRef op, Loop& loop) : op(op), loop(loop) {}
  bool await_ready() const noexcept { return false; }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) {
    CancelState* cancel = detail::CancelStateOf(h);
    if (cancel != nullptr && cancel->cancelled()) {
      cancelled = true;
      return false;
    }
    op.set_waiter(h);
    if (cancel != nullptr) cancel->Register(this);
    return true;
  }
  void await_resume() { Unregister(); }
  void OnCancel() override {
    cancelled = true;
    if (auto h = op.take_waiter()) loop.Schedule(h);
  }
  TcpListener::AcceptOpRef op;
  Loop& loop;
  bool cancelled = false;
};

// bind(), tried again on EADDRINUSE for up to `grace`. A process killed by a
// signal while io_uring requests named its listening socket (our multishot
// accept does, always) keeps that socket listening until the kernel tears
// its ring down, asynchronously, after the process has been reaped:
// measured at up to ~20 ms, and 3 of 4 runs of 50 SIGKILL restarts of
// `uxds control-plane` on one port met it. An epoll program's socket is
// gone when it is reaped, and so is one that exits normally: a supervisor
// restarting a server at once must find the same. A port that another
// process really holds costs this much longer to fail.
constexpr auto kAddressInUseRetryEvery = std::chrono::milliseconds(5);

bool BindWaitingForARingTeardown(int fd, const SocketAddress& address,
                                 std::chrono::milliseconds grace) {
  const auto give_up = std::chrono::steady_clock::now() + grace;
  while (::bind(fd, address.sockaddr_ptr(), address.size()) != 0) {
    if (errno != EADDRINUSE || std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(kAddressInUseRetryEvery);
  }
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<TcpListener>> TcpListener::Bind(
    Loop& loop, const SocketAddress& address, int backlog,
    std::chrono::milliseconds address_in_use_grace, bool share_port) {
  std::string what = "listen on " + address.ToString();
  // Non-blocking on epoll (accept4 must not block the loop); blocking on
  // io_uring, which polls by itself.
  const int nonblocking = loop.epoll() != nullptr ? SOCK_NONBLOCK : 0;
  int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | nonblocking, 0);
  if (fd < 0) return ErrnoToStatus(errno, what);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (share_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    Status s = ErrnoToStatus(errno, "SO_REUSEPORT on " + address.ToString());
    ::close(fd);
    return s;
  }
  if (!BindWaitingForARingTeardown(fd, address, address_in_use_grace)) {
    Status s = ErrnoToStatus(errno, "bind " + address.ToString());
    ::close(fd);
    return s;
  }
  if (::listen(fd, backlog) != 0) {
    Status s = ErrnoToStatus(errno, what);
    ::close(fd);
    return s;
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  return std::unique_ptr<TcpListener>(new TcpListener(
      loop, fd, SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len)));
}

TcpListener::TcpListener(Loop& loop, int fd, SocketAddress local)
    : loop_(loop), fd_(fd), local_(local) {
  if (loop.epoll() != nullptr) {
    watch_ = std::make_unique<detail::FdWatch>(*loop.epoll(), fd);
  } else {
    accept_op_ = std::make_unique<AcceptOp>(loop, fd, loop.has_multishot_accept());
  }
}

TcpListener::~TcpListener() {
  Close();
  // Still in flight: the loop keeps the op (and so the descriptor) until
  // its last completion.
  if (accept_op_ != nullptr && accept_op_->in_flight()) loop_.AdoptOrphan(std::move(accept_op_));
}

void TcpListener::Close() {
  if (fd_ < 0) return;
  if (watch_ != nullptr) {
    // A pending Accept() wakes with ECANCELED and finds the listener closed.
    // epoll has no request in the kernel: the descriptor goes now.
    watch_->Unregister();
    ::close(fd_);
    fd_ = -1;
    return;
  }
  fd_ = -1;  // the AcceptOp owns the descriptor and closes it
  accept_op_->Close();
  if (accept_op_->waiter) loop_.Schedule(std::exchange(accept_op_->waiter, {}));
}

Task<StatusOr<std::unique_ptr<TcpSocket>>> TcpListener::Accept() {
  return watch_ != nullptr ? AcceptEpoll() : AcceptUring();
}

Task<StatusOr<std::unique_ptr<TcpSocket>>> TcpListener::AcceptUring() {
  AcceptOp& op = *accept_op_;
  while (true) {
    if (op.closed) co_return CancelledError("listener on " + local_.ToString() + " closed");
    if (!op.ready_fds.empty()) {
      if (++op.taken_without_waiting > kAcceptsPerTurn) {
        op.taken_without_waiting = 0;
        co_await loop_.Yield();
        continue;
      }
      int fd = op.ready_fds.front();
      op.ready_fds.pop_front();
      co_return std::make_unique<TcpSocket>(loop_, fd);
    }
    if (!op.error.ok()) {
      // EMFILE and friends: report, and let the caller decide to retry.
      Status e = std::exchange(op.error, OkStatus());
      co_return e;
    }
    op.Arm();
    op.taken_without_waiting = 0;
    AcceptWait wait(AcceptOpRef{&op}, loop_);
    co_await wait;
    if (wait.cancelled) co_return CancelledError("accept cancelled");
  }
}

size_t TcpListener::queued_connections() const {
  return accept_op_ != nullptr ? accept_op_->ready_fds.size() : 0;
}

void TcpListener::AcceptOpRef::set_waiter(std::coroutine_handle<> h) { op->waiter = h; }
std::coroutine_handle<> TcpListener::AcceptOpRef::take_waiter() {
  return std::exchange(op->waiter, {});
}

}  // namespace uxds
