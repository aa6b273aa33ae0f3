// FaultInjectionConfig: the HTTP fault filter's config (A33,
// envoy.extensions.filters.http.fault.v3.HTTPFault) as sent, at the top
// level of an HttpConnectionManager or as a per-route override. The client
// compiles it into each route (the abort's HTTP status mapped to a gRPC
// code there, as A33's config selector does).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace uxds {

struct FaultInjectionConfig {
  // A FractionalPercent: numerator over 100, 10000 or 1000000. A header's
  // percentage (numerator only) is over the same denominator, capped at
  // this numerator.
  struct Fraction {
    uint32_t numerator = 0;
    uint32_t denominator = 100;
    friend bool operator==(const Fraction&, const Fraction&) = default;
  };
  struct Abort {
    // One of the three: a gRPC status code (1-16), an HTTP status, or the
    // x-envoy-fault-abort-grpc-request / x-envoy-fault-abort-request
    // headers. 0: not set.
    uint32_t grpc_status = 0;
    uint32_t http_status = 0;
    bool from_headers = false;
    Fraction percentage;
    friend bool operator==(const Abort&, const Abort&) = default;
  };
  struct Delay {
    // fixed_delay, or the x-envoy-fault-delay-request header (milliseconds).
    std::chrono::nanoseconds fixed_delay{0};
    bool from_headers = false;
    Fraction percentage;
    friend bool operator==(const Delay&, const Delay&) = default;
  };
  std::optional<Abort> abort;
  std::optional<Delay> delay;
  // A33: no fault is injected while this many faulted calls of the process
  // are active (unset: no limit).
  std::optional<uint32_t> max_active_faults;
  friend bool operator==(const FaultInjectionConfig&, const FaultInjectionConfig&) = default;
};

}  // namespace uxds
