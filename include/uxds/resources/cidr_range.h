// CidrRange: an IP prefix as xDS resources state it (core.v3.CidrRange),
// normalized once when decoded: FilterChainMatch (A36) and RBAC (A41)
// match addresses against it.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <span>
#include <string>

namespace uxds {

// A normalized CIDR range (A36): prefix_len clamped to 32 / 128 (absent = 0)
// and the host bits of the address zeroed, so 10.1.2.3/8 equals 10.0.0.0/8.
struct CidrRange {
  // Network byte order; only the first 4 bytes are used for IPv4.
  std::array<uint8_t, 16> address{};
  bool is_ipv6 = false;
  uint32_t prefix_len = 0;

  // True if `ip` (4 bytes for IPv4, 16 for IPv6, network order) is in the
  // range. A range matches addresses of its own family only.
  bool Contains(std::span<const uint8_t> ip) const;
  // "10.0.0.0/8", "2001:db8::/32".
  std::string ToString() const;

  friend bool operator==(const CidrRange&, const CidrRange&) = default;
  friend auto operator<=>(const CidrRange&, const CidrRange&) = default;
};

}  // namespace uxds
