#include "http2/request_memory_budget.h"

#include <algorithm>
#include <string>

namespace uxds::http2::detail {

void RequestMemoryBudget::Join(Member* member) { members_.push_back(member); }

void RequestMemoryBudget::Leave(Member* member) {
  std::erase(members_, member);
  ForgetWaiter(member);
  TellWaiters(/*only_with_room=*/false);  // every share grew: one may be within its own now
}

void RequestMemoryBudget::Recharge(size_t before, size_t after, size_t unfinished_before,
                                   size_t unfinished_after) {
  used_ = used_ - before + after;
  unfinished_ = unfinished_ - unfinished_before + unfinished_after;
  peak_ = std::max(peak_, used_);
  if (after < before) TellWaiters(/*only_with_room=*/true);
}

bool RequestMemoryBudget::TryGrowWindow(size_t more) {
  // Growth is credit promised ahead of use: only while the budget is less
  // than half used, and never more than a quarter of it in all.
  // (The member charges the credit it has granted and its peer has not
  // used yet with its held bytes.)
  if (used_ + more > limit_ / 2 || growth_ + more > limit_ / 4) return false;
  growth_ += more;
  return true;
}

void RequestMemoryBudget::ReleaseGrowth(size_t bytes) { growth_ -= bytes; }

void RequestMemoryBudget::WaitForRoom(Member* member) {
  if (std::find(waiters_.begin(), waiters_.end(), member) == waiters_.end()) {
    waiters_.push_back(member);
  }
}

void RequestMemoryBudget::ForgetWaiter(Member* member) { std::erase(waiters_, member); }

void RequestMemoryBudget::MakeRoom() {
  if (abandoning_ || telling_) return;
  abandoning_ = true;
  while (!has_room()) {
    // The member whose calls hold the most (a grown window nobody uses
    // holds nothing a call could free).
    Member* largest = nullptr;
    for (Member* member : members_) {
      if (largest == nullptr || member->abandonable_bytes() > largest->abandonable_bytes()) {
        largest = member;
      }
    }
    if (largest == nullptr || largest->abandonable_bytes() == 0) break;
    // It is within its share (a member at its share waits, so it is not):
    // it gets its calls through, unless messages that cannot finish (no
    // credit, nothing to read) hold half the budget.
    if (largest->held_bytes() < fair_share() && unfinished_ < limit_ / 2) break;
    const size_t before = largest->held_bytes();
    largest->AbandonLargestCall(ResourceExhaustedError(
        "server request memory budget exhausted (" + std::to_string(limit_ >> 20) +
        " MiB): the call holding the most of it was ended"));
    if (largest->held_bytes() >= before) break;  // nothing freed: do not spin
    ++abandoned_;
  }
  abandoning_ = false;
}

void RequestMemoryBudget::TellWaiters(bool only_with_room) {
  // A waiter told here returns credit and may wait again (going to the
  // back): one pass at a time, over the waiters present when it starts.
  if (telling_) return;
  telling_ = true;
  for (size_t n = waiters_.size(); n > 0 && !waiters_.empty() && (has_room() || !only_with_room);
       --n) {
    Member* waiter = waiters_.front();
    waiters_.pop_front();
    waiter->OnBudgetRoom();
  }
  telling_ = false;
}

}  // namespace uxds::http2::detail
