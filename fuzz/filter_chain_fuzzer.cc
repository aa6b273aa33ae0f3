// libFuzzer target: A36 FilterChainMatch validation (BuildFilterChainMap) and
// selection (FilterChainMatcher) against a plain matcher written here that
// walks the chains' matchers directly, with no tables.
//
// The input is text, one command a line, so seeds can be written by hand
// from the FilterChainMatcher tests:
//   chain NAME                 starts a filter chain (at most 64)
//   dest CIDR | src CIDR       a prefix_ranges / source_prefix_ranges entry
//   type local|external|any    source_type
//   port N                     a source_ports entry
//   transport P | server_name S | alpn A | dport N
//                              the fields that never match in gRPC
//   default                    the Listener has a default_filter_chain
//   conn LOCAL_IP PEER_IP PORT a connection to select a chain for
// Besides the listed connections, every prefix's first and last address is
// tried from every source prefix's, the same address, a loopback and an
// outside address, in IPv4-mapped form too.
//
// Checked: the map is built (no error) exactly when the normalized matchers
// (A36's cross product, IPv4-mapped prefixes as IPv4) have no duplicate;
// then every connection gets the chain the plain matcher picks: longest
// destination prefix (raw_buffer chains hiding the others within it),
// source type (the connection's own, else ANY), longest source prefix,
// exact source port else any port; else the default chain, else none.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "runtime/socket_address.h"
#include "server/filter_chain_matcher.h"
#include "uxds/resources/listener.h"
#include "xds/resources/filter_chain_map.h"
#include "xds/validation_errors.h"

namespace {

using uxds::CidrRange;
using uxds::FilterChain;
using uxds::FilterChainMatch;
using SourceType = FilterChainMatch::SourceType;

void Require(bool property) {
  if (!property) __builtin_trap();
}

constexpr size_t kMaxChains = 64;
constexpr size_t kMaxListEntries = 8;
constexpr uint64_t kMaxTerms = 65536;  // uxds's bound on normalized matchers

// An IP address as the plain matcher sees it: IPv4-mapped IPv6 as IPv4.
struct Ip {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};
  friend bool operator==(const Ip&, const Ip&) = default;
};

constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

std::optional<Ip> ParseIp(std::string_view text) {
  const std::string s(text);
  Ip ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) return ip;
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) {
    ip.v6 = true;
    return ip;
  }
  return std::nullopt;
}

Ip Unmapped(Ip ip) {
  if (ip.v6 && std::memcmp(ip.bytes.data(), kMapped, sizeof(kMapped)) == 0) {
    Ip v4;
    std::memcpy(v4.bytes.data(), ip.bytes.data() + 12, 4);
    return v4;
  }
  return ip;
}

std::string IpText(const Ip& ip) {
  char text[INET6_ADDRSTRLEN];
  inet_ntop(ip.v6 ? AF_INET6 : AF_INET, ip.bytes.data(), text, sizeof(text));
  return text;
}

bool IsLoopback(const Ip& ip) {
  if (!ip.v6) return ip.bytes[0] == 127;
  static constexpr std::array<uint8_t, 16> kOne = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return ip.bytes == kOne;
}

