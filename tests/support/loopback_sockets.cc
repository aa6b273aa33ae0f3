#include "support/loopback_sockets.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cassert>

namespace uxds::testing {
namespace {

// Binds 127.0.0.1:0 and returns the fd (listening if `listen_backlog` > 0)
// and the port.
int BindLoopback(int listen_backlog, uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  [[maybe_unused]] int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  assert(rc == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  if (listen_backlog > 0) {
    rc = ::listen(fd, listen_backlog);
    assert(rc == 0);
  }
  return fd;
}

}  // namespace

SocketAddress RefusedAddress() {
  uint16_t port = 0;
  const int fd = BindLoopback(0, port);
  ::close(fd);  // nothing listens there now
  return SocketAddress::Loopback4(port);
}

Blackhole::Blackhole() { fd_ = BindLoopback(64, port_); }
Blackhole::~Blackhole() { ::close(fd_); }

FirstConnectionProxy::FirstConnectionProxy(uint16_t backend_port) {
  listen_fd_ = BindLoopback(64, port_);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  assert(stop_fd_ >= 0);
  thread_ = std::thread([this, backend_port] { Run(backend_port); });
}

FirstConnectionProxy::~FirstConnectionProxy() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof one);
  thread_.join();
  ::close(stop_fd_);
  ::close(listen_fd_);
}

void FirstConnectionProxy::Run(uint16_t backend_port) {
  int client = -1;
  int backend = -1;
  auto close_pair = [&] {
    if (client >= 0) ::close(client);
    if (backend >= 0) ::close(backend);
    client = backend = -1;
  };
  char buffer[16384];
  bool forwarded_one = false;
  while (true) {
    pollfd fds[4] = {
        {stop_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}, {client, POLLIN, 0}, {backend, POLLIN, 0}};
    if (::poll(fds, 4, -1) < 0) continue;
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int accepted = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (accepted >= 0 && forwarded_one) {
        ++turned_away_;  // counted before the client can see the close
        ::close(accepted);
      } else if (accepted >= 0) {
        forwarded_one = true;
        client = accepted;
        backend = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(backend_port);
        if (::connect(backend, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) close_pair();
      }
    }
    // Blocking reads and writes: poll said there is data, and loopback
    // buffers take what one read gives.
    for (int i = 2; i < 4 && client >= 0; ++i) {
      if (fds[i].revents == 0) continue;
      const int from = i == 2 ? client : backend;
      const int to = i == 2 ? backend : client;
      const ssize_t n = ::read(from, buffer, sizeof buffer);
      if (n <= 0 || ::send(to, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) close_pair();
    }
  }
  close_pair();
}

}  // namespace uxds::testing
