// In-flight calls of one cluster, for the max_requests circuit breaker
// (A32, enforced in cluster_impl's picker), or of one endpoint, for
// least_request (A48).
//
// Counting every call on one atomic would put a read-modify-write on a line
// every picking thread writes. The count is split into per-thread-group
// shards on lines of their own; a check sums them.
//
// A32: a pick checks and takes its slot in one TryAcquire(): one sum of the
// shards, then one add to the thread's own. Alone, it is exact: at
// max_requests in flight the next pick is refused, and it is admitted again
// once one ends. Under races it errs as gRPC's check does, never the other
// way: threads that sum before each other's add may all pass, so the count
// can exceed max_requests by at most the number of threads picking at once
// less one; a pick is refused only when the sum it read was at the limit
// (cluster_impl takes the slot before its child picks, and gives it back
// at once if the child does not complete the pick).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/thread_shard.h"
#include "uxds/channel.h"

namespace uxds {

// The calls counted in a counter keep it: a call holds only the raw
// pointer a pick returned (a reference count per call would be one more
// read-modify-write on a line every picking thread writes), and a counter
// whose last owner lets go while calls are still counted in it is freed by
// a later sweep that finds its count at zero. After the owners let go no
// pick can take a slot (the pickers that hold it are gone), so the count
// only falls; a sum read as zero then stays zero, and every Release() that
// made it zero has finished with the counter.
class CallCounter {
 public:
  // The only way to make one: its deleter waits for the calls counted in it.
  static std::shared_ptr<CallCounter> Create();

  // Counts one call unless `max_requests` are already counted (the check
  // and the take of A32, once per pick).
  bool TryAcquire(uint32_t max_requests);
  // Counts one call whatever the count (A48's outstanding calls).
  void Acquire();
  // Any thread; the counter stays valid until this returns.
  void Release();
  int64_t Load() const;
  // Counters whose owners let go with calls still counted (for tests).
  static size_t awaiting_calls();

 private:
  CallCounter() = default;
  // The shards any thread has written (a prefix: shards are handed out in
  // order): a check sums only those.
  void NoteShard(unsigned shard);
  // Every shard, whatever shards_used_ says (the owners have let go).
  int64_t LoadAll() const;
  static void OwnersLetGo(CallCounter* counter);
  static void SweepLocked();
  static void SweepSharedLocked();
  friend std::shared_ptr<CallCounter> SharedCallCounter(const void* scope,
                                                        const std::string& cluster,
                                                        const std::string& eds_service_name);

  struct alignas(64) Shard {
    std::atomic<int64_t> calls{0};
  };
  // Read by every pick; written once per thread that first counts here.
  alignas(64) std::atomic<unsigned> shards_used_{0};
  Shard shards_[kCounterShards];
};

// A37: "share the atomic used for circuit breaking thresholds across all
// connections for a given cluster": one counter per {cluster, EDS service
// name} within `scope` (the XdsClient the clusters come from), shared by
// every channel and every aggregate cluster that uses the cluster. The
// counter lives while someone holds it or a call is counted in it: a tree
// rebuilt while calls of the old one are still in flight gets the same
// counter back, with those calls counted (as gRPC's calls hold their
// counter). Config time only (takes a lock).
std::shared_ptr<CallCounter> SharedCallCounter(const void* scope, const std::string& cluster,
                                               const std::string& eds_service_name);

}  // namespace uxds
