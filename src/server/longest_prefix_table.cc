#include "server/longest_prefix_table.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <type_traits>

namespace uxds {
namespace {

template <typename Key>
constexpr uint32_t kKeyBits = sizeof(Key) * 8;

// The bits of a `prefix_len` range's addresses that vary.
template <typename Key>
Key HostMask(uint32_t prefix_len) {
  if (prefix_len >= kKeyBits<Key>) return Key(0);
  return static_cast<Key>(static_cast<Key>(~Key(0)) >> prefix_len);
}

template <typename Key>
Key BigEndianKey(const uint8_t* bytes) {
  Key key = 0;
  for (size_t i = 0; i < sizeof(Key); ++i) key = static_cast<Key>((key << 8) | bytes[i]);
  return key;
}

// ::ffff:0:0/96, the IPv4-mapped IPv6 addresses (RFC 4291 2.5.5.2).
constexpr uint8_t kV4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool IsV4Mapped(const uint8_t* v6_bytes) {
  return std::memcmp(v6_bytes, kV4MappedPrefix, sizeof(kV4MappedPrefix)) == 0;
}

template <typename Key>
struct PrefixSpan {
  Key low;
  Key high;
  uint32_t prefix_len;
  // An IPv4-mapped IPv6 range seen as IPv4: loses a tie with the same range
  // written as IPv4.
  bool mapped;
  int32_t value;
};

template <typename Key>
PrefixSpan<Key> SpanOf(Key address, uint32_t prefix_len, bool mapped, int32_t value) {
  const uint32_t len = std::min(prefix_len, kKeyBits<Key>);
  const Key low = static_cast<Key>(address & ~HostMask<Key>(len));
  return {low, static_cast<Key>(low | HostMask<Key>(len)), len, mapped, value};
}

}  // namespace

std::optional<IpAddressKey> IpAddressKey::From(const SocketAddress& address) {
  IpAddressKey key;
  if (address.family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address.sockaddr_ptr());
    key.v4 = BigEndianKey<uint32_t>(reinterpret_cast<const uint8_t*>(&v4->sin_addr));
    return key;
  }
  if (address.family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address.sockaddr_ptr());
    const auto* bytes = reinterpret_cast<const uint8_t*>(&v6->sin6_addr);
    // A dual-stack socket reports an IPv4 peer as ::ffff:a.b.c.d; gRPC
    // matches it as the IPv4 address it is.
    if (IsV4Mapped(bytes)) {
      key.v4 = BigEndianKey<uint32_t>(bytes + sizeof(kV4MappedPrefix));
      return key;
    }
    key.is_ipv6 = true;
    key.v6 = BigEndianKey<Uint128>(bytes);
    return key;
  }
  return std::nullopt;
}

bool IpAddressKey::IsLoopback() const {
  if (is_ipv6) return v6 == 1;
  return (v4 >> 24) == 127;
}

template <typename Key>
LongestPrefixTable::Segments<Key> LongestPrefixTable::Build(
    std::vector<std::pair<CidrRange, int32_t>> ranges, int32_t fallback) {
  std::vector<PrefixSpan<Key>> spans;
  for (const auto& [cidr, value] : ranges) {
    if constexpr (std::is_same_v<Key, uint32_t>) {
      if (!cidr.is_ipv6) {
        spans.push_back(
            SpanOf(BigEndianKey<Key>(cidr.address.data()), cidr.prefix_len, false, value));
      } else if (IsV4Mapped(cidr.address.data()) && cidr.prefix_len >= 96) {
        // ::ffff:10.0.0.0/104 names the same connections as 10.0.0.0/8,
        // whose addresses IpAddressKey reports as IPv4.
        spans.push_back(SpanOf(BigEndianKey<Key>(cidr.address.data() + sizeof(kV4MappedPrefix)),
                               cidr.prefix_len - 96, true, value));
      }
    } else if (cidr.is_ipv6) {
      spans.push_back(
          SpanOf(BigEndianKey<Key>(cidr.address.data()), cidr.prefix_len, false, value));
    }
  }
  // Outer ranges before the ranges they contain.
  std::sort(spans.begin(), spans.end(), [](const PrefixSpan<Key>& a, const PrefixSpan<Key>& b) {
    return std::tie(a.low, a.prefix_len, a.mapped) < std::tie(b.low, b.prefix_len, b.mapped);
  });
  spans.erase(std::unique(spans.begin(), spans.end(),
                          [](const PrefixSpan<Key>& a, const PrefixSpan<Key>& b) {
                            return a.low == b.low && a.prefix_len == b.prefix_len;
                          }),
              spans.end());

  Segments<Key> out;
  // Starts come in non-decreasing order; a later segment at the same start
  // is the more specific one.
  auto start_segment = [&out](Key start, int32_t value) {
    if (!out.starts.empty() && out.starts.back() == start) {
      out.values.back() = value;
    } else if (out.values.empty() || out.values.back() != value) {
      out.starts.push_back(start);
      out.values.push_back(value);
    }
  };
  start_segment(Key(0), fallback);
  // The ranges containing the current position, innermost last.
  std::vector<const PrefixSpan<Key>*> open;
  auto close_innermost = [&] {
    const Key end = open.back()->high;
    open.pop_back();
    if (end == static_cast<Key>(~Key(0))) return;
    start_segment(static_cast<Key>(end + 1), open.empty() ? fallback : open.back()->value);
  };
  for (const PrefixSpan<Key>& span : spans) {
    while (!open.empty() && open.back()->high < span.low) close_innermost();
    open.push_back(&span);
    start_segment(span.low, span.value);
  }
  while (!open.empty()) close_innermost();
  return out;
}

LongestPrefixTable::LongestPrefixTable(const std::vector<Range>& ranges, int32_t fallback)
    : fallback_(fallback) {
  std::vector<std::pair<CidrRange, int32_t>> pairs;
  pairs.reserve(ranges.size());
  for (const Range& range : ranges) pairs.emplace_back(range.cidr, range.value);
  v4_ = Build<uint32_t>(pairs, fallback);
  v6_ = Build<Uint128>(std::move(pairs), fallback);
}

template <typename Key>
int32_t LongestPrefixTable::FindIn(const Segments<Key>& segments, Key key) {
  // The last segment starting at or before `key`; starts[0] is 0.
  auto it = std::upper_bound(segments.starts.begin(), segments.starts.end(), key);
  return segments.values[static_cast<size_t>(it - segments.starts.begin()) - 1];
}

int32_t LongestPrefixTable::Find(const IpAddressKey& ip) const {
  if (v4_.starts.empty()) return fallback_;  // default-constructed
  return ip.is_ipv6 ? FindIn(v6_, ip.v6) : FindIn(v4_, ip.v4);
}

}  // namespace uxds
