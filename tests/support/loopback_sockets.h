// Loopback endpoints that misbehave at the TCP level, for fault tests.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/socket_address.h"

namespace uxds::testing {

// A loopback port nothing listens on: connections are refused at once.
SocketAddress RefusedAddress();

// A listener that never accepts: TCP connects (the kernel completes the
// handshake from the listen backlog) and nothing is ever read or written,
// so an HTTP/2 client waits for SETTINGS until its connect timeout.
class Blackhole {
 public:
  Blackhole();
  ~Blackhole();
  Blackhole(const Blackhole&) = delete;
  Blackhole& operator=(const Blackhole&) = delete;
  SocketAddress address() const { return SocketAddress::Loopback4(port_); }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace uxds::testing
