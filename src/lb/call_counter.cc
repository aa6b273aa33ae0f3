#include "lb/call_counter.h"

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace uxds {

namespace {

// Counters whose owners let go while calls were counted in them.
std::mutex g_orphans_mutex;
std::vector<CallCounter*>& Orphans() {
  static auto* orphans = new std::vector<CallCounter*>();  // lives until exit
  return *orphans;
}

}  // namespace

std::shared_ptr<CallCounter> CallCounter::Create() {
  {
    std::lock_guard lock(g_orphans_mutex);
    SweepLocked();
  }
  return std::shared_ptr<CallCounter>(new CallCounter(), &CallCounter::OwnersLetGo);
}

void CallCounter::OwnersLetGo(CallCounter* counter) {
  std::lock_guard lock(g_orphans_mutex);
  Orphans().push_back(counter);
  SweepLocked();
}

void CallCounter::SweepLocked() {
  std::erase_if(Orphans(), [](CallCounter* counter) {
    if (counter->LoadAll() != 0) return false;
    delete counter;
    return true;
  });
}

size_t CallCounter::awaiting_calls() {
  std::lock_guard lock(g_orphans_mutex);
  SweepLocked();
  return Orphans().size();
}

void CallCounter::NoteShard(unsigned shard) {
  unsigned used = shards_used_.load(std::memory_order_relaxed);
  while (used <= shard &&
         !shards_used_.compare_exchange_weak(used, shard + 1, std::memory_order_relaxed)) {
  }
}

bool CallCounter::TryAcquire(uint32_t max_requests) {
  if (Load() >= static_cast<int64_t>(max_requests)) return false;
  const unsigned shard = ThreadShardIndex();
  if (shard >= shards_used_.load(std::memory_order_relaxed)) NoteShard(shard);
  AddToShard(shards_[shard].calls, shard, 1);
  return true;
}

// A call may end on another thread than the one that picked it: shards can
// go negative; only the sum means anything. The decrement is the last
// thing a call does with the counter (see the class comment).
void CallCounter::Release() {
  const unsigned shard = ThreadShardIndex();
  if (shard >= shards_used_.load(std::memory_order_relaxed)) NoteShard(shard);
  AddToShard(shards_[shard].calls, shard, -1);
}

// A32's check: the shards written so far. A thread that writes its first
// count here as this sums may be missed, as a count added just after the
// sum would be: the race A32's check already allows.
int64_t CallCounter::Load() const {
  const unsigned used = shards_used_.load(std::memory_order_relaxed);
  int64_t sum = 0;
  for (unsigned i = 0; i < used; ++i) sum += shards_[i].calls.load(std::memory_order_relaxed);
  return sum;
}

int64_t CallCounter::LoadAll() const {
  int64_t sum = 0;
  for (const Shard& s : shards_) sum += s.calls.load(std::memory_order_acquire);
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
    counter = CallCounter::Create();
    slot = counter;
  }
  return counter;
}

void CallEnded(CallCounter* counter) {
  if (counter != nullptr) counter->Release();
}

}  // namespace uxds
