// LongestPrefixTable against a plain scan of CidrRange::Contains (the
// decoder's own containment test) over random nested and disjoint ranges.
#include "server/longest_prefix_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <set>
#include <span>
#include <vector>

namespace uxds::testing {
namespace {

CidrRange RandomRange(std::mt19937& random, bool is_ipv6) {
  CidrRange range;
  range.is_ipv6 = is_ipv6;
  const uint32_t bits = is_ipv6 ? 128 : 32;
  // Few distinct leading bytes, so that ranges nest and collide often.
  for (uint32_t i = 0; i < bits / 8; ++i) range.address[i] = static_cast<uint8_t>(random() % 4);
  if (is_ipv6 && random() % 4 == 0) {  // IPv4-mapped
    std::fill(range.address.begin(), range.address.begin() + 10, 0);
    range.address[10] = range.address[11] = 0xff;
  }
  range.prefix_len = random() % (bits + 1);
  for (uint32_t bit = range.prefix_len; bit < bits; ++bit) {
    range.address[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  }
  return range;
}

std::array<uint8_t, 16> RandomAddress(std::mt19937& random, bool is_ipv6) {
  std::array<uint8_t, 16> address{};
  for (size_t i = 0; i < (is_ipv6 ? 16u : 4u); ++i) {
    address[i] = static_cast<uint8_t>(random() % 8 == 0 ? random() : random() % 4);
  }
  if (is_ipv6 && random() % 4 == 0) {  // ::ffff:a.b.c.d, as a dual-stack socket reports
    std::fill(address.begin(), address.begin() + 10, 0);
    address[10] = address[11] = 0xff;
  }
  return address;
}

SocketAddress ToSocketAddress(const std::array<uint8_t, 16>& bytes, bool is_ipv6) {
  if (is_ipv6) {
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    std::memcpy(&v6.sin6_addr, bytes.data(), 16);
    return SocketAddress::FromSockaddr(reinterpret_cast<const sockaddr*>(&v6), sizeof(v6));
  }
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  std::memcpy(&v4.sin_addr, bytes.data(), 4);
  return SocketAddress::FromSockaddr(reinterpret_cast<const sockaddr*>(&v4), sizeof(v4));
}

// The reference: every range, longest containing one wins; the IPv4 form of
// an address is also tried against IPv4-mapped ranges, which lose ties to
// IPv4 ranges of the same span.
int32_t ScanLongest(const std::vector<LongestPrefixTable::Range>& ranges,
                    const std::array<uint8_t, 16>& bytes, bool is_ipv6, int32_t fallback) {
  std::array<uint8_t, 16> mapped{};
  mapped[10] = mapped[11] = 0xff;
  std::copy(bytes.begin(), bytes.begin() + 4, mapped.begin() + 12);
  int32_t best = fallback;
  int best_len = -1;
  bool best_native = false;
  for (const auto& [cidr, value] : ranges) {
    int len = -1;
    bool native = false;
    if (cidr.is_ipv6 == is_ipv6 && cidr.Contains(std::span(bytes.data(), is_ipv6 ? 16 : 4))) {
      len = static_cast<int>(cidr.prefix_len) + (is_ipv6 ? 0 : 96);
      native = true;
    } else if (!is_ipv6 && cidr.is_ipv6 && cidr.prefix_len >= 96 && cidr.Contains(mapped)) {
      len = static_cast<int>(cidr.prefix_len);
    }
    if (len > best_len || (len == best_len && native && !best_native)) {
      best = value;
      best_len = len;
      best_native = native;
    }
  }
  return best;
}

TEST(LongestPrefixTableTest, AgreesWithAScanOverRandomRanges) {
  std::mt19937 random(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<LongestPrefixTable::Range> ranges;
    std::set<CidrRange> seen;
    const int count = 1 + static_cast<int>(random() % 40);
    for (int i = 0; i < count; ++i) {
      CidrRange range = RandomRange(random, random() % 2 == 0);
      if (seen.insert(range).second) ranges.push_back({range, static_cast<int32_t>(i)});
    }
    const int32_t fallback = round % 2 == 0 ? LongestPrefixTable::kNone : 1000;
    const LongestPrefixTable table(ranges, fallback);
    for (int probe = 0; probe < 200; ++probe) {
      const bool is_ipv6 = random() % 2 == 0;
      const std::array<uint8_t, 16> bytes = RandomAddress(random, is_ipv6);
      const auto key = IpAddressKey::From(ToSocketAddress(bytes, is_ipv6));
      ASSERT_TRUE(key.has_value());
      const bool mapped_probe = is_ipv6 && !key->is_ipv6;
      std::array<uint8_t, 16> v4_bytes{};
      if (mapped_probe) std::copy(bytes.begin() + 12, bytes.end(), v4_bytes.begin());
      ASSERT_EQ(table.Find(*key), mapped_probe ? ScanLongest(ranges, v4_bytes, false, fallback)
                                               : ScanLongest(ranges, bytes, is_ipv6, fallback))
          << "round " << round << " probe " << probe;
    }
  }
}

TEST(LongestPrefixTableTest, EdgesOfTheAddressSpace) {
  CidrRange top;  // 255.255.255.255/32
  top.address = {255, 255, 255, 255};
  top.prefix_len = 32;
  CidrRange all;  // 0.0.0.0/0
  all.prefix_len = 0;
  const LongestPrefixTable table({{top, 1}, {all, 2}}, LongestPrefixTable::kNone);
  IpAddressKey key;
  key.v4 = 0xffffffff;
  EXPECT_EQ(table.Find(key), 1);
  key.v4 = 0xfffffffe;
  EXPECT_EQ(table.Find(key), 2);
  key.v4 = 0;
  EXPECT_EQ(table.Find(key), 2);
  key.is_ipv6 = true;
  EXPECT_EQ(table.Find(key), LongestPrefixTable::kNone);
  EXPECT_EQ(LongestPrefixTable().Find(key), LongestPrefixTable::kNone);
}

}  // namespace
}  // namespace uxds::testing
