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

// A37's shared counters: one per key while anyone owns it or any call is
// counted in it. An entry whose owners all let go while calls were
// counted stays: the next owner of its key gets the same counter back
// (with its calls still counted), or a sweep frees it once its calls end.
using SharedKey = std::tuple<const void*, std::string, std::string>;
struct SharedEntry {
  CallCounter* counter = nullptr;
  size_t owners = 0;
};
std::map<SharedKey, SharedEntry>& SharedCounters() {
  static auto* counters = new std::map<SharedKey, SharedEntry>();  // lives until exit
  return *counters;
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
  SweepSharedLocked();
  size_t shared_awaiting = 0;
  for (const auto& [key, shared] : SharedCounters()) shared_awaiting += shared.owners == 0;
  return Orphans().size() + shared_awaiting;
}

void CallCounter::NoteShard(unsigned shard) {
  unsigned used = shards_used_.load(std::memory_order_relaxed);
  while (used <= shard &&
         !shards_used_.compare_exchange_weak(used, shard + 1, std::memory_order_relaxed)) {
  }
}

bool CallCounter::TryAcquire(uint32_t max_requests) {
  if (Load() >= static_cast<int64_t>(max_requests)) return false;
  Acquire();
  return true;
}

void CallCounter::Acquire() {
  const unsigned shard = ThreadShardIndex();
  if (shard >= shards_used_.load(std::memory_order_relaxed)) NoteShard(shard);
  AddToShard(shards_[shard].calls, shard, 1);
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

void CallCounter::SweepSharedLocked() {
  std::erase_if(SharedCounters(), [](const auto& entry) {
    const SharedEntry& shared = entry.second;
    if (shared.owners > 0 || shared.counter->LoadAll() != 0) return false;
    delete shared.counter;
    return true;
  });
}

std::shared_ptr<CallCounter> SharedCallCounter(const void* scope, const std::string& cluster,
                                               const std::string& eds_service_name) {
  // Channels of different XdsClients may configure at once, on their own
  // loops: a lock, held for one map lookup (never on the pick path).
  std::lock_guard lock(g_orphans_mutex);
  CallCounter::SweepLocked();
  CallCounter::SweepSharedLocked();
  auto it = SharedCounters().try_emplace(SharedKey{scope, cluster, eds_service_name}).first;
  SharedEntry& shared = it->second;
  if (shared.counter == nullptr) shared.counter = new CallCounter();
  ++shared.owners;
  // Each owner's shared_ptr gives its share back; the entry (and so `it`)
  // lives while any owner does.
  return std::shared_ptr<CallCounter>(shared.counter, [it](CallCounter* counter) {
    std::lock_guard lock(g_orphans_mutex);
    SharedEntry& entry = it->second;
    if (--entry.owners > 0 || counter->LoadAll() != 0) return;
    delete counter;
    SharedCounters().erase(it);
  });
}

}  // namespace uxds
