// Loopback endpoints that misbehave at the TCP level, for fault tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

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

// An endpoint only the first client to connect can reach: its first
// connection is forwarded to `backend_port` on 127.0.0.1, and every later
// one is closed as soon as it is accepted (so a client's HTTP/2 handshake
// fails: connection closed before SETTINGS). Runs on its own thread.
class FirstConnectionProxy {
 public:
  explicit FirstConnectionProxy(uint16_t backend_port);
  ~FirstConnectionProxy();
  FirstConnectionProxy(const FirstConnectionProxy&) = delete;
  FirstConnectionProxy& operator=(const FirstConnectionProxy&) = delete;
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  // Connections closed at once so far (every one after the first).
  int turned_away() const { return turned_away_.load(); }

 private:
  void Run(uint16_t backend_port);

  int listen_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd: the destructor ends the thread
  uint16_t port_ = 0;
  std::atomic<int> turned_away_{0};
  std::thread thread_;
};

}  // namespace uxds::testing
