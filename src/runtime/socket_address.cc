#include "runtime/socket_address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace uxds {

StatusOr<SocketAddress> SocketAddress::FromIpAndPort(std::string_view ip, uint16_t port) {
  SocketAddress a;
  std::string host(ip);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage_);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.size_ = sizeof(sockaddr_in);
    return a;
  }
  a.storage_ = {};
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.size_ = sizeof(sockaddr_in6);
    return a;
  }
  return InvalidArgumentError("\"" + host + "\" is not an IPv4 or IPv6 address");
}

StatusOr<SocketAddress> SocketAddress::Parse(std::string_view host_port) {
  std::string_view host, port_text;
  if (!host_port.empty() && host_port.front() == '[') {
    size_t close = host_port.find(']');
    if (close == std::string_view::npos || close + 1 >= host_port.size() ||
        host_port[close + 1] != ':') {
      return InvalidArgumentError("address \"" + std::string(host_port) +
                                  "\": expected [ipv6]:port");
    }
    host = host_port.substr(1, close - 1);
    port_text = host_port.substr(close + 2);
  } else {
    size_t colon = host_port.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgumentError("address \"" + std::string(host_port) + "\": missing port");
    }
    host = host_port.substr(0, colon);
    port_text = host_port.substr(colon + 1);
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535 ||
      port_text.empty()) {
    return InvalidArgumentError("address \"" + std::string(host_port) + "\": bad port");
  }
  auto a = FromIpAndPort(host, static_cast<uint16_t>(port));
  if (!a.ok()) return a.status().WithContext("address \"" + std::string(host_port) + "\"");
  return a;
}

SocketAddress SocketAddress::FromSockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  len = std::min<socklen_t>(len, sizeof(a.storage_));
  std::memcpy(&a.storage_, sa, len);
  a.size_ = len;
  return a;
}

SocketAddress SocketAddress::Loopback4(uint16_t port) { return *FromIpAndPort("127.0.0.1", port); }

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

IpEndpoint SocketAddress::ToIpEndpoint() const {
  IpEndpoint endpoint;
  endpoint.port = port();
  if (family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage_);
    std::memcpy(endpoint.ip.data(), &in->sin_addr, 4);
  } else if (family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      std::memcpy(endpoint.ip.data(), in6->sin6_addr.s6_addr + 12, 4);
    } else {
      std::memcpy(endpoint.ip.data(), in6->sin6_addr.s6_addr, 16);
      endpoint.is_ipv6 = true;
    }
  }
  return endpoint;
}

std::string SocketAddress::IpString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof buf);
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf,
              sizeof buf);
  }
  return buf;
}

std::string SocketAddress::ToString() const {
  if (family() == AF_INET6) return "[" + IpString() + "]:" + std::to_string(port());
  if (family() == AF_INET) return IpString() + ":" + std::to_string(port());
  return "(unset address)";
}

bool operator==(const SocketAddress& a, const SocketAddress& b) {
  return a.size_ == b.size_ && a.family() == b.family() && a.port() == b.port() &&
         a.IpString() == b.IpString();
}

}  // namespace uxds
