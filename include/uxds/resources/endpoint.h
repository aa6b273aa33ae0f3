// A ClusterLoadAssignment resource (EDS) as gRPC understands it, parsed and
// validated once on the control thread (A27, A61 additional addresses, A76
// endpoint hash keys). Plain values with deep equality.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace uxds {

struct LocalityName {
  std::string region;
  std::string zone;
  std::string sub_zone;

  // {region="r", zone="z", sub_zone="s"} (gRPC's form, used in messages).
  std::string ToString() const;

  friend bool operator==(const LocalityName&, const LocalityName&) = default;
  // Localities of a priority are kept in this order (region, zone, sub_zone),
  // the order gRPC walks them in, so rings built from them match gRPC's.
  friend bool operator<(const LocalityName& a, const LocalityName& b) {
    return std::tie(a.region, a.zone, a.sub_zone) < std::tie(b.region, b.zone, b.sub_zone);
  }
};

struct EndpointResource {
  // envoy.config.core.v3.HealthStatus, same numbers.
  enum class HealthStatus { kUnknown = 0, kHealthy, kUnhealthy, kDraining, kTimeout, kDegraded };

  struct Endpoint {
    // Canonical "ip:port" ("10.0.0.1:443", "[2001:db8::1]:443"): the address
    // first, then A61's additional_addresses.
    std::vector<std::string> addresses;
    // LbEndpoint.load_balancing_weight (default 1, never 0).
    uint32_t weight = 1;
    HealthStatus health_status = HealthStatus::kUnknown;
    std::string hostname;
    // A76: metadata filter_metadata["envoy.lb"].hash_key, if set.
    std::string hash_key;

    // A27: only HEALTHY and UNKNOWN endpoints take traffic; the others are
    // kept (marked by health_status) for CSDS and tools.
    bool usable() const {
      return health_status == HealthStatus::kHealthy || health_status == HealthStatus::kUnknown;
    }

    friend bool operator==(const Endpoint&, const Endpoint&) = default;
  };

  struct Locality {
    LocalityName name;
    uint32_t weight = 0;  // never 0: localities without a weight are dropped
    std::vector<Endpoint> endpoints;
    friend bool operator==(const Locality&, const Locality&) = default;
  };

  struct Priority {
    std::vector<Locality> localities;  // sorted by name, names unique
    friend bool operator==(const Priority&, const Priority&) = default;
  };

  struct DropCategory {
    std::string category;
    uint32_t requests_per_million = 0;  // capped at 1000000
    friend bool operator==(const DropCategory&, const DropCategory&) = default;
  };

  // Index = priority; contiguous from 0, none empty.
  std::vector<Priority> priorities;
  std::vector<DropCategory> drop_overloads;
  // A27: localities without a load_balancing_weight (or weight 0), left
  // out of `priorities`; kept so that an error can name them.
  std::vector<LocalityName> localities_without_weight;

  // One-line JSON for `uxds watch`.
  std::string ToJson() const;

  friend bool operator==(const EndpointResource&, const EndpointResource&) = default;
};

}  // namespace uxds
