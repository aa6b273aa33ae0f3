// ConnectionInfo: what a server knows of the connection a call came on: both
// ends' addresses and, on TLS, the client certificate's identities. A handler
// reads it through ServerCall::connection(); RBAC (A41) matches on it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace uxds {

// One end of a TCP connection.
struct IpEndpoint {
  // Network byte order; only the first 4 bytes for IPv4. An IPv4-mapped IPv6
  // address (::ffff:10.0.0.1, a dual-stack listener's IPv4 peer) is kept as
  // the IPv4 address it stands for, as A36 matches it.
  std::array<uint8_t, 16> ip{};
  bool is_ipv6 = false;
  uint16_t port = 0;

  std::span<const uint8_t> bytes() const { return {ip.data(), is_ipv6 ? 16u : 4u}; }
  friend bool operator==(const IpEndpoint&, const IpEndpoint&) = default;
};

// The client's side of a TLS connection.
struct TlsPeer {
  // A41: the client certificate's URI and DNS subject alternative names, in
  // certificate order, and its subject as an RFC 2253 name; all empty when
  // the client sent no certificate.
  std::vector<std::string> uri_sans = {};
  std::vector<std::string> dns_sans = {};
  std::string subject = {};
  bool has_certificate = false;
  friend bool operator==(const TlsPeer&, const TlsPeer&) = default;
};

struct ConnectionInfo {
  IpEndpoint local;                 // the address the client connected to
  IpEndpoint peer;                  // the client
  std::optional<TlsPeer> tls = {};  // nullopt: plaintext
  friend bool operator==(const ConnectionInfo&, const ConnectionInfo&) = default;
};

}  // namespace uxds
