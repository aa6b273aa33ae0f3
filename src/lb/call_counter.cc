#include "lb/call_counter.h"

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

void CallEnded(CallCounter* counter) {
  if (counter != nullptr) counter->Release();
}

}  // namespace uxds