// "ADDR/LEN" normalized as the Listener decoder does (A36): the length
// clamped to the family's, host bits zeroed; without "/LEN", length 0.
std::optional<CidrRange> ParseCidr(std::string_view text) {
  const size_t slash = text.find('/');
  const std::optional<Ip> ip = ParseIp(text.substr(0, slash));
  if (!ip.has_value()) return std::nullopt;
  CidrRange range;
  range.is_ipv6 = ip->v6;
  range.address = ip->bytes;
  if (slash != std::string_view::npos) {
    const std::string len(text.substr(slash + 1));
    range.prefix_len = static_cast<uint32_t>(
        std::min<unsigned long>(std::strtoul(len.c_str(), nullptr, 10), range.is_ipv6 ? 128 : 32));
  }
  const uint32_t bits = range.is_ipv6 ? 128 : 32;
  for (uint32_t bit = range.prefix_len; bit < bits; ++bit) {
    range.address[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
  return range;
}

// A prefix as it matches: an IPv4-mapped prefix of /96 or more as IPv4.
CidrRange AsMatched(const CidrRange& range) {
  if (!range.is_ipv6 || range.prefix_len < 96 ||
      std::memcmp(range.address.data(), kMapped, sizeof(kMapped)) != 0) {
    return range;
  }
  CidrRange v4;
  std::memcpy(v4.address.data(), range.address.data() + 12, 4);
  v4.prefix_len = range.prefix_len - 96;
  return v4;
}

bool Contains(const CidrRange& range, const Ip& ip) {
  if (range.is_ipv6 != ip.v6) return false;
  for (uint32_t bit = 0; bit < range.prefix_len; ++bit) {
    const uint8_t mask = static_cast<uint8_t>(0x80u >> (bit % 8));
    if ((range.address[bit / 8] & mask) != (ip.bytes[bit / 8] & mask)) return false;
  }
  return true;
}

// -1 for "any address" (no prefix), less specific than a /0.
int Length(const std::optional<CidrRange>& range) {
  return range.has_value() ? static_cast<int>(range->prefix_len) : -1;
}

// One term of a matcher's cross product, every field included.
struct Term {
  std::optional<uint32_t> destination_port;
  std::optional<CidrRange> destination;
  std::optional<std::string> server_name;
  std::string transport_protocol;
  std::optional<std::string> application_protocol;
  SourceType source_type;
  std::optional<CidrRange> source;
  uint32_t source_port;  // 0: any
  size_t chain;
  auto Key() const {
    return std::tie(destination_port, destination, server_name, transport_protocol,
                    application_protocol, source_type, source, source_port);
  }
};

template <typename T>
std::vector<std::optional<T>> OrAny(const std::vector<T>& values) {
  if (values.empty()) return {std::nullopt};
  return {values.begin(), values.end()};
}

std::vector<Term> Expand(const std::vector<FilterChain>& chains) {
  std::vector<Term> terms;
  for (size_t c = 0; c < chains.size(); ++c) {
    const FilterChainMatch& m = chains[c].filter_chain_match;
    std::vector<uint32_t> ports = m.source_ports;
    for (auto& destination : OrAny(m.prefix_ranges)) {
      for (auto& server_name : OrAny(m.server_names)) {
        for (auto& alpn : OrAny(m.application_protocols)) {
          for (auto& source : OrAny(m.source_prefix_ranges)) {
            for (auto& port : OrAny(ports)) {
              Term t{m.destination_port,
                     destination ? std::optional(AsMatched(*destination)) : std::nullopt,
                     server_name,
                     m.transport_protocol,
                     alpn,
                     m.source_type,
                     source ? std::optional(AsMatched(*source)) : std::nullopt,
                     port.value_or(0),
                     c};
              terms.push_back(std::move(t));
              if (terms.size() > kMaxTerms) return terms;
            }
          }
        }
      }
    }
  }
  return terms;
}

bool CanMatch(const Term& t) {
  return !t.destination_port && !t.server_name && !t.application_protocol &&
         (t.transport_protocol.empty() || t.transport_protocol == "raw_buffer");
}

// The plain matcher: the chain index, or -1 for none.
int PlainSelect(const std::vector<Term>& all, Ip local, Ip peer, uint16_t port) {
  local = Unmapped(local);
  peer = Unmapped(peer);
  std::vector<const Term*> terms;
  for (const Term& t : all) {
    if (CanMatch(t) && (!t.destination || Contains(*t.destination, local))) terms.push_back(&t);
  }
  int best = -2;
  for (const Term* t : terms) best = std::max(best, Length(t->destination));
  std::erase_if(terms, [&](const Term* t) { return Length(t->destination) != best; });
  if (std::any_of(terms.begin(), terms.end(),
                  [](const Term* t) { return t->transport_protocol == "raw_buffer"; })) {
    std::erase_if(terms, [](const Term* t) { return t->transport_protocol.empty(); });
  }
  const SourceType own =
      IsLoopback(peer) || peer == local ? SourceType::kSameIpOrLoopback : SourceType::kExternal;
  const SourceType type =
      std::any_of(terms.begin(), terms.end(), [&](const Term* t) { return t->source_type == own; })
          ? own
          : SourceType::kAny;
  std::erase_if(terms, [&](const Term* t) { return t->source_type != type; });
  std::erase_if(terms, [&](const Term* t) { return t->source && !Contains(*t->source, peer); });
  best = -2;
  for (const Term* t : terms) best = std::max(best, Length(t->source));
  std::erase_if(terms, [&](const Term* t) { return Length(t->source) != best; });
  for (const Term* t : terms) {
    if (t->source_port == port) return static_cast<int>(t->chain);
  }
  for (const Term* t : terms) {
    if (t->source_port == 0) return static_cast<int>(t->chain);
  }
  return -1;
}

struct Connection {
  Ip local;
  Ip peer;
  uint16_t port;
};

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    const size_t start = pos;
    while (pos < line.size() && line[pos] != ' ') ++pos;
    if (pos > start) words.push_back(line.substr(start, pos - start));
  }
  return words;
}

