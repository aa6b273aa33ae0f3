// ConnectionQuota: a server's max_connections when it accepts on several
// loops at once. Every loop takes a slot from the one count before it
// serves a connection and gives it back when the connection ends (or stops
// counting), so the bound holds for the server as a whole however the
// kernel spreads connections over the loops' sockets.
//
// Any thread. A slot is one relaxed read-modify-write on a line the loops
// share, once per connection, never per call.
#pragma once

#include <atomic>
#include <cstddef>

namespace uxds::http2::detail {

class ConnectionQuota {
 public:
  explicit ConnectionQuota(size_t limit) : limit_(limit) {}
  ConnectionQuota(const ConnectionQuota&) = delete;
  ConnectionQuota& operator=(const ConnectionQuota&) = delete;

  // Takes one slot; false, taking nothing, when all `limit` are taken.
  bool TryTake() {
    size_t taken = taken_.load(std::memory_order_relaxed);
    do {
      if (taken >= limit_) return false;
    } while (!taken_.compare_exchange_weak(taken, taken + 1, std::memory_order_relaxed));
    return true;
  }
  // Gives back `count` slots taken before.
  void Give(size_t count = 1) { taken_.fetch_sub(count, std::memory_order_relaxed); }

  size_t limit() const { return limit_; }
  size_t taken() const { return taken_.load(std::memory_order_relaxed); }

 private:
  const size_t limit_;
  alignas(64) std::atomic<size_t> taken_{0};
};

}  // namespace uxds::http2::detail
