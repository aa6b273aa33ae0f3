// A Cluster resource (CDS) as gRPC understands it, parsed and validated once
// on the control thread (A27, A37 aggregate and LOGICAL_DNS clusters, A42 ring
// hash, A32 circuit breaking, A50 outlier detection, A29 TLS). Plain values with deep
// equality: an update equal to the cached one notifies nobody.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "uxds/bootstrap.h"
#include "uxds/resources/tls_context.h"

namespace uxds {

struct ClusterResource {
  // A27: endpoints come from EDS.
  struct Eds {
    // The ClusterLoadAssignment to watch; empty means the cluster's own name.
    std::string eds_service_name;
    friend bool operator==(const Eds&, const Eds&) = default;
  };
  // A37: endpoints come from resolving one DNS name.
  struct LogicalDns {
    std::string hostname;  // "host:port", IPv6 literals in brackets
    friend bool operator==(const LogicalDns&, const LogicalDns&) = default;
  };
  // A37: the endpoints of other clusters, in priority order.
  struct Aggregate {
    std::vector<std::string> prioritized_cluster_names;
    friend bool operator==(const Aggregate&, const Aggregate&) = default;
  };

  // The xDS LB policy (A42: not a gRPC LB policy tree, but what the cluster
  // resolver turns into one).
  struct LbPolicy {
    enum class EndpointPicking { kRoundRobin, kRingHash, kPickFirst, kLeastRequest };
    // A42 defaults; the local ring size cap (4096) is the LB policy's, not
    // the resource's, so the xDS values are kept as sent.
    static constexpr uint64_t kDefaultMinRingSize = 1024;
    static constexpr uint64_t kDefaultMaxRingSize = 8388608;
    static constexpr uint64_t kMaxRingSizeLimit = 8388608;
    // A48: choice_count defaults to 2; under 2 is rejected, over 10 is 10.
    static constexpr uint32_t kDefaultChoiceCount = 2;
    static constexpr uint32_t kMaxChoiceCount = 10;

    // Pick a locality by weight first (weighted_target, the legacy
    // ROUND_ROBIN and wrr_locality), then an endpoint inside it. False for
    // RING_HASH, which puts every endpoint of every locality on one ring.
    bool weighted_locality = true;
    EndpointPicking endpoint_picking = EndpointPicking::kRoundRobin;
    uint64_t min_ring_size = kDefaultMinRingSize;  // kRingHash only
    uint64_t max_ring_size = kDefaultMaxRingSize;  // kRingHash only
    // A76: hash this request header instead of the route's hash policies
    // (kRingHash only; from a ring_hash_experimental custom policy config).
    std::string request_hash_header;
    // A62: pick_first shuffles the endpoints of each update (kPickFirst only).
    bool shuffle_address_list = false;
    // A48: least_request samples this many READY endpoints per pick
    // (kLeastRequest only; in [2, 10]).
    uint32_t choice_count = kDefaultChoiceCount;

    friend bool operator==(const LbPolicy&, const LbPolicy&) = default;
  };

  // A50 (parsed and validated; not acted on yet). Defaults are gRPC's.
  struct OutlierDetection {
    struct SuccessRateEjection {
      uint32_t stdev_factor = 1900;
      uint32_t enforcement_percentage = 100;
      uint32_t minimum_hosts = 5;
      uint32_t request_volume = 100;
      friend bool operator==(const SuccessRateEjection&, const SuccessRateEjection&) = default;
    };
    struct FailurePercentageEjection {
      uint32_t threshold = 85;
      uint32_t enforcement_percentage = 100;
      uint32_t minimum_hosts = 5;
      uint32_t request_volume = 50;
      friend bool operator==(const FailurePercentageEjection&,
                             const FailurePercentageEjection&) = default;
    };
    std::chrono::nanoseconds interval = std::chrono::seconds(10);
    std::chrono::nanoseconds base_ejection_time = std::chrono::seconds(30);
    std::chrono::nanoseconds max_ejection_time = std::chrono::seconds(300);
    uint32_t max_ejection_percent = 10;
    std::optional<SuccessRateEjection> success_rate_ejection;
    std::optional<FailurePercentageEjection> failure_percentage_ejection;
    friend bool operator==(const OutlierDetection&, const OutlierDetection&) = default;
  };

  // A32: circuit breaking default.
  static constexpr uint32_t kDefaultMaxConcurrentRequests = 1024;

  std::variant<Eds, LogicalDns, Aggregate> type;
  LbPolicy lb_policy;
  uint32_t max_concurrent_requests = kDefaultMaxConcurrentRequests;
  // lrs_server was set (to `self`, A27): report load (LRS) to this server,
  // the one the Cluster came from. Not used for clusters reached through an
  // aggregate cluster (A37).
  std::optional<XdsServerConfig> lrs_server;
  std::optional<OutlierDetection> outlier_detection;
  // A29: the cluster's transport_socket held an UpstreamTlsContext: its
  // connections are TLS, checked as it says, when the channel uses xDS
  // credentials. Unset: plaintext (or the channel's fallback credentials).
  std::optional<CommonTlsContext> upstream_tls_context;

  // One-line JSON for `uxds watch`, e.g.
  // {"type":"EDS","eds_service_name":"s","lb_policy":{"name":"ROUND_ROBIN"},...}
  std::string ToJson() const;

  friend bool operator==(const ClusterResource&, const ClusterResource&) = default;
};

}  // namespace uxds