uint32_t Number(std::string_view word) {
  const std::string text(word);
  return static_cast<uint32_t>(std::strtoul(text.c_str(), nullptr, 10));
}

Ip LastAddress(const CidrRange& range) {
  Ip ip{range.is_ipv6, range.address};
  const uint32_t bits = range.is_ipv6 ? 128 : 32;
  for (uint32_t bit = range.prefix_len; bit < bits; ++bit) {
    ip.bytes[bit / 8] |= static_cast<uint8_t>(0x80u >> (bit % 8));
  }
  return ip;
}

Ip Mapped(const Ip& ip) {
  if (ip.v6) return ip;
  Ip mapped{true, {}};
  std::memcpy(mapped.bytes.data(), kMapped, sizeof(kMapped));
  std::memcpy(mapped.bytes.data() + 12, ip.bytes.data(), 4);
  return mapped;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<FilterChain> chains;
  bool has_default = false;
  std::vector<Connection> connections;
  size_t pos = 0;
  while (pos < input.size()) {
    size_t end = input.find('\n', pos);
    if (end == std::string_view::npos) end = input.size();
    const std::vector<std::string_view> words = Words(input.substr(pos, end - pos));
    pos = end + 1;
    if (words.empty()) continue;
    const std::string_view command = words[0];
    if (command == "chain" && chains.size() < kMaxChains) {
      chains.emplace_back();
      chains.back().name = words.size() > 1 ? std::string(words[1]) : "";
      continue;
    }
    if (command == "default") {
      has_default = true;
      continue;
    }
    if (command == "conn" && words.size() == 4 && connections.size() < 64) {
      auto local = ParseIp(words[1]);
      auto peer = ParseIp(words[2]);
      if (local && peer)
        connections.push_back({*local, *peer, static_cast<uint16_t>(Number(words[3]))});
      continue;
    }
    if (chains.empty() || words.size() != 2) continue;
    FilterChainMatch& m = chains.back().filter_chain_match;
    const std::string_view value = words[1];
    if (command == "dest" && m.prefix_ranges.size() < kMaxListEntries) {
      if (auto range = ParseCidr(value)) m.prefix_ranges.push_back(*range);
    } else if (command == "src" && m.source_prefix_ranges.size() < kMaxListEntries) {
      if (auto range = ParseCidr(value)) m.source_prefix_ranges.push_back(*range);
    } else if (command == "type") {
      m.source_type = value == "local"      ? SourceType::kSameIpOrLoopback
                      : value == "external" ? SourceType::kExternal
                                            : SourceType::kAny;
    } else if (command == "port" && m.source_ports.size() < kMaxListEntries) {
      m.source_ports.push_back(Number(value) & 0xffff);
    } else if (command == "transport") {
      m.transport_protocol = std::string(value);
    } else if (command == "server_name" && m.server_names.size() < kMaxListEntries) {
      m.server_names.emplace_back(value);
    } else if (command == "alpn" && m.application_protocols.size() < kMaxListEntries) {
      m.application_protocols.emplace_back(value);
    } else if (command == "dport") {
      m.destination_port = Number(value);
    }
  }

  // Validation: an error exactly when two normalized terms are equal (or
  // there are more than uxds allows).
  const std::vector<Term> terms = Expand(chains);
  std::set<decltype(terms[0].Key())> keys;
  bool duplicate = false;
  for (const Term& t : terms) duplicate |= !keys.insert(t.Key()).second;
  std::vector<int> indices;
  for (size_t i = 0; i < chains.size(); ++i) indices.push_back(static_cast<int>(i));
  uxds::ValidationErrors errors;
  uxds::ListenerResource::TcpListener listener;
  listener.address = "[::]:8080";
  listener.filter_chains = chains;
  listener.filter_chain_map = uxds::BuildFilterChainMap(listener.filter_chains, indices, errors);
  if (terms.size() > kMaxTerms) {
    Require(!errors.ok());
    return 0;
  }
  Require(errors.ok() == !duplicate);
  if (!errors.ok()) return 0;
  if (has_default) {
    listener.default_filter_chain.emplace();
    listener.default_filter_chain->name = "default";
  }
  const uxds::FilterChainMatcher matcher(listener);

  // Connections: the listed ones, and addresses around every prefix.
  std::vector<Ip> destinations;
  std::vector<Ip> sources;
  for (const FilterChain& chain : chains) {
    for (const CidrRange& r : chain.filter_chain_match.prefix_ranges) {
      destinations.push_back(Ip{r.is_ipv6, r.address});
      destinations.push_back(LastAddress(r));
    }
    for (const CidrRange& r : chain.filter_chain_match.source_prefix_ranges) {
      sources.push_back(Ip{r.is_ipv6, r.address});
      sources.push_back(LastAddress(r));
    }
  }
  destinations.push_back(*ParseIp("10.0.0.1"));
  destinations.push_back(*ParseIp("2001:db8::1"));
  sources.push_back(*ParseIp("127.0.0.1"));
  sources.push_back(*ParseIp("::1"));
  sources.push_back(*ParseIp("203.0.113.9"));
  sources.push_back(*ParseIp("2001:db8:ffff::9"));
  destinations.resize(std::min<size_t>(destinations.size(), 48));
  sources.resize(std::min<size_t>(sources.size(), 48));
  std::vector<uint16_t> ports = {40000};
  for (const FilterChain& chain : chains) {
    for (uint32_t port : chain.filter_chain_match.source_ports) {
      if (ports.size() < 8) ports.push_back(static_cast<uint16_t>(port));
    }
  }
  for (const Ip& local : destinations) {
    for (const Ip& peer : sources) {
      connections.push_back({local, peer, ports[connections.size() % ports.size()]});
    }
    connections.push_back({local, local, ports[connections.size() % ports.size()]});
    if (!local.v6) connections.push_back({Mapped(local), Mapped(local), ports[0]});
  }
  for (const Connection& c : connections) {
    for (int form = 0; form < 2; ++form) {
      const Ip local = form == 0 ? c.local : Mapped(c.local);
      const Ip peer = form == 0 ? c.peer : Mapped(c.peer);
      auto local_address = uxds::SocketAddress::FromIpAndPort(IpText(local), 8080);
      auto peer_address = uxds::SocketAddress::FromIpAndPort(IpText(peer), c.port);
      Require(local_address.ok() && peer_address.ok());
      const FilterChain* selected = matcher.Select({*local_address, *peer_address});
      const int expected = PlainSelect(terms, local, peer, c.port);
      if (expected >= 0) {
        Require(selected == &listener.filter_chains[static_cast<size_t>(expected)]);
      } else if (has_default) {
        Require(selected == &*listener.default_filter_chain);
      } else {
        Require(selected == nullptr);
      }
    }
  }
  return 0;
}
