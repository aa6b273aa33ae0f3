#include "runtime/timer_heap.h"

namespace uxds::detail {

void TimerHeap::Place(size_t index, TimerNode* node) {
  nodes_[index] = node;
  node->heap_index_ = index;
}

void TimerHeap::SiftUp(size_t index) {
  TimerNode* node = nodes_[index];
  while (index > 0) {
    const size_t parent = (index - 1) / 2;
    if (!Before(node, nodes_[parent])) break;
    Place(index, nodes_[parent]);
    index = parent;
  }
  Place(index, node);
}

void TimerHeap::SiftDown(size_t index) {
  TimerNode* node = nodes_[index];
  const size_t n = nodes_.size();
  while (true) {
    size_t child = 2 * index + 1;
    if (child >= n) break;
    if (child + 1 < n && Before(nodes_[child + 1], nodes_[child])) ++child;
    if (!Before(nodes_[child], node)) break;
    Place(index, nodes_[child]);
    index = child;
  }
  Place(index, node);
}

void TimerHeap::Push(TimerNode* node) {
  Remove(node);
  node->sequence = NextSequence();
  nodes_.push_back(node);
  node->heap_index_ = nodes_.size() - 1;
  SiftUp(nodes_.size() - 1);
}

void TimerHeap::Remove(TimerNode* node) {
  if (!node->armed()) return;
  const size_t index = node->heap_index_;
  node->heap_index_ = TimerNode::kNotArmed;
  TimerNode* last = nodes_.back();
  nodes_.pop_back();
  if (last == node) return;
  Place(index, last);
  // The moved node may belong above or below its new place.
  if (index > 0 && Before(last, nodes_[(index - 1) / 2])) {
    SiftUp(index);
  } else {
    SiftDown(index);
  }
}

}  // namespace uxds::detail
