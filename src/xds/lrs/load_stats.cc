#include "xds/lrs/load_stats.h"

namespace uxds {

uint64_t ShardedCounter::Read() const {
  uint64_t sum = 0;
  for (const Shard& s : shards_) sum += s.value.load(std::memory_order_relaxed);
  return sum;
}

LocalityLoadStats::Totals LocalityLoadStats::Read() const {
  // Finished calls first (acquire, pairing with CallFinished): every call
  // seen finished was issued before, so in_progress() never counts a
  // finished call as issued-not-finished twice.
  Totals totals;
  for (const Counts& s : shards_) {
    totals.succeeded += s.succeeded.load(std::memory_order_acquire);
    totals.failed += s.failed.load(std::memory_order_acquire);
  }
  for (const Counts& s : shards_) totals.issued += s.issued.load(std::memory_order_acquire);
  return totals;
}

bool ClusterLoadReport::empty() const {
  if (total_dropped != 0) return false;
  for (const Locality& l : localities) {
    if (l.succeeded != 0 || l.failed != 0 || l.issued != 0 || l.in_progress != 0) return false;
  }
  return true;
}

ClusterLoadStats::ClusterLoadStats(std::string cluster_name, std::string eds_service_name)
    : cluster_name_(std::move(cluster_name)),
      eds_service_name_(std::move(eds_service_name)),
      last_report_(Clock::now()) {}

ClusterLoadStats::~ClusterLoadStats() = default;

std::shared_ptr<LocalityLoadStats> ClusterLoadStats::Locality(const LocalityName& name) {
  LocalityEntry& entry = localities_[name];
  if (entry.stats == nullptr) entry.stats = std::make_shared<LocalityLoadStats>(name);
  return entry.stats;
}

std::shared_ptr<ShardedCounter> ClusterLoadStats::DropCategory(const std::string& category) {
  DropEntry& entry = drops_[category];
  if (entry.counter == nullptr) entry.counter = std::make_shared<ShardedCounter>();
  return entry.counter;
}

bool ClusterLoadStats::HasCallsInProgress() const {
  for (const auto& [name, entry] : localities_) {
    if (entry.stats->Read().in_progress() != 0) return true;
  }
  return false;
}

ClusterLoadReport ClusterLoadStats::TakeReport(Clock::time_point now) {
  ClusterLoadReport report;
  report.cluster_name = cluster_name_;
  report.eds_service_name = eds_service_name_;
  report.interval = now - last_report_;
  last_report_ = now;
  for (auto it = localities_.begin(); it != localities_.end();) {
    LocalityEntry& entry = it->second;
    const LocalityLoadStats::Totals now_totals = entry.stats->Read();
    ClusterLoadReport::Locality l;
    l.name = it->first;
    l.succeeded = now_totals.succeeded - entry.reported.succeeded;
    l.failed = now_totals.failed - entry.reported.failed;
    l.issued = now_totals.issued - entry.reported.issued;
    l.in_progress = now_totals.in_progress();
    entry.reported = now_totals;
    const bool active = l.succeeded != 0 || l.failed != 0 || l.issued != 0 || l.in_progress != 0;
    // Only pickers hold a locality's stats; with none left and no call in
    // progress (that holds a raw pointer to it), nothing can count in it.
    const bool forgotten = entry.stats.use_count() == 1 && l.in_progress == 0;
    if (active || !forgotten) report.localities.push_back(std::move(l));
    it = forgotten ? localities_.erase(it) : std::next(it);
  }
  for (auto it = drops_.begin(); it != drops_.end();) {
    DropEntry& entry = it->second;
    const uint64_t total = entry.counter->Read();
    const uint64_t dropped = total - entry.reported;
    entry.reported = total;
    if (dropped != 0) report.dropped_by_category[it->first] = dropped;
    report.total_dropped += dropped;
    it = entry.counter.use_count() == 1 ? drops_.erase(it) : std::next(it);
  }
  const uint64_t uncategorized = uncategorized_drops_.Read();
  report.total_dropped += uncategorized - uncategorized_reported_;
  uncategorized_reported_ = uncategorized;
  return report;
}

}  // namespace uxds
