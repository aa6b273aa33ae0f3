// Exponential backoff with jitter between ADS stream attempts (A57: "similar
// to what gRPC uses for connection attempts").
#pragma once

#include <chrono>
#include <cstdint>

namespace uxds::xds_internal {

class ExponentialBackoff {
 public:
  struct Options {
    std::chrono::milliseconds initial;
    double multiplier;
    double jitter;  // each delay is scaled by a random factor in [1 - jitter, 1 + jitter]
    std::chrono::milliseconds max;
  };

  explicit ExponentialBackoff(const Options& options);

  // The delay before the next attempt: `initial` after construction or
  // Reset(), then each time `multiplier` times the last (before jitter), at
  // most `max`.
  std::chrono::milliseconds NextDelay();
  // The next delay starts at `initial` again (a stream saw a response).
  void Reset() { next_is_initial_ = true; }

 private:
  Options options_;
  bool next_is_initial_ = true;
  double current_ms_ = 0;
  // splitmix64 state for the jitter: 8 bytes, seeded per backoff from a
  // per-thread source (every subchannel has a backoff; see the .cc).
  uint64_t random_state_;
};

}  // namespace uxds::xds_internal
