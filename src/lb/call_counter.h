// In-flight calls of one cluster, for the max_requests circuit breaker
// (A32, enforced in cluster_impl's picker).
//
// Counting every call on one atomic would put a read-modify-write on a line
// every picking thread writes. The count is split into per-thread-group
// shards on lines of their own; a check sums them. Like gRPC's check, it is
// approximate under races (two threads may both pass at the limit).
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/thread_shard.h"
#include "uxds/channel.h"

namespace uxds {

class CallCounter {
 public:
  // Counts one call unless `max_requests` are already counted.
  bool TryAcquire(uint32_t max_requests);
  void Release();
  int64_t Load() const;

 private:
  struct alignas(64) Shard {
    std::atomic<int64_t> calls{0};
  };
  Shard shards_[kCounterShards];
};

}  // namespace uxds
