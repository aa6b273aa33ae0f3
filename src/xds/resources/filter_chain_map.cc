#include "xds/resources/filter_chain_map.h"

#include <arpa/inet.h>

#include <algorithm>
#include <compare>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

namespace uxds {
namespace {

using SourceType = FilterChainMatch::SourceType;

// The normalized matchers of one Listener are bounded: a matcher with a few
// long lists multiplies out quickly, and a control plane must not make us
// build millions of entries. (A uxds limit; gRPC C++ has none.)
constexpr uint64_t kMaxNormalizedMatchers = 65536;

// One term of a matcher in disjunctive normal form (A36): one value from
// each list, every field included, even those that can never match.
struct NormalizedMatcher {
  std::optional<uint32_t> destination_port;
  std::optional<CidrRange> destination;
  std::optional<std::string> server_name;
  std::string transport_protocol;
  std::optional<std::string> application_protocol;
  SourceType source_type = SourceType::kAny;
  std::optional<CidrRange> source;
  uint32_t source_port = 0;  // 0: any (gRPC treats an explicit 0 the same)

  friend auto operator<=>(const NormalizedMatcher&, const NormalizedMatcher&) = default;
};

// ::ffff:0:0/96, the IPv4-mapped IPv6 addresses (RFC 4291 2.5.5.2).
constexpr uint8_t kV4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

// A36: "when checking for duplicates the matchers need to be normalized".
// The lookup matches an IPv4 address reported in its mapped form
// (::ffff:a.b.c.d) as IPv4, and a mapped prefix of /96 or longer against
// IPv4 addresses, so ::ffff:10.0.0.0/104 and 10.0.0.0/8 name the same
// connections: both become the IPv4 range, for the duplicate check and for
// the tables (two entries for one range would leave one unreachable).
std::optional<CidrRange> AsMatched(const std::optional<CidrRange>& range) {
  if (!range.has_value() || !range->is_ipv6 || range->prefix_len < 96 ||
      std::memcmp(range->address.data(), kV4MappedPrefix, sizeof(kV4MappedPrefix)) != 0) {
    return range;
  }
  CidrRange v4;
  std::memcpy(v4.address.data(), range->address.data() + sizeof(kV4MappedPrefix), 4);
  v4.prefix_len = range->prefix_len - 96;
  return v4;
}

template <typename T>
std::vector<std::optional<T>> OrAny(const std::vector<T>& values) {
  if (values.empty()) return {std::nullopt};
  return {values.begin(), values.end()};
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += ", ";
    out += parts[i];
  }
  return out;
}

template <typename T, typename Format>
std::string JoinEach(const std::vector<T>& values, Format format) {
  std::vector<std::string> parts;
  for (const auto& value : values) parts.push_back(format(value));
  return Join(parts);
}

// Adds every normalized term of `match` to `seen`; false (and an error) on
// the first term another chain (or this one) already has.
bool AddNormalizedTerms(const FilterChainMatch& match, size_t chain,
                        std::map<NormalizedMatcher, size_t>& seen, ValidationErrors& errors) {
  std::vector<std::optional<uint32_t>> ports;
  for (uint32_t port : match.source_ports) ports.push_back(port);
  if (ports.empty()) ports.push_back(std::nullopt);
  NormalizedMatcher term;
  term.destination_port = match.destination_port;
  term.transport_protocol = match.transport_protocol;
  term.source_type = match.source_type;
  for (const auto& destination : OrAny(match.prefix_ranges)) {
    term.destination = AsMatched(destination);
    for (const auto& server_name : OrAny(match.server_names)) {
      term.server_name = server_name;
      for (const auto& protocol : OrAny(match.application_protocols)) {
        term.application_protocol = protocol;
        for (const auto& source : OrAny(match.source_prefix_ranges)) {
          term.source = AsMatched(source);
          for (const auto& port : ports) {
            term.source_port = port.value_or(0);
            if (!seen.emplace(term, chain).second) {
              errors.Add("duplicate matching rules detected when adding filter chain: " +
                         match.ToString());
              return false;
            }
          }
        }
      }
    }
  }
  return true;
}

uint64_t TermCount(const FilterChainMatch& match) {
  uint64_t count = 1;
  for (size_t size :
       {match.prefix_ranges.size(), match.server_names.size(), match.application_protocols.size(),
        match.source_prefix_ranges.size(), match.source_ports.size()}) {
    count *= std::max<uint64_t>(size, 1);
    if (count > kMaxNormalizedMatchers) return count;
  }
  return count;
}

template <typename Entry>
Entry& FindOrAdd(std::vector<Entry>& entries, const std::optional<CidrRange>& prefix) {
  auto it = std::lower_bound(
      entries.begin(), entries.end(), prefix,
      [](const Entry& e, const std::optional<CidrRange>& p) { return e.prefix < p; });
  if (it != entries.end() && it->prefix == prefix) return *it;
  it = entries.insert(it, Entry{});
  it->prefix = prefix;
  return *it;
}

bool UsesRawBuffer(const FilterChainMatch& match) {
  return match.transport_protocol == "raw_buffer";
}

}  // namespace

