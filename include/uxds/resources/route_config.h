// A RouteConfiguration resource (RDS, or inline in a Listener's
// HttpConnectionManager) as gRPC understands it, parsed and validated once on
// the control thread: virtual hosts by domain, routes with path / header /
// runtime-fraction matchers (A28), cluster or weighted-cluster actions with
// hash policies (A42) and max stream duration (A31), and the server's
// non_forwarding_action (A36). Plain values with deep equality.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "uxds/resources/http_filter_config.h"
#include "uxds/resources/matchers.h"

namespace uxds {

struct RouteConfigResource {
  // A42: how a request hash is computed. Kinds gRPC does not support
  // (cookie, connection_properties, query_parameter, filter_state keys other
  // than io.grpc.channel_id) are kept as kUnsupported: they produce no hash,
  // which matters for `terminal`.
  struct HashPolicy {
    struct Header {
      std::string header_name;
      // regex_rewrite: the header value with every match of `regex` replaced
      // by `regex_substitution` (RE2::GlobalReplace); no rewrite if invalid.
      Regex regex;
      std::string regex_substitution;
      friend bool operator==(const Header&, const Header&) = default;
    };
    // filter_state key "io.grpc.channel_id": a random value fixed per channel.
    struct ChannelId {
      friend bool operator==(const ChannelId&, const ChannelId&) = default;
    };
    struct Unsupported {
      friend bool operator==(const Unsupported&, const Unsupported&) = default;
    };

    std::variant<Header, ChannelId, Unsupported> policy;
    bool terminal = false;
    friend bool operator==(const HashPolicy&, const HashPolicy&) = default;
  };

  struct Route {
    struct Matchers {
      // prefix -> kPrefix, path -> kExact, safe_regex -> kSafeRegex;
      // ignore_case when case_sensitive is false (not for regexes).
      StringMatcher path;
      std::vector<HeaderMatcher> headers;
      // runtime_fraction.default_value per million (capped at 1000000).
      std::optional<uint32_t> fraction_per_million;
      friend bool operator==(const Matchers&, const Matchers&) = default;
    };

    struct ClusterWeight {
      std::string name;
      uint32_t weight = 0;  // never 0: zero-weight entries are dropped
      // A39: per-filter overrides for calls sent to this cluster (they win
      // over the route's).
      HttpFilterOverrides filter_overrides = {};
      friend bool operator==(const ClusterWeight&, const ClusterWeight&) = default;
    };

    struct RouteAction {
      struct ClusterName {
        std::string name;
        friend bool operator==(const ClusterName&, const ClusterName&) = default;
      };
      struct WeightedClusters {
        std::vector<ClusterWeight> clusters;  // non-empty, weights sum <= UINT32_MAX
        friend bool operator==(const WeightedClusters&, const WeightedClusters&) = default;
      };

      std::variant<ClusterName, WeightedClusters> cluster;
      std::vector<HashPolicy> hash_policies;
      // A31: max_stream_duration.grpc_timeout_header_max, else
      // max_stream_duration.max_stream_duration.
      std::optional<std::chrono::nanoseconds> max_stream_duration;
      friend bool operator==(const RouteAction&, const RouteAction&) = default;
    };

    // A36: the action server-side routes are expected to have.
    struct NonForwardingAction {
      friend bool operator==(const NonForwardingAction&, const NonForwardingAction&) = default;
    };
    // Any other action (redirect, direct_response, filter_action, newer
    // ones): RPCs that match the route fail with UNAVAILABLE (A36).
    struct UnsupportedAction {
      friend bool operator==(const UnsupportedAction&, const UnsupportedAction&) = default;
    };

    Matchers matchers;
    std::variant<UnsupportedAction, RouteAction, NonForwardingAction> action;
    // A39: per-filter overrides of this route (they win over the virtual
    // host's).
    HttpFilterOverrides filter_overrides = {};
    friend bool operator==(const Route&, const Route&) = default;
  };

  struct VirtualHost {
    // Exact ("a.example.com"), suffix ("*.example.com"), prefix ("a.*") or
    // "*"; never empty.
    std::vector<std::string> domains;
    // Only the routes gRPC can use: routes with query_parameters, with a
    // path or prefix that no gRPC method can match, or with a cluster
    // specifier gRPC does not support are left out (A28).
    std::vector<Route> routes;
    // A39: per-filter overrides for every route of this virtual host.
    HttpFilterOverrides filter_overrides = {};
    friend bool operator==(const VirtualHost&, const VirtualHost&) = default;
  };

  std::vector<VirtualHost> virtual_hosts;

  // A28: the virtual host whose domains match `authority` most specifically:
  // exact, then the longest suffix pattern, then the longest prefix pattern,
  // then "*"; the first virtual host wins a tie. Case-insensitive. nullptr if
  // none matches.
  const VirtualHost* FindVirtualHost(std::string_view authority) const;

  // One-line JSON for `uxds watch`.
  std::string ToJson() const;

  friend bool operator==(const RouteConfigResource&, const RouteConfigResource&) = default;
};

}  // namespace uxds
