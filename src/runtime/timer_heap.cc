#include "runtime/timer_heap.h"

#include <algorithm>

namespace uxds::detail {

void TimerHeap::Place(size_t index, const Slot& slot) {
  slots_[index] = slot;
  if (slot.node != nullptr) slot.node->heap_index_ = index;
}

void TimerHeap::SiftUp(size_t index) {
  const Slot slot = slots_[index];
  while (index > 0) {
    const size_t parent = (index - 1) / 2;
    if (!Before(slot, slots_[parent])) break;
    Place(index, slots_[parent]);
    index = parent;
  }
  Place(index, slot);
}

void TimerHeap::SiftDown(size_t index) {
  const Slot slot = slots_[index];
  const size_t n = slots_.size();
  while (true) {
    size_t child = 2 * index + 1;
    if (child >= n) break;
    if (child + 1 < n && Before(slots_[child + 1], slots_[child])) ++child;
    if (!Before(slots_[child], slot)) break;
    Place(index, slots_[child]);
    index = child;
  }
  Place(index, slot);
}

void TimerHeap::PopTop() {
  const Slot last = slots_.back();
  slots_.pop_back();
  if (slots_.empty()) return;
  Place(0, last);
  SiftDown(0);
}

void TimerHeap::Rebuild() {
  std::erase_if(slots_, [](const Slot& slot) { return slot.node == nullptr; });
  emptied_ = 0;
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].node->heap_index_ = i;
  for (size_t i = slots_.size() / 2; i > 0; --i) SiftDown(i - 1);
}

void TimerHeap::Push(TimerNode* node) {
  Remove(node);
  node->sequence = NextSequence();
  slots_.push_back(Slot{node->deadline, node->sequence, node});
  node->heap_index_ = slots_.size() - 1;
  ++armed_;
  SiftUp(slots_.size() - 1);
}

void TimerHeap::Remove(TimerNode* node) {
  if (!node->armed()) return;
  const size_t index = node->heap_index_;
  node->heap_index_ = TimerNode::kNotArmed;
  --armed_;
  if (index == slots_.size() - 1) {
    slots_.pop_back();  // the last slot: nothing to keep in order
    return;
  }
  slots_[index].node = nullptr;
  ++emptied_;
  if (emptied_ > kEmptySlotsKept && emptied_ > armed_) Rebuild();
}

TimerNode* TimerHeap::PopDue(Loop::Clock::time_point now, uint64_t sequence_limit) {
  while (!slots_.empty()) {
    const Slot top = slots_.front();
    if (top.deadline > now || top.sequence >= sequence_limit) return nullptr;
    PopTop();
    if (top.node == nullptr) {
      --emptied_;
      continue;
    }
    top.node->heap_index_ = TimerNode::kNotArmed;
    --armed_;
    return top.node;
  }
  return nullptr;
}

}  // namespace uxds::detail
