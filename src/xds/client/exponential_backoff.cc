#include "xds/client/exponential_backoff.h"

#include <algorithm>

namespace uxds::xds_internal {

ExponentialBackoff::ExponentialBackoff(const Options& options)
    : options_(options), random_(std::random_device{}()) {}

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
    std::uniform_real_distribution<double> factor(1.0 - options_.jitter, 1.0 + options_.jitter);
    delay_ms = std::max(0.0, delay_ms * factor(random_));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(delay_ms));
}

}  // namespace uxds::xds_internal
