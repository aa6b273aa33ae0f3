// What load reporting (LRS) counts: calls per locality and drops per
// category of one cluster (A42 moved the counting into cluster_impl).
//
// Counting happens on application threads, at pick and at call end, and
// must not lock, allocate or make every picking thread write one shared
// cache line. Each counter is therefore split into per-thread shards on
// lines of their own (runtime/thread_shard.h, spread round-robin): a thread
// adds to its shard with a relaxed fetch_add on a line no other thread
// writes while there are no more threads than shards; the
// control thread sums the shards when it builds a report. Counts are
// cumulative and never reset: a report is the difference to the totals of
// the previous one, so a count added while a report is built is simply in
// the next one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/thread_shard.h"
#include "uxds/channel.h"
#include "uxds/resources/endpoint.h"

namespace uxds {

// A count many threads add to.
class ShardedCounter {
 public:
  void Add() { shards_[ThreadSpreadShardIndex()].value.fetch_add(1, std::memory_order_relaxed); }
  uint64_t Read() const;

 private:
  struct alignas(64) Shard {
    std::atomic<uint64_t> value{0};
  };
  Shard shards_[kCounterShards];
};

// The calls of one locality of one cluster.
class LocalityLoadStats : public std::enable_shared_from_this<LocalityLoadStats> {
 public:
  explicit LocalityLoadStats(LocalityName name) : name_(std::move(name)) {}
  LocalityLoadStats(const LocalityLoadStats&) = delete;
  LocalityLoadStats& operator=(const LocalityLoadStats&) = delete;

  // Any thread: a call was picked into this locality, and it ended.
  void CallStarted() { Shard().issued.fetch_add(1, std::memory_order_relaxed); }
  // Unsigned shards wrap, their sum does not: only the sum means anything.
  void CallNotStarted() { Shard().issued.fetch_sub(1, std::memory_order_release); }
  void CallFinished(bool ok) {
    // Release: a control thread that sees every call finished may free
    // this object (LoadStatsStore), after this write, the last access.
    (ok ? Shard().succeeded : Shard().failed).fetch_add(1, std::memory_order_release);
  }

  struct Totals {
    uint64_t issued = 0;
    uint64_t succeeded = 0;
    uint64_t failed = 0;
    // Calls issued and not finished yet.
    uint64_t in_progress() const {
      return issued > succeeded + failed ? issued - succeeded - failed : 0;
    }
  };
  // Control thread: the counts since this object was made.
  Totals Read() const;
  const LocalityName& name() const { return name_; }

 private:
  struct alignas(64) Counts {
    std::atomic<uint64_t> issued{0};
    std::atomic<uint64_t> succeeded{0};
    std::atomic<uint64_t> failed{0};
  };
  Counts& Shard() { return shards_[ThreadSpreadShardIndex()]; }

  const LocalityName name_;
  Counts shards_[kCounterShards];
};

// One report of one cluster: what happened since the previous one.
struct ClusterLoadReport {
  struct Locality {
    LocalityName name;
    uint64_t succeeded = 0;
    uint64_t failed = 0;
    uint64_t issued = 0;
    uint64_t in_progress = 0;  // now, not a difference
  };
  std::string cluster_name;
  std::string eds_service_name;
  std::vector<Locality> localities;
  std::map<std::string, uint64_t> dropped_by_category;
  uint64_t total_dropped = 0;  // categorized and uncategorized
  std::chrono::nanoseconds interval{0};

  // Nothing issued, finished, in progress or dropped.
  bool empty() const;
};

// The load of one cluster (and EDS service name) as one LRS server sees it.
// Made and read on the control thread; the counters it hands out are
// written from any thread.
class ClusterLoadStats {
 public:
  using Clock = std::chrono::steady_clock;
  ClusterLoadStats(std::string cluster_name, std::string eds_service_name);
  ~ClusterLoadStats();
  ClusterLoadStats(const ClusterLoadStats&) = delete;
  ClusterLoadStats& operator=(const ClusterLoadStats&) = delete;

  // Control thread. The counters of a locality / drop category, made on
  // first use. They stay valid while the caller holds the shared_ptr and,
  // for a locality, while calls counted in it are in progress.
  std::shared_ptr<LocalityLoadStats> Locality(const LocalityName& name);
  std::shared_ptr<ShardedCounter> DropCategory(const std::string& category);
  // Drops of no category: gRPC counts circuit-breaker drops here (A32).
  ShardedCounter& uncategorized_drops() { return uncategorized_drops_; }

  // Control thread: the report since the previous call (or since this
  // object was made). Localities and categories nobody holds any more are
  // forgotten once reported with nothing in progress.
  ClusterLoadReport TakeReport(Clock::time_point now);
  // Control thread: some counted call has not finished.
  bool HasCallsInProgress() const;

  const std::string& cluster_name() const { return cluster_name_; }
  const std::string& eds_service_name() const { return eds_service_name_; }

 private:
  struct LocalityEntry {
    std::shared_ptr<LocalityLoadStats> stats;
    LocalityLoadStats::Totals reported;
  };
  struct DropEntry {
    std::shared_ptr<ShardedCounter> counter;
    uint64_t reported = 0;
  };

  const std::string cluster_name_;
  const std::string eds_service_name_;
  std::map<LocalityName, LocalityEntry> localities_;
  std::map<std::string, DropEntry> drops_;
  ShardedCounter uncategorized_drops_;
  uint64_t uncategorized_reported_ = 0;
  Clock::time_point last_report_;
};

}  // namespace uxds
