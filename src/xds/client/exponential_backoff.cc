#include "xds/client/exponential_backoff.h"

#include <unistd.h>

#include <algorithm>
#include <random>

#include "runtime/splitmix64.h"

namespace uxds::xds_internal {
namespace {

// One std::random_device per thread, not one per backoff: constructing one
// runs CPUID, which a hypervisor traps (about 40 µs on a VM), and a channel
// makes a subchannel, each with a backoff, per endpoint: 10 000 endpoints
// cost 0.4 s of the control loop before the first picker
// (xds_scale_bench, BM_EndpointPickerBuild).
// The process ID is mixed in because a fork() copies the thread's
// generator: parent and child would otherwise jitter their retries alike.
uint64_t NextSeed() {
  thread_local std::mt19937_64 seeds(std::random_device{}());
  return seeds() ^ (static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ULL);
}

// Uniform in [0, 1): the top 53 bits as a double's mantissa.
double UnitInterval(uint64_t& state) {
  return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
}

}  // namespace

ExponentialBackoff::ExponentialBackoff(const Options& options)
    : options_(options), random_state_(NextSeed()) {}

std::chrono::milliseconds ExponentialBackoff::NextDelay() {
  const double max_ms = static_cast<double>(options_.max.count());
  if (next_is_initial_) {
    next_is_initial_ = false;
    current_ms_ = static_cast<double>(options_.initial.count());
  } else {
    current_ms_ = current_ms_ * options_.multiplier;
  }
  current_ms_ = std::min(current_ms_, max_ms);
  double delay_ms = current_ms_;
  if (options_.jitter > 0) {
    const double factor =
        1.0 - options_.jitter + 2.0 * options_.jitter * UnitInterval(random_state_);
    delay_ms = std::max(0.0, delay_ms * factor);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(delay_ms));
}

}  // namespace uxds::xds_internal
