// LongestPrefixTable: which of a fixed set of CIDR ranges is the longest one
// containing an address, in O(log n) without allocating.
//
// The ranges of one FilterChainMatch level are nested or disjoint, so they
// cut the address space into elementary segments, each owned by the longest
// range covering it (or by nobody). Built once per Listener update into a
// sorted array of segment starts; a lookup is one binary search.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/socket_address.h"
#include "uxds/resources/listener.h"

namespace uxds {

__extension__ typedef unsigned __int128 Uint128;

// An IP address as an integer, IPv4-mapped IPv6 addresses as IPv4.
struct IpAddressKey {
  bool is_ipv6 = false;
  uint32_t v4 = 0;
  Uint128 v6 = 0;

  // nullopt for an address that is neither IPv4 nor IPv6.
  static std::optional<IpAddressKey> From(const SocketAddress& address);
  // 127.0.0.0/8 or ::1 (Envoy's rule for SAME_IP_OR_LOOPBACK).
  bool IsLoopback() const;
  friend bool operator==(const IpAddressKey&, const IpAddressKey&) = default;
};

class LongestPrefixTable {
 public:
  static constexpr int32_t kNone = -1;
  struct Range {
    CidrRange cidr;
    int32_t value;
  };

  LongestPrefixTable() = default;
  // `ranges` must be distinct; `fallback` is the value of an address that no
  // range contains (kNone or an entry standing for "any address").
  LongestPrefixTable(const std::vector<Range>& ranges, int32_t fallback);

  // The value of the longest range containing `ip`, else the fallback.
  int32_t Find(const IpAddressKey& ip) const;

 private:
  template <typename Key>
  struct Segments {
    std::vector<Key> starts;  // ascending; starts[0] == 0
    std::vector<int32_t> values;
  };

  Segments<uint32_t> v4_;
  Segments<Uint128> v6_;
  int32_t fallback_ = kNone;

  template <typename Key>
  static int32_t FindIn(const Segments<Key>& segments, Key key);
  template <typename Key>
  static Segments<Key> Build(std::vector<std::pair<CidrRange, int32_t>> ranges, int32_t fallback);
};

}  // namespace uxds
