#include <liburing.h>

#include <algorithm>

#include "runtime/io_awaiter.h"
#include "uxds/loop.h"

namespace uxds {
namespace {

__kernel_timespec ToTimespec(std::chrono::nanoseconds d) {
  if (d.count() < 0) d = std::chrono::nanoseconds(0);
  __kernel_timespec ts{};
  ts.tv_sec = static_cast<long long>(d.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long long>(d.count() % 1'000'000'000);
  return ts;
}

}  // namespace

Task<Status> SleepFor(Loop& loop, std::chrono::nanoseconds duration) {
  __kernel_timespec ts = ToTimespec(duration);
  int res = co_await detail::SubmitIo(
      loop, [&ts](io_uring_sqe* sqe) { io_uring_prep_timeout(sqe, &ts, 0, 0); });
  if (res == -ETIME || res == 0) co_return OkStatus();
  if (res == -ECANCELED) co_return CancelledError("sleep cancelled");
  co_return ErrnoToStatus(-res, "timeout");
}

Task<Status> SleepUntil(Loop& loop, Loop::Clock::time_point deadline) {
  co_return co_await SleepFor(loop, deadline - Loop::Clock::now());
}

// --- Timer -----------------------------------------------------------------

class Timer::Op final : public detail::IoOp {
 public:
  using IoOp::IoOp;
  void OnComplete(int result, unsigned /*flags*/) override {
    if (orphaned || result != -ETIME || !callback) return;
    // The callback may destroy or restart the Timer: take it out first and
    // touch nothing of ours afterwards.
    std::function<void()> cb = std::move(callback);
    callback = nullptr;
    cb();
  }
  __kernel_timespec ts{};
  std::function<void()> callback;
  bool orphaned = false;
};

Timer::Timer(Loop& loop) : loop_(loop) {}

Timer::~Timer() {
  Cancel();
  delete op_;
}

void Timer::Start(std::chrono::nanoseconds duration, std::function<void()> callback) {
  Cancel();
  if (op_ == nullptr) op_ = new Op(loop_);
  op_->ts = ToTimespec(duration);
  op_->callback = std::move(callback);
  io_uring_prep_timeout(loop_.PrepareSqe(op_), &op_->ts, 0, 0);
}

void Timer::Cancel() {
  if (op_ == nullptr) return;
  if (op_->in_flight()) {
    // The kernel still holds the request: hand the op to the loop, which frees
    // it after its last completion, and start afresh next time.
    op_->orphaned = true;
    op_->callback = nullptr;
    loop_.AdoptOrphan(std::unique_ptr<detail::IoOp>(op_));
    op_ = nullptr;
  } else {
    op_->callback = nullptr;
  }
}

bool Timer::pending() const { return op_ != nullptr && op_->in_flight() && op_->callback; }

// --- Event -----------------------------------------------------------------

Event::~Event() {
  // A waiter still suspended here would never be resumed.
  assert(waiters_.empty());
}

void Event::Set() {
  if (set_) return;
  set_ = true;
  std::vector<Awaiter*> waiters = std::move(waiters_);
  waiters_.clear();
  for (Awaiter* w : waiters) {
    w->Unregister();
    loop_.Schedule(w->waiter_);
  }
}

bool Event::Awaiter::Suspend(std::coroutine_handle<> h, CancelState* cancel) {
  if (cancel != nullptr && cancel->cancelled()) {
    cancelled_ = true;
    return false;
  }
  waiter_ = h;
  event_.waiters_.push_back(this);
  if (cancel != nullptr) cancel->Register(this);
  return true;
}

void Event::Awaiter::OnCancel() {
  cancelled_ = true;
  auto& ws = event_.waiters_;
  ws.erase(std::remove(ws.begin(), ws.end(), this), ws.end());
  event_.loop_.Schedule(waiter_);
}

}  // namespace uxds
