#include "server/filter_chain_matcher.h"

#include <algorithm>

namespace uxds {
namespace {

using SourceType = FilterChainMatch::SourceType;

constexpr int32_t kNone = LongestPrefixTable::kNone;

// The prefixed entries of a level, as ranges naming their index, and the
// index of its unprefixed ("any address") entry, if it has one. The
// unprefixed entry is only the fallback: a /0 range is more specific (gRPC).
template <typename Entry>
LongestPrefixTable BuildLevel(const std::vector<Entry>& entries, int32_t first_index) {
  std::vector<LongestPrefixTable::Range> ranges;
  int32_t any_address = kNone;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int32_t index = first_index + static_cast<int32_t>(i);
    if (entries[i].prefix.has_value()) {
      ranges.push_back({*entries[i].prefix, index});
    } else {
      any_address = index;
    }
  }
  return LongestPrefixTable(ranges, any_address);
}

}  // namespace

FilterChainMatcher::FilterChainMatcher(const ListenerResource::TcpListener& listener) {
  if (listener.default_filter_chain.has_value()) default_chain_ = &*listener.default_filter_chain;
  const FilterChainMap& map = listener.filter_chain_map;
  destinations_ = BuildLevel(map.destination_ips, 0);
  for (const FilterChainMap::DestinationIp& destination : map.destination_ips) {
    SourceTables tables;
    for (size_t type = 0; type < tables.size(); ++type) {
      const std::vector<FilterChainMap::SourceIp>& sources = destination.source_types[type];
      if (sources.empty()) {
        tables[type] = kNone;
        continue;
      }
      tables[type] = static_cast<int32_t>(source_ips_.size());
      source_ips_.push_back(BuildLevel(sources, static_cast<int32_t>(source_ports_.size())));
      for (const FilterChainMap::SourceIp& source : sources) {
        SourcePorts ports;
        for (const auto& [port, chain] : source.ports) {
          const FilterChain* filter_chain = &listener.filter_chains[chain];
          // A36 / gRPC: source port 0 stands for any port.
          if (port == 0) {
            ports.any_port = filter_chain;
          } else {
            ports.exact.emplace_back(port, filter_chain);  // std::map: sorted
          }
        }
        source_ports_.push_back(std::move(ports));
      }
    }
    destination_entries_.push_back(tables);
  }
}

const FilterChain* FilterChainMatcher::SourcePorts::Find(uint32_t port) const {
  auto it = std::lower_bound(exact.begin(), exact.end(), port,
                             [](const auto& entry, uint32_t p) { return entry.first < p; });
  if (it != exact.end() && it->first == port) return it->second;
  return any_port;
}

const FilterChain* FilterChainMatcher::SelectFromMap(const ConnectionAddresses& connection) const {
  const std::optional<IpAddressKey> destination = IpAddressKey::From(connection.local);
  const std::optional<IpAddressKey> source = IpAddressKey::From(connection.peer);
  if (!destination.has_value() || !source.has_value()) return nullptr;
  // No backtracking (Envoy, gRPC): once the longest destination prefix is
  // chosen, a miss in the later levels falls to the default chain, not to a
  // shorter destination prefix.
  const int32_t destination_entry = destinations_.Find(*destination);
  if (destination_entry == kNone) return nullptr;
  const SourceTables& tables = destination_entries_[static_cast<size_t>(destination_entry)];
  // A36 / Envoy: a connection from a loopback address or from the address it
  // connected to is SAME_IP_OR_LOOPBACK, any other EXTERNAL. The chains of
  // that type are used if there are any, else the chains for any type.
  const bool same_ip_or_loopback = source->IsLoopback() || *source == *destination;
  int32_t table = tables[static_cast<size_t>(same_ip_or_loopback ? SourceType::kSameIpOrLoopback
                                                                 : SourceType::kExternal)];
  if (table == kNone) table = tables[static_cast<size_t>(SourceType::kAny)];
  if (table == kNone) return nullptr;
  const int32_t ports = source_ips_[static_cast<size_t>(table)].Find(*source);
  if (ports == kNone) return nullptr;
  return source_ports_[static_cast<size_t>(ports)].Find(connection.peer.port());
}

const FilterChain* FilterChainMatcher::Select(const ConnectionAddresses& connection) const {
  const FilterChain* chain = SelectFromMap(connection);
  // A36: no chain matches -> the default_filter_chain, if there is one.
  return chain != nullptr ? chain : default_chain_;
}

}  // namespace uxds
