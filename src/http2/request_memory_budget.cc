#include "http2/request_memory_budget.h"

#include <algorithm>
#include <string>

namespace uxds::http2::detail {

void RequestMemoryBudget::Join(Member* member) { members_.push_back(member); }

void RequestMemoryBudget::Leave(Member* member) {
  std::erase(members_, member);
  ForgetWaiter(member);
}

void RequestMemoryBudget::Recharge(size_t before, size_t after, size_t unfinished_before,
                                   size_t unfinished_after) {
  used_ = used_ - before + after;
  unfinished_ = unfinished_ - unfinished_before + unfinished_after;
  peak_ = std::max(peak_, used_);
  if (after < before) TellWaiters();
}

bool RequestMemoryBudget::TryGrowWindow(size_t more) {
  // Growth is credit promised ahead of use: only while the budget is less
  // than half used, and never more than a quarter of it in all.
  if (used_ + more > limit_ / 2 || growth_ + more > limit_ / 4) return false;
  growth_ += more;
  used_ += more;
  peak_ = std::max(peak_, used_);
  return true;
}

void RequestMemoryBudget::ReleaseGrowth(size_t bytes) {
  growth_ -= bytes;
  used_ -= bytes;
  if (bytes > 0) TellWaiters();
}

void RequestMemoryBudget::WaitForRoom(Member* member) {
  if (std::find(waiters_.begin(), waiters_.end(), member) == waiters_.end()) {
    waiters_.push_back(member);
  }
  // A waiter told of room that finds none waits again; abandoning is left
  // to a connection that stalls on its own read path, where no other
  // connection is inside nghttp2.
  if (!telling_) AbandonUnfinishedWhileStuck();
}

void RequestMemoryBudget::ForgetWaiter(Member* member) { std::erase(waiters_, member); }

void RequestMemoryBudget::AbandonUnfinishedWhileStuck() {
  if (abandoning_) return;
  abandoning_ = true;
  // Complete messages leave as handlers read them; only when unfinished
  // ones hold half the budget can nothing else make room.
  while (!has_room() && unfinished_ >= limit_ / 2) {
    Member* largest = nullptr;
    for (Member* member : members_) {
      if (largest == nullptr || member->unfinished_bytes() > largest->unfinished_bytes()) {
        largest = member;
      }
    }
    if (largest == nullptr || largest->unfinished_bytes() == 0) break;
    const size_t before = unfinished_;
    largest->AbandonLargestUnfinished(ResourceExhaustedError(
        "server request memory budget exhausted (" + std::to_string(limit_ >> 20) +
        " MiB, mostly messages still arriving): the largest unfinished message was dropped"));
    ++abandoned_;
    if (unfinished_ >= before) break;  // nothing freed: do not spin
  }
  abandoning_ = false;
}

void RequestMemoryBudget::TellWaiters() {
  // A waiter told here returns credit and may wait again (going to the
  // back): one pass at a time, over the waiters present when it starts.
  if (telling_) return;
  telling_ = true;
  for (size_t n = waiters_.size(); n > 0 && !waiters_.empty() && has_room(); --n) {
    Member* waiter = waiters_.front();
    waiters_.pop_front();
    waiter->OnBudgetRoom();
  }
  telling_ = false;
}

}  // namespace uxds::http2::detail
