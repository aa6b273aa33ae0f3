// Which shard of a per-thread-sharded counter the calling thread writes.
//
// Counters that every picking thread updates are split into shards on cache
// lines of their own, so that threads do not take a line from each other on
// every call; a reader sums the shards. Threads get shards round-robin in
// the order they first ask, so up to kCounterShards threads never share one.
#pragma once

#include <atomic>

namespace uxds {

inline constexpr unsigned kCounterShards = 16;

inline unsigned ThreadShardIndex() {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned shard = next.fetch_add(1, std::memory_order_relaxed) % kCounterShards;
  return shard;
}

}  // namespace uxds
