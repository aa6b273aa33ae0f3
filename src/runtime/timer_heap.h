// The loop's timers: one binary min-heap of deadlines, driven by a single
// kernel wait timeout (the earliest deadline), instead of one kernel timeout
// request per timer. A heap, not a wheel: deadlines range from 1 ms to
// minutes (backoff, xDS resource timers, keepalive). 100 000 armed timers
// cost 100 000 slots and nothing in the kernel.
//
// Each slot holds its node's deadline and sequence beside the node, so a
// sift compares slots of one contiguous array and only writes to the nodes
// it moves (their index, kept in the node).
//
// Arming is O(log n). Cancelling is O(1): the node's slot is emptied and
// stays in the heap, ordered by its deadline, until that deadline comes
// round (the loop then wakes for nothing and drops it) or until empty slots
// outnumber armed ones, when the heap is rebuilt without them in O(n). So a
// cancel costs amortized O(1) and the heap never holds more than about
// twice the armed timers. That matters when an xDS response cancels 100 000
// resource timers armed together: removing each from the heap would take
// the heap's top (the earliest armed) and sift the whole depth.
#pragma once

#include <vector>

#include "uxds/loop.h"

namespace uxds::detail {

class TimerHeap {
 public:
  // Armed timers.
  bool empty() const { return armed_ == 0; }
  size_t size() const { return armed_; }

  // Whether the loop has a deadline to wait for, and the earliest one. It
  // may be an emptied slot's: the loop then wakes early, never late.
  bool has_deadline() const { return !slots_.empty(); }
  Loop::Clock::time_point earliest_deadline() const { return slots_.front().deadline; }

  // Arms `node` at its deadline (re-arms it if already armed).
  void Push(TimerNode* node);
  // Disarms `node` if armed.
  void Remove(TimerNode* node);
  // The armed node with the earliest deadline (ties: the first armed), out
  // of the heap, if its deadline is at most `now` and it was armed before
  // `sequence_limit`; else nullptr. Emptied slots met on the way are dropped.
  TimerNode* PopDue(Loop::Clock::time_point now, uint64_t sequence_limit);
  // Next value of TimerNode::sequence: equal deadlines fire in arming order.
  uint64_t NextSequence() { return next_sequence_++; }
  uint64_t sequence_limit() const { return next_sequence_; }

  // Slots in the heap, armed or emptied (tests: the bound above).
  size_t slot_count() const { return slots_.size(); }
  // Emptied slots are kept while there are at most this many, or at most
  // as many as armed timers.
  static constexpr size_t kEmptySlotsKept = 64;

 private:
  struct Slot {
    Loop::Clock::time_point deadline;
    uint64_t sequence;
    TimerNode* node;  // nullptr: cancelled
  };
  static bool Before(const Slot& a, const Slot& b) {
    return a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence;
  }
  void Place(size_t index, const Slot& slot);
  void SiftUp(size_t index);
  void SiftDown(size_t index);
  void PopTop();
  // Drops every emptied slot and restores the heap order (Floyd: O(n)).
  void Rebuild();

  std::vector<Slot> slots_;
  size_t armed_ = 0;
  size_t emptied_ = 0;
  uint64_t next_sequence_ = 0;
};

}  // namespace uxds::detail