bool CidrRange::Contains(std::span<const uint8_t> ip) const {
  if (ip.size() != (is_ipv6 ? 16u : 4u)) return false;
  const uint32_t full_bytes = prefix_len / 8;
  if (std::memcmp(ip.data(), address.data(), full_bytes) != 0) return false;
  const uint32_t rest_bits = prefix_len % 8;
  if (rest_bits == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest_bits));
  return (ip[full_bytes] & mask) == address[full_bytes];
}

std::string CidrRange::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(is_ipv6 ? AF_INET6 : AF_INET, address.data(), text, sizeof(text));
  return std::string(text) + "/" + std::to_string(prefix_len);
}

bool FilterChainMatch::NeverMatches() const {
  return destination_port.has_value() || !server_names.empty() || !application_protocols.empty() ||
         (!transport_protocol.empty() && transport_protocol != "raw_buffer");
}

std::string FilterChainMatch::ToString() const {
  std::vector<std::string> parts;
  auto cidr = [](const CidrRange& range) { return range.ToString(); };
  auto text = [](const std::string& s) { return s; };
  if (destination_port.has_value()) {
    parts.push_back("destination_port=" + std::to_string(*destination_port));
  }
  if (!prefix_ranges.empty())
    parts.push_back("prefix_ranges={" + JoinEach(prefix_ranges, cidr) + "}");
  if (source_type == SourceType::kSameIpOrLoopback) {
    parts.push_back("source_type=SAME_IP_OR_LOOPBACK");
  } else if (source_type == SourceType::kExternal) {
    parts.push_back("source_type=EXTERNAL");
  }
  if (!source_prefix_ranges.empty()) {
    parts.push_back("source_prefix_ranges={" + JoinEach(source_prefix_ranges, cidr) + "}");
  }
  if (!source_ports.empty()) {
    parts.push_back("source_ports={" +
                    JoinEach(source_ports, [](uint32_t p) { return std::to_string(p); }) + "}");
  }
  if (!server_names.empty()) parts.push_back("server_names={" + JoinEach(server_names, text) + "}");
  if (!transport_protocol.empty()) parts.push_back("transport_protocol=" + transport_protocol);
  if (!application_protocols.empty()) {
    parts.push_back("application_protocols={" + JoinEach(application_protocols, text) + "}");
  }
  return "{" + Join(parts) + "}";
}

FilterChainMap BuildFilterChainMap(const std::vector<FilterChain>& chains,
                                   const std::vector<int>& proto_indices,
                                   ValidationErrors& errors) {
  // A36: duplicates are looked for among all chains, even those that can
  // never match.
  std::map<NormalizedMatcher, size_t> seen;
  uint64_t terms = 0;
  bool all_unique = true;
  for (size_t i = 0; i < chains.size(); ++i) {
    auto field =
        errors.Scope("filter_chains[" + std::to_string(proto_indices[i]) + "].filter_chain_match");
    const FilterChainMatch& match = chains[i].filter_chain_match;
    terms += TermCount(match);
    if (terms > kMaxNormalizedMatchers) {
      errors.Add("more than " + std::to_string(kMaxNormalizedMatchers) +
                 " combinations of matching rules in the Listener");
      return {};
    }
    all_unique &= AddNormalizedTerms(match, i, seen, errors);
  }
  FilterChainMap map;
  if (!all_unique) return map;
  // Within a destination prefix, "raw_buffer" chains are more specific than
  // chains without a transport protocol, which then can never be chosen.
  std::map<std::optional<CidrRange>, bool> raw_buffer_used;
  for (const auto& [term, chain] : seen) {
    if (chains[chain].filter_chain_match.NeverMatches()) continue;
    raw_buffer_used[term.destination] |= UsesRawBuffer(chains[chain].filter_chain_match);
  }
  for (const auto& [term, chain] : seen) {
    const FilterChainMatch& match = chains[chain].filter_chain_match;
    if (match.NeverMatches() || UsesRawBuffer(match) != raw_buffer_used[term.destination]) {
      continue;
    }
    FilterChainMap::DestinationIp& destination = FindOrAdd(map.destination_ips, term.destination);
    auto& sources = destination.source_types[static_cast<size_t>(term.source_type)];
    FindOrAdd(sources, term.source).ports.emplace(term.source_port, chain);
  }
  return map;
}

}  // namespace uxds
