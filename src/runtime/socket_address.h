// SocketAddress: an IPv4 or IPv6 address and port.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "uxds/connection_info.h"
#include "uxds/status.h"

namespace uxds {

class SocketAddress {
 public:
  SocketAddress() = default;
  // "127.0.0.1:8080", "[::1]:8080". No name resolution.
  static StatusOr<SocketAddress> Parse(std::string_view host_port);
  static StatusOr<SocketAddress> FromIpAndPort(std::string_view ip, uint16_t port);
  static SocketAddress FromSockaddr(const sockaddr* sa, socklen_t len);
  static SocketAddress Loopback4(uint16_t port);

  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t size() const { return size_; }
  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  // "127.0.0.1:8080" / "[::1]:8080" (the form ring hash keys use too).
  std::string ToString() const;
  // "127.0.0.1" / "::1".
  std::string IpString() const;
  // The address as bytes and port; an IPv4-mapped IPv6 address becomes the
  // IPv4 address it stands for. All zero for a non-IP address.
  IpEndpoint ToIpEndpoint() const;

  friend bool operator==(const SocketAddress& a, const SocketAddress& b);

 private:
  sockaddr_storage storage_{};
  socklen_t size_ = 0;
};

}  // namespace uxds
