// A33 fault injection on the client: the fault filters' configs of a route
// compiled at config time, and the per-call decision, made once when the
// call is routed (before its pick, as gRPC's filter runs before the LB
// pick): how long to delay the call, and the status to abort it with.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "client/call_request.h"
#include "uxds/resources/fault_injection.h"
#include "uxds/status.h"

namespace uxds::client_internal {

// One fault filter's config for one route, with the abort's HTTP status
// mapped to its gRPC code (A33: "the ConfigSelector should translate").
struct FaultPolicy {
  StatusCode abort_code = StatusCode::kOk;  // kOk: no abort (unless headers)
  bool abort_from_headers = false;
  FaultInjectionConfig::Fraction abort_percentage;
  std::chrono::nanoseconds delay{0};  // 0: no delay (unless headers)
  bool delay_from_headers = false;
  FaultInjectionConfig::Fraction delay_percentage;
  uint32_t max_active_faults = UINT32_MAX;

  static FaultPolicy Of(const FaultInjectionConfig& config);
};

// What a call's fault filters inject. Holds its place in the process's
// count of active faults (A33's max_active_faults) until destroyed.
class InjectedFault {
 public:
  InjectedFault(std::chrono::nanoseconds delay, Status abort, uint32_t active);
  InjectedFault(InjectedFault&& other) noexcept;
  InjectedFault& operator=(InjectedFault&& other) noexcept;
  ~InjectedFault();

  // How long the call waits before it is picked (0: none).
  std::chrono::nanoseconds delay() const { return delay_; }
  // Not OK: the call ends with this status once the delay is over.
  const Status& abort() const { return abort_; }

 private:
  std::chrono::nanoseconds delay_;
  Status abort_;
  uint32_t active_;  // 1 while counted in the process's gauge, else 0
};

// A33: rolls each filter's dice (each with its own draw), reading the
// x-envoy-fault-* headers of filters configured to take them; nullopt when
// no filter injects anything. The filters apply in order: their delays add
// up, and the first abort wins.
std::optional<InjectedFault> DecideFaults(std::span<const FaultPolicy> policies,
                                          CallMetadata metadata);

// Faults active in the process now (for tests).
uint32_t ActiveFaults();

}  // namespace uxds::client_internal
