// A Listener resource (LDS) as gRPC understands it, parsed and validated once
// on the control thread: a client's API listener holding an
// HttpConnectionManager (A27, A39), or an xDS-enabled server's TCP listener
// with filter chains (A36) whose FilterChainMatch is normalized into lookup
// tables. Plain values with deep equality: an identical Listener update
// changes nothing and drains no connection.
#pragma once

#include <array>
#include <chrono>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "uxds/resources/cidr_range.h"
#include "uxds/resources/route_config.h"
#include "uxds/resources/tls_context.h"

namespace uxds {

struct HttpConnectionManager {
  struct HttpFilter {
    std::string name;         // unique in the list
    std::string config_type;  // e.g. "envoy.extensions.filters.http.router.v3.Router"
    // envoy.filters.http.rbac (A41): the policy to enforce; nullopt enforces
    // nothing (no rules, or action LOG).
    std::optional<RbacPolicy> rbac = {};
    // envoy.filters.http.fault (A33, clients only): what to inject.
    std::optional<FaultInjectionConfig> fault = {};
    friend bool operator==(const HttpFilter&, const HttpFilter&) = default;
  };

  // The routes: the name of a RouteConfiguration to watch (RDS over the same
  // ADS stream), or the RouteConfiguration itself, inlined.
  std::variant<std::string, RouteConfigResource> route_config;
  // A39: the filters uxds supports, in order, the router last. Optional
  // filters of unknown types are left out.
  std::vector<HttpFilter> http_filters;
  // A31: common_http_protocol_options.max_stream_duration.
  std::optional<std::chrono::nanoseconds> http_max_stream_duration;

  friend bool operator==(const HttpConnectionManager&, const HttpConnectionManager&) = default;
};

struct FilterChainMatch {
  enum class SourceType { kAny = 0, kSameIpOrLoopback = 1, kExternal = 2 };

  std::optional<uint32_t> destination_port;
  std::vector<CidrRange> prefix_ranges;
  SourceType source_type = SourceType::kAny;
  std::vector<CidrRange> source_prefix_ranges;
  std::vector<uint32_t> source_ports;
  std::vector<std::string> server_names;
  std::string transport_protocol;
  std::vector<std::string> application_protocols;

  // A36: destination_port (needs use_original_dst), server_names,
  // application_protocols and a transport_protocol other than "" or
  // "raw_buffer" (need listener filters) can never match in gRPC.
  bool NeverMatches() const;
  // "{prefix_ranges={10.0.0.0/8}, source_type=EXTERNAL, source_ports={80}}"
  // (gRPC's form); "{}" for an empty matcher.
  std::string ToString() const;

  friend bool operator==(const FilterChainMatch&, const FilterChainMatch&) = default;
};

struct FilterChain {
  std::string name;
  FilterChainMatch filter_chain_match;
  // A36: exactly one network filter, the HttpConnectionManager.
  HttpConnectionManager http_connection_manager;
  // A29: the chain's transport_socket (none: plaintext, or the server's
  // fallback credentials).
  std::optional<DownstreamTlsContext> downstream_tls_context;
  friend bool operator==(const FilterChain&, const FilterChain&) = default;
};

// Every filter chain that can match, normalized (A36: the cross product of
// each matcher's lists) into the nested tables a connection is looked up in:
// destination prefix -> source type -> source prefix -> source port. Values
// are indices into TcpListener::filter_chains. Chains that never match are
// left out; within a destination prefix, chains with transport_protocol
// "raw_buffer" hide those without one (they are more specific). An
// IPv4-mapped IPv6 prefix (::ffff:10.0.0.0/104) is kept as the IPv4 prefix
// it stands for (10.0.0.0/8).
struct FilterChainMap {
  struct SourceIp {
    std::optional<CidrRange> prefix;   // nullopt: any source address
    std::map<uint32_t, size_t> ports;  // source port -> chain; 0: any port
    friend bool operator==(const SourceIp&, const SourceIp&) = default;
  };
  struct DestinationIp {
    std::optional<CidrRange> prefix;  // nullopt: any destination address
    // Indexed by FilterChainMatch::SourceType.
    std::array<std::vector<SourceIp>, 3> source_types;
    friend bool operator==(const DestinationIp&, const DestinationIp&) = default;
  };
  // Sorted by prefix (nullopt first); source IPs likewise.
  std::vector<DestinationIp> destination_ips;
  friend bool operator==(const FilterChainMap&, const FilterChainMap&) = default;
};

struct ListenerResource {
  // A27: a client Listener (api_listener).
  struct ApiListener {
    HttpConnectionManager http_connection_manager;
    friend bool operator==(const ApiListener&, const ApiListener&) = default;
  };
  // A36: an xDS-enabled server's Listener.
  struct TcpListener {
    // "address:port_value" as the resource states it (IPv6 in brackets):
    // the server compares it with its listening address as text.
    std::string address;
    std::vector<FilterChain> filter_chains;
    FilterChainMap filter_chain_map;
    // Used when no chain matches (its filter_chain_match is ignored); without
    // it such a connection is closed.
    std::optional<FilterChain> default_filter_chain;
    friend bool operator==(const TcpListener&, const TcpListener&) = default;
  };

  std::variant<ApiListener, TcpListener> listener;

  // One-line JSON for `uxds watch`.
  std::string ToJson() const;

  friend bool operator==(const ListenerResource&, const ListenerResource&) = default;
};

}  // namespace uxds
