#include "lb/call_counter.h"

#include <map>
#include <mutex>
#include <tuple>

namespace uxds {

bool CallCounter::TryAcquire(uint32_t max_requests) {
  if (Load() >= static_cast<int64_t>(max_requests)) return false;
  shards_[ThreadShardIndex()].calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// A call may end on another thread than the one that picked it: shards can
// go negative; only the sum means anything.
void CallCounter::Release() {
  shards_[ThreadShardIndex()].calls.fetch_sub(1, std::memory_order_relaxed);
}

int64_t CallCounter::Load() const {
  int64_t sum = 0;
  for (const Shard& s : shards_) sum += s.calls.load(std::memory_order_relaxed);
  return sum;
}

std::shared_ptr<CallCounter> SharedCallCounter(const void* scope, const std::string& cluster,
                                               const std::string& eds_service_name) {
  using Key = std::tuple<const void*, std::string, std::string>;
  // Channels of different XdsClients may configure at once, on their own
  // loops: a lock, held for one map lookup (never on the pick path).
  static std::mutex mutex;
  static std::map<Key, std::weak_ptr<CallCounter>> counters;
  std::lock_guard lock(mutex);
  // Forget the counters nobody holds any more, so the map stays as small as
  // the set of clusters in use.
  std::erase_if(counters, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<CallCounter>& slot = counters[Key{scope, cluster, eds_service_name}];
  std::shared_ptr<CallCounter> counter = slot.lock();
  if (counter == nullptr) {
    counter = std::make_shared<CallCounter>();
    slot = counter;
  }
  return counter;
}

void CallEnded(CallCounter* counter) {
  if (counter != nullptr) counter->Release();
}

}  // namespace uxds
