// Which shard of a per-thread-sharded counter the calling thread writes.
//
// Counters that every picking thread updates are split into shards on cache
// lines of their own, so that threads do not take a line from each other on
// every call; a reader sums the shards. The first kOwnedShards threads to
// ask each get a shard of their own, which only they write: they add with a
// plain load and store (no locked instruction on the call path). Threads
// after them share the last shard, and add to it with an atomic
// read-modify-write.
#pragma once

#include <atomic>
#include <cstdint>

namespace uxds {

inline constexpr unsigned kOwnedShards = 16;
inline constexpr unsigned kCounterShards = kOwnedShards + 1;  // + the shared one

inline unsigned ThreadShardIndex() {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned shard = [] {
    const unsigned n = next.fetch_add(1, std::memory_order_relaxed);
    return n < kOwnedShards ? n : kOwnedShards;
  }();
  return shard;
}

// For counters every thread adds to with an atomic read-modify-write:
// threads spread round-robin over every shard, the 17th sharing the first's.
inline unsigned ThreadSpreadShardIndex() {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned shard = next.fetch_add(1, std::memory_order_relaxed) % kCounterShards;
  return shard;
}

// Adds `delta` to the calling thread's shard `cell` (at ThreadShardIndex()
// `shard`), releasing what the thread wrote before to a reader that
// acquires the sum.
inline void AddToShard(std::atomic<int64_t>& cell, unsigned shard, int64_t delta) {
  if (shard < kOwnedShards) {
    cell.store(cell.load(std::memory_order_relaxed) + delta, std::memory_order_release);
  } else {
    cell.fetch_add(delta, std::memory_order_release);
  }
}

}  // namespace uxds
