// TcpSocket: a connected TCP socket whose reads and writes go through the
// loop's backend: io_uring requests, or non-blocking syscalls and epoll.
#pragma once

#include <chrono>
#include <memory>

#include "runtime/byte_stream.h"
#include "runtime/socket_address.h"
#include "uxds/loop.h"

namespace uxds {
namespace detail {
class FdWatch;
}  // namespace detail

class TcpSocket final : public ByteStream {
 public:
  // Takes ownership of a connected socket `fd`; sets TCP_NODELAY.
  TcpSocket(Loop& loop, int fd);
  ~TcpSocket() override;

  // Connects with a timeout: DEADLINE_EXCEEDED on timeout, UNAVAILABLE when
  // refused or unreachable, CANCELLED when the task is cancelled.
  static Task<StatusOr<std::unique_ptr<TcpSocket>>> Connect(Loop& loop,
                                                            const SocketAddress& address,
                                                            std::chrono::milliseconds timeout);

  Task<StatusOr<size_t>> Read(std::span<uint8_t> buf) override;
  Task<Status> Write(std::span<const uint8_t> data) override;
  Task<Status> ShutdownWrite() override;
  void Close() override;
  std::string PeerName() const override;

  // The descriptor, or -1 once Close() has released it (which may be a few
  // turns after Close(): see ReleaseFdIfIdle).
  int fd() const { return fd_; }
  // Gives the descriptor up to the caller (who closes it), e.g. to serve
  // the connection on another loop: only while no read or write is
  // pending, so no request naming it can still reach the kernel. The
  // socket is closed afterwards.
  int ReleaseFd();
  Loop& loop() const { return loop_; }
  SocketAddress local_address() const;
  SocketAddress peer_address() const;

 private:
  // The two backends' forms of each operation (tcp_socket_epoll.cc holds
  // the epoll ones).
  Task<StatusOr<size_t>> ReadUring(std::span<uint8_t> buf);
  Task<StatusOr<size_t>> ReadEpoll(std::span<uint8_t> buf);
  Task<Status> WriteUring(std::span<const uint8_t> data);
  Task<Status> WriteEpoll(std::span<const uint8_t> data);
  static Task<StatusOr<std::unique_ptr<TcpSocket>>> ConnectUring(Loop& loop,
                                                                 const SocketAddress& address,
                                                                 std::chrono::milliseconds timeout);
  static Task<StatusOr<std::unique_ptr<TcpSocket>>> ConnectEpoll(Loop& loop,
                                                                 const SocketAddress& address,
                                                                 std::chrono::milliseconds timeout);

  // Closes fd_ after Close() once no request naming it is pending.
  void ReleaseFdIfIdle();

  Loop& loop_;
  int fd_;
  bool closed_ = false;  // Close() was called; fd_ may still be open (see ReleaseFdIfIdle)
  detail::IoOp* pending_read_ = nullptr;
  detail::IoOp* pending_write_ = nullptr;
  std::unique_ptr<detail::FdWatch> watch_;  // epoll backend only
  mutable std::string peer_name_;           // cached: the peer is fixed once connected
};

// A listening TCP socket. On io_uring, Accept() uses multishot
// IORING_OP_ACCEPT where the kernel has it (one submission serves many
// connections), single-shot otherwise; on epoll, accept4 on a non-blocking
// socket, waiting for readiness only when the backlog is empty.
class TcpListener {
 public:
  // How long Bind() tries again while the port is in use (EADDRINUSE): a
  // process killed by a signal while it listened on io_uring keeps its port
  // until the kernel's asynchronous ring teardown (see tcp_listener.cc).
  static constexpr std::chrono::milliseconds kAddressInUseGrace{250};

  // Binds and listens (SO_REUSEADDR; port 0 picks a free port). While the
  // port is in use it tries again for up to `address_in_use_grace`,
  // blocking the calling thread; a loop that must not block passes 0 and
  // retries itself (ServingListener). A port still in use then fails
  // ALREADY_EXISTS.
  //
  // `share_port` sets SO_REUSEPORT: several listeners (one per loop of a
  // server) bind the same port and the kernel spreads new connections over
  // them by a hash of the connection's addresses. Every socket of the group
  // must set it, so a process that did not still makes the port in use.
  static StatusOr<std::unique_ptr<TcpListener>> Bind(
      Loop& loop, const SocketAddress& address, int backlog = 1024,
      std::chrono::milliseconds address_in_use_grace = kAddressInUseGrace, bool share_port = false);
  ~TcpListener();

  // The next accepted connection; CANCELLED when the task is cancelled or the
  // listener closed.
  Task<StatusOr<std::unique_ptr<TcpSocket>>> Accept();
  // Stops accepting; a pending Accept() completes with CANCELLED.
  void Close();

  const SocketAddress& local_address() const { return local_; }
  uint16_t port() const { return local_.port(); }
  // Connections accepted by the kernel request and not yet taken by
  // Accept() (io_uring; epoll accepts only in Accept()). Bounded: see
  // kMaxQueuedAccepts in the .cc.
  size_t queued_connections() const;

  class AcceptOp;
  // Lets the accept wait (in the .cc) reach the op without exposing it.
  struct AcceptOpRef {
    AcceptOp* op;
    void set_waiter(std::coroutine_handle<> h);
    std::coroutine_handle<> take_waiter();
  };

 private:
  TcpListener(Loop& loop, int fd, SocketAddress local);
  Task<StatusOr<std::unique_ptr<TcpSocket>>> AcceptUring();
  Task<StatusOr<std::unique_ptr<TcpSocket>>> AcceptEpoll();
  Loop& loop_;
  int fd_;
  SocketAddress local_;
  std::unique_ptr<AcceptOp> accept_op_;     // io_uring backend only
  std::unique_ptr<detail::FdWatch> watch_;  // epoll backend only
};

}  // namespace uxds
