#include "support/loopback_sockets.h"

#include <netinet/in.h>
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

}  // namespace uxds::testing
