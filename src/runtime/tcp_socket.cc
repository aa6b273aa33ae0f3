#include "runtime/tcp_socket.h"

#include <utility>

#include <liburing.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/epoll_poller.h"
#include "runtime/io_awaiter.h"

namespace uxds {
namespace {

__kernel_timespec ToTimespec(std::chrono::milliseconds d) {
  __kernel_timespec ts{};
  ts.tv_sec = d.count() / 1000;
  ts.tv_nsec = (d.count() % 1000) * 1'000'000;
  return ts;
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

TcpSocket::TcpSocket(Loop& loop, int fd) : loop_(loop), fd_(fd) {
  SetNoDelay(fd_);
  if (loop.epoll() != nullptr) watch_ = std::make_unique<detail::FdWatch>(*loop.epoll(), fd_);
}

TcpSocket::~TcpSocket() {
  // The owner must have waited for pending reads and writes to complete:
  // only then can no request naming fd_ reach the kernel any more.
  assert(pending_read_ == nullptr && pending_write_ == nullptr);
  watch_.reset();  // out of the epoll set before the descriptor goes
  if (fd_ >= 0) ::close(fd_);
}

int TcpSocket::ReleaseFd() {
  assert(pending_read_ == nullptr && pending_write_ == nullptr);
  watch_.reset();  // out of this loop's epoll set: another loop watches it next
  closed_ = true;
  return std::exchange(fd_, -1);
}

void TcpSocket::ReleaseFdIfIdle() {
  // A request prepared in this turn reaches the kernel only at the next
  // submit, and names the descriptor by number: closed now, the number could
  // be handed to a socket accepted or created in between, and the request
  // would read or write that connection. So the number is released once the
  // last request naming it has completed.
  if (!closed_ || fd_ < 0 || pending_read_ != nullptr || pending_write_ != nullptr) return;
  ::close(fd_);
  fd_ = -1;
}

Task<StatusOr<std::unique_ptr<TcpSocket>>> TcpSocket::Connect(Loop& loop,
                                                              const SocketAddress& address,
                                                              std::chrono::milliseconds timeout) {
  if (loop.epoll() != nullptr) return ConnectEpoll(loop, address, timeout);
  return ConnectUring(loop, address, timeout);
}

Task<StatusOr<size_t>> TcpSocket::Read(std::span<uint8_t> buf) {
  return watch_ != nullptr ? ReadEpoll(buf) : ReadUring(buf);
}

Task<Status> TcpSocket::Write(std::span<const uint8_t> data) {
  return watch_ != nullptr ? WriteEpoll(data) : WriteUring(data);
}

Task<StatusOr<std::unique_ptr<TcpSocket>>> TcpSocket::ConnectUring(
    Loop& loop, const SocketAddress& address, std::chrono::milliseconds timeout) {
  std::string what = "connect to " + address.ToString();
  // Blocking mode on purpose: io_uring polls sockets itself, and an
  // O_NONBLOCK socket would make some requests fail with EAGAIN instead.
  int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) co_return ErrnoToStatus(errno, what);
  __kernel_timespec ts = ToTimespec(timeout);
  CancelState* cancel = co_await CurrentCancelState();
  loop.ReserveSqes(2);
  int res = co_await detail::SubmitIo(loop, [&](io_uring_sqe* sqe) {
    io_uring_prep_connect(sqe, fd, address.sockaddr_ptr(), address.size());
    sqe->flags |= IOSQE_IO_LINK;
    // The link timeout cancels the connect when it fires (CQE -ECANCELED).
    io_uring_prep_link_timeout(loop.PrepareSqe(nullptr), &ts, 0);
  });
  if (res < 0) {
    ::close(fd);
    if (res == -ECANCELED) {
      if (cancel != nullptr && cancel->cancelled()) co_return CancelledError(what + ": cancelled");
      co_return DeadlineExceededError(what + ": timed out after " +
                                      std::to_string(timeout.count()) + " ms");
    }
    co_return ErrnoToStatus(-res, what);
  }
  auto socket = std::make_unique<TcpSocket>(loop, fd);
  // Named now: once the peer resets the connection, getpeername() fails,
  // and the read or write error that follows must still say where to.
  socket->peer_name_ = address.ToString();
  co_return socket;
}

Task<StatusOr<size_t>> TcpSocket::ReadUring(std::span<uint8_t> buf) {
  if (closed_) co_return CancelledError("read from closed socket");
  auto awaiter = detail::SubmitIo(
      loop_, [&](io_uring_sqe* sqe) { io_uring_prep_recv(sqe, fd_, buf.data(), buf.size(), 0); });
  pending_read_ = &awaiter.op();
  int res = co_await awaiter;
  pending_read_ = nullptr;
  if (closed_) {
    ReleaseFdIfIdle();
    co_return CancelledError("socket closed");
  }
  if (res < 0) co_return ErrnoToStatus(-res, "read from " + PeerName());
  co_return static_cast<size_t>(res);
}

Task<Status> TcpSocket::WriteUring(std::span<const uint8_t> data) {
  while (!data.empty()) {
    if (closed_) co_return CancelledError("write to closed socket");
    auto awaiter = detail::SubmitIo(loop_, [&](io_uring_sqe* sqe) {
      io_uring_prep_send(sqe, fd_, data.data(), data.size(), MSG_NOSIGNAL);
    });
    pending_write_ = &awaiter.op();
    int res = co_await awaiter;
    pending_write_ = nullptr;
    if (closed_) {
      ReleaseFdIfIdle();
      co_return CancelledError("socket closed");
    }
    if (res < 0) co_return ErrnoToStatus(-res, "write to " + PeerName());
    data = data.subspan(static_cast<size_t>(res));
  }
  co_return OkStatus();
}

Task<Status> TcpSocket::ShutdownWrite() {
  if (closed_) co_return CancelledError("socket closed");
  if (::shutdown(fd_, SHUT_WR) != 0 && errno != ENOTCONN) {
    co_return ErrnoToStatus(errno, "shutdown " + PeerName());
  }
  co_return OkStatus();
}

void TcpSocket::Close() {
  if (closed_) return;
  closed_ = true;
  // Pending requests complete (cancelled, or done if they won the race) on
  // a later turn and see closed_; the descriptor goes with the last one.
  loop_.CancelOp(pending_read_);
  loop_.CancelOp(pending_write_);
  // Pending epoll waits resume with ECANCELED and see closed_. epoll has no
  // request in the kernel: its syscalls run at once, so the fd goes now.
  if (watch_ != nullptr) watch_->Unregister();
  ReleaseFdIfIdle();
}

SocketAddress TcpSocket::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (closed_ || getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

SocketAddress TcpSocket::peer_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (closed_ || getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

std::string TcpSocket::PeerName() const {
  if (peer_name_.empty()) peer_name_ = peer_address().ToString();
  return peer_name_;
}

}  // namespace uxds
