// FilterChainMatcher: the filter chain an accepted connection gets (A36),
// looked up in tables built once per Listener update from the Listener's
// normalized FilterChainMap.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/socket_address.h"
#include "server/longest_prefix_table.h"
#include "uxds/resources/listener.h"

namespace uxds {

// The two ends of an accepted connection: `local` is the destination the
// client connected to, `peer` the client.
struct ConnectionAddresses {
  SocketAddress local;
  SocketAddress peer;
};

class FilterChainMatcher {
 public:
  // Built once per Listener update; `listener` must outlive the matcher.
  explicit FilterChainMatcher(const ListenerResource::TcpListener& listener);

  // A36: the most specific chain: destination IP (longest prefix), then
  // source type (SAME_IP_OR_LOOPBACK / EXTERNAL), then source IP (longest
  // prefix), then source port; else the default_filter_chain; else nullptr
  // (close the connection without sending a byte). Never allocates.
  const FilterChain* Select(const ConnectionAddresses& connection) const;

 private:
  // Source ports of one source prefix: exact ports, then port 0 (any).
  struct SourcePorts {
    std::vector<std::pair<uint32_t, const FilterChain*>> exact;  // sorted by port
    const FilterChain* any_port = nullptr;
    const FilterChain* Find(uint32_t port) const;
  };
  // One destination prefix: a source-prefix table per source type, indexed
  // by FilterChainMatch::SourceType; kNone where that type has no chain.
  using SourceTables = std::array<int32_t, 3>;

  const FilterChain* SelectFromMap(const ConnectionAddresses& connection) const;

  LongestPrefixTable destinations_;  // -> destination_entries_
  std::vector<SourceTables> destination_entries_;
  std::vector<LongestPrefixTable> source_ips_;  // -> source_ports_
  std::vector<SourcePorts> source_ports_;
  const FilterChain* default_chain_ = nullptr;
};

}  // namespace uxds
