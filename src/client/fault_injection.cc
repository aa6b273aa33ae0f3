#include "client/fault_injection.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <string_view>
#include <utility>

#include "http2/grpc_protocol.h"
#include "lb/lb_policy.h"

namespace uxds::client_internal {
namespace {

// A33: "a global counter (gauge)" of the process's active faults: the
// calls "injected by one or more faults". Written only by such calls.
std::atomic<uint32_t> g_active_faults{0};

// The parser saturates durations past 292 years: a delay that long would
// overflow the clock when added to now; 100 years is as long.
constexpr std::chrono::nanoseconds kLongestDelay = std::chrono::hours(24 * 365 * 100);

// The headers A33 lets a request use when the config says header_abort /
// header_delay. gRPC C++ reads the abort percentage from
// x-envoy-fault-abort-percentage, Envoy (and A33's list) from
// x-envoy-fault-abort-request-percentage: both are read.
constexpr std::string_view kAbortGrpcHeader = "x-envoy-fault-abort-grpc-request";
constexpr std::string_view kAbortHttpHeader = "x-envoy-fault-abort-request";
constexpr std::string_view kAbortPercentageHeader = "x-envoy-fault-abort-request-percentage";
constexpr std::string_view kAbortPercentageHeaderGrpcCpp = "x-envoy-fault-abort-percentage";
constexpr std::string_view kDelayHeader = "x-envoy-fault-delay-request";
constexpr std::string_view kDelayPercentageHeader = "x-envoy-fault-delay-request-percentage";

// A whole non-negative decimal number; nullopt otherwise (A33: "invalid
// headers will be ignored").
std::optional<uint64_t> Number(std::string_view text) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

StatusCode CodeOfHttpStatus(uint32_t http_status) {
  // A33: HTTP 200 aborts with UNKNOWN, the mapping of a 200 without
  // grpc-status.
  return http_status == 200 ? StatusCode::kUnknown
                            : http2::StatusCodeFromHttpStatus(static_cast<int>(http_status));
}

// A33: "each feature of fault injection is checked with a different random
// number".
bool Draw(const FaultInjectionConfig::Fraction& fraction) {
  if (fraction.numerator == 0) return false;
  if (fraction.numerator >= fraction.denominator) return true;
  return ThreadRandom() % fraction.denominator < fraction.numerator;
}

// The policy with the request's headers applied (only for the parts the
// config hands to the headers). The first valid value of a header wins.
FaultPolicy WithHeaders(const FaultPolicy& policy, CallMetadata metadata) {
  FaultPolicy applied = policy;
  std::optional<StatusCode> grpc_code;
  std::optional<StatusCode> http_code;
  std::optional<uint64_t> abort_percentage;
  std::optional<uint64_t> delay_ms;
  std::optional<uint64_t> delay_percentage;
  for (const auto& [name, value] : metadata) {
    if (policy.abort_from_headers) {
      if (name == kAbortGrpcHeader && !grpc_code.has_value()) {
        if (auto n = Number(value); n.has_value() && *n <= 16) {
          grpc_code = static_cast<StatusCode>(*n);
        }
      } else if (name == kAbortHttpHeader && !http_code.has_value()) {
        if (auto n = Number(value); n.has_value() && *n <= UINT32_MAX) {
          http_code = CodeOfHttpStatus(static_cast<uint32_t>(*n));
        }
      } else if ((name == kAbortPercentageHeader || name == kAbortPercentageHeaderGrpcCpp) &&
                 !abort_percentage.has_value()) {
        abort_percentage = Number(value);
      }
    }
    if (policy.delay_from_headers) {
      if (name == kDelayHeader && !delay_ms.has_value()) {
        delay_ms = Number(value);
      } else if (name == kDelayPercentageHeader && !delay_percentage.has_value()) {
        delay_percentage = Number(value);
      }
    }
  }
  if (policy.abort_from_headers) {
    applied.abort_code = grpc_code.value_or(http_code.value_or(StatusCode::kOk));
    // A33: a header's percentage is capped by the config's numerator.
    if (abort_percentage.has_value()) {
      applied.abort_percentage.numerator = static_cast<uint32_t>(
          std::min<uint64_t>(*abort_percentage, policy.abort_percentage.numerator));
    }
  }
  if (policy.delay_from_headers) {
    // Milliseconds, capped at a day (a longer delay outlives any deadline).
    constexpr uint64_t kLongestDelayMs = 24ull * 3600 * 1000;
    applied.delay = std::chrono::milliseconds(std::min(delay_ms.value_or(0), kLongestDelayMs));
    if (delay_percentage.has_value()) {
      applied.delay_percentage.numerator = static_cast<uint32_t>(
          std::min<uint64_t>(*delay_percentage, policy.delay_percentage.numerator));
    }
  }
  return applied;
}

}  // namespace

FaultPolicy FaultPolicy::Of(const FaultInjectionConfig& config) {
  FaultPolicy policy;
  if (config.abort.has_value()) {
    const auto& abort = *config.abort;
    policy.abort_from_headers = abort.from_headers;
    if (abort.grpc_status != 0) {
      policy.abort_code = static_cast<StatusCode>(abort.grpc_status);
    } else if (abort.http_status != 0) {
      policy.abort_code = CodeOfHttpStatus(abort.http_status);
    }
    policy.abort_percentage = abort.percentage;
  }
  if (config.delay.has_value()) {
    const auto& delay = *config.delay;
    policy.delay_from_headers = delay.from_headers;
    policy.delay = std::min(delay.fixed_delay, kLongestDelay);
    policy.delay_percentage = delay.percentage;
  }
  if (config.max_active_faults.has_value()) policy.max_active_faults = *config.max_active_faults;
  return policy;
}

InjectedFault::InjectedFault(std::chrono::nanoseconds delay, Status abort, uint32_t active)
    : delay_(delay), abort_(std::move(abort)), active_(active) {}

InjectedFault::InjectedFault(InjectedFault&& other) noexcept
    : delay_(other.delay_),
      abort_(std::move(other.abort_)),
      active_(std::exchange(other.active_, 0)) {}

InjectedFault& InjectedFault::operator=(InjectedFault&& other) noexcept {
  if (this != &other) {
    if (active_ > 0) g_active_faults.fetch_sub(active_, std::memory_order_relaxed);
    delay_ = other.delay_;
    abort_ = std::move(other.abort_);
    active_ = std::exchange(other.active_, 0);
  }
  return *this;
}

InjectedFault::~InjectedFault() {
  if (active_ > 0) g_active_faults.fetch_sub(active_, std::memory_order_relaxed);
}

std::optional<InjectedFault> DecideFaults(std::span<const FaultPolicy> policies,
                                          CallMetadata metadata) {
  std::chrono::nanoseconds delay{0};
  Status abort;
  uint32_t active = 0;
  for (const FaultPolicy& configured : policies) {
    const FaultPolicy policy = configured.abort_from_headers || configured.delay_from_headers
                                   ? WithHeaders(configured, metadata)
                                   : configured;
    const bool delays = policy.delay.count() > 0 && Draw(policy.delay_percentage);
    const bool aborts = policy.abort_code != StatusCode::kOk && Draw(policy.abort_percentage);
    if (!delays && !aborts) continue;
    // A33: no fault while max_active_faults calls (other than this one)
    // are faulted in the process. A call counts once, however many of its
    // filters inject.
    if (g_active_faults.load(std::memory_order_relaxed) - active >= policy.max_active_faults) {
      continue;
    }
    if (active == 0) {
      g_active_faults.fetch_add(1, std::memory_order_relaxed);
      active = 1;
    }
    // The filters' delays add up (each is at most kLongestDelay).
    if (delays) delay = std::min(delay + policy.delay, kLongestDelay);
    if (aborts) {
      // The call ends here: later filters never see it.
      abort = Status(policy.abort_code, "Fault injected");
      break;
    }
  }
  if (active == 0) return std::nullopt;
  return InjectedFault(delay, std::move(abort), active);
}

uint32_t ActiveFaults() { return g_active_faults.load(std::memory_order_relaxed); }

}  // namespace uxds::client_internal
