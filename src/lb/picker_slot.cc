// Epoch-based reclamation for published pickers (uxds/channel.h).
//
// Each thread that picks owns one ReaderRecord on a cache line of its own.
// Entering a scope stores the global epoch there; leaving stores 0. The
// control thread retires a replaced picker with the epoch current at the
// swap and deletes it once no record shows an epoch at or below that one.
//
// The reader's store must be visible before its load of the picker pointer
// (a store-load order x86 does not give for free). Instead of a full fence
// on every pick, the control thread runs membarrier(PRIVATE_EXPEDITED)
// before it scans the records: that forces the barrier onto every running
// thread of the process, so readers need only a compiler barrier (the
// asymmetric scheme of liburcu's "memb" flavour). Where membarrier is not
// available (old kernel, seccomp), readers fall back to a full fence.
//
// A scan's result outlives it: every picker retired before the scan with an
// epoch below both the oldest open scope's and the epoch read before the
// scan is unreachable, whichever slot it was retired from. The bound is
// kept, so a Reclaim() that finds everything below it frees without a
// system call (many balancers' pickers retired in one turn cost one scan).
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "uxds/channel.h"

namespace uxds {

namespace {

struct alignas(64) ReaderRecord {
  std::atomic<uint64_t> epoch{0};  // 0: not in a scope
  std::atomic<bool> owned{true};
  ReaderRecord* next = nullptr;  // immutable once published
  unsigned depth = 0;            // owner thread only
};

// Every scope reads the epoch; the control thread writes it once per
// publication. A line of its own, so no write to a neighbouring global
// takes it away from the picking threads.
struct alignas(64) Epoch {
  std::atomic<uint64_t> value{1};
};
Epoch g_epoch;
std::atomic<ReaderRecord*> g_records{nullptr};
// A picker retired with an epoch below it is unreachable (only grows).
std::atomic<uint64_t> g_reclaim_bound{0};
std::atomic<uint64_t> g_reader_scans{0};

bool RegisterMembarrier() {
  const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
}

bool HaveMembarrier() {
  static const bool have = RegisterMembarrier();
  return have;
}

// Records are never freed: a thread that exits hands its record back for
// the next new thread, so there are at most as many as threads ever picked
// at once.
ReaderRecord* AcquireRecord() {
  for (ReaderRecord* r = g_records.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    bool expected = false;
    if (!r->owned.load(std::memory_order_relaxed) &&
        r->owned.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      return r;
    }
  }
  auto* r = new ReaderRecord;
  ReaderRecord* head = g_records.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!g_records.compare_exchange_weak(head, r, std::memory_order_release,
                                            std::memory_order_relaxed));
  return r;
}

struct ThreadRecord {
  ReaderRecord* record = AcquireRecord();
  // Decided once per thread, after the process registered for membarrier
  // (HaveMembarrier() is called first by every path that reads it).
  bool full_fence = !HaveMembarrier();
  ~ThreadRecord();
};

// The pick path reads this plain pointer: a thread_local with a
// constructor is reached through a call that checks it was made.
thread_local constinit ThreadRecord* t_record = nullptr;

[[gnu::noinline]] ThreadRecord& MakeThreadRecord() {
  thread_local ThreadRecord record;
  t_record = &record;
  return record;
}

ThreadRecord::~ThreadRecord() {
  t_record = nullptr;
  record->owned.store(false, std::memory_order_release);
}

ThreadRecord& CurrentThreadRecord() {
  if (t_record == nullptr) [[unlikely]]
    return MakeThreadRecord();
  return *t_record;
}

void HeavyBarrier() {
  if (HaveMembarrier()) {
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// An epoch below which every retired picker is unreachable: the smallest
// epoch any open scope started in, and no more than the epoch before the
// scan (a picker retired after that has an epoch at or above it; a scope
// opened after the scan reads an epoch at or above it too). Also raises
// g_reclaim_bound to it.
uint64_t ScanReaders() {
  const uint64_t now = g_epoch.value.load(std::memory_order_acquire);
  HeavyBarrier();
  g_reader_scans.fetch_add(1, std::memory_order_relaxed);
  uint64_t bound = now;
  for (ReaderRecord* r = g_records.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    const uint64_t e = r->epoch.load(std::memory_order_acquire);
    if (e != 0) bound = std::min(bound, e);
  }
  // Release: a control thread that frees by this bound (acquire) comes
  // after the scopes this scan saw end.
  uint64_t known = g_reclaim_bound.load(std::memory_order_relaxed);
  while (known < bound && !g_reclaim_bound.compare_exchange_weak(
                              known, bound, std::memory_order_acq_rel, std::memory_order_relaxed)) {
  }
  return bound;
}

}  // namespace

std::string_view ConnectivityStateName(ConnectivityState state) {
  switch (state) {
    case ConnectivityState::kIdle:
      return "IDLE";
    case ConnectivityState::kConnecting:
      return "CONNECTING";
    case ConnectivityState::kReady:
      return "READY";
    case ConnectivityState::kTransientFailure:
      return "TRANSIENT_FAILURE";
  }
  return "UNKNOWN";
}

struct PickerSlot::Retired {
  const Picker* picker;
  uint64_t epoch;  // readers that entered at or before it may still see it
  Retired* next;
};

PickerSlot::PickerSlot() { (void)HaveMembarrier(); }

PickerSlot::~PickerSlot() {
  while (retired_ != nullptr) {
    Retired* r = retired_;
    retired_ = r->next;
    delete r->picker;
    delete r;
  }
  delete current_.load(std::memory_order_relaxed);
}

void PickerSlot::Publish(const Picker* picker) {
  const Picker* old = current_.exchange(picker, std::memory_order_acq_rel);
  if (old == nullptr) return;
  // A reader that reads the incremented epoch also sees the new pointer.
  const uint64_t epoch = g_epoch.value.fetch_add(1, std::memory_order_acq_rel);
  retired_ = new Retired{old, epoch, retired_};
  ++retired_count_;
}

size_t PickerSlot::FreeBelow(uint64_t bound) {
  for (Retired** link = &retired_; *link != nullptr;) {
    Retired* r = *link;
    if (r->epoch < bound) {
      *link = r->next;
      delete r->picker;
      delete r;
      --retired_count_;
    } else {
      link = &r->next;
    }
  }
  return retired_count_;
}

size_t PickerSlot::Reclaim() {
  if (retired_ == nullptr) return 0;
  if (FreeBelow(g_reclaim_bound.load(std::memory_order_acquire)) == 0) return 0;
  return FreeBelow(ScanReaders());
}

uint64_t PickerSlot::reader_scans() { return g_reader_scans.load(std::memory_order_relaxed); }

PickScope::PickScope(const PickerSlot& slot) {
  ThreadRecord& t = CurrentThreadRecord();
  if (t.record->depth++ == 0) {
    t.record->epoch.store(g_epoch.value.load(std::memory_order_acquire), std::memory_order_relaxed);
    if (t.full_fence) {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
  }
  picker_ = slot.current_.load(std::memory_order_acquire);
}

PickScope::~PickScope() {
  ThreadRecord& t = CurrentThreadRecord();
  if (--t.record->depth == 0) t.record->epoch.store(0, std::memory_order_release);
}

}  // namespace uxds
