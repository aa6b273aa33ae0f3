#include <algorithm>

#include "uxds/loop.h"

namespace uxds {
namespace {

// A sleeping coroutine: a node of the loop's timer heap, and a cancellation
// callback that disarms it.
class SleepAwaiter final : public detail::TimerNode, public CancelState::Callback {
 public:
  SleepAwaiter(Loop& loop, Loop::Clock::time_point deadline) : loop_(loop) {
    this->deadline = deadline;
  }
  ~SleepAwaiter() { loop_.DisarmTimer(this); }

  bool await_ready() const noexcept { return false; }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) {
    CancelState* cancel = detail::CancelStateOf(h);
    if (cancel != nullptr && cancel->cancelled()) {
      cancelled_ = true;
      return false;
    }
    waiter_ = h;
    loop_.ArmTimer(this, deadline);
    if (cancel != nullptr) cancel->Register(this);
    return true;
  }
  Status await_resume() const {
    return cancelled_ ? CancelledError("sleep cancelled") : OkStatus();
  }

  void OnExpired() override {
    Unregister();
    loop_.Schedule(waiter_);
  }
  void OnCancel() override {
    cancelled_ = true;
    loop_.DisarmTimer(this);
    loop_.Schedule(waiter_);
  }

 private:
  Loop& loop_;
  std::coroutine_handle<> waiter_;
  bool cancelled_ = false;
};

}  // namespace

Task<Status> SleepFor(Loop& loop, std::chrono::nanoseconds duration) {
  co_return co_await SleepAwaiter(loop, Loop::Clock::now() + duration);
}

Task<Status> SleepUntil(Loop& loop, Loop::Clock::time_point deadline) {
  co_return co_await SleepAwaiter(loop, deadline);
}

// --- Timer -----------------------------------------------------------------

void Timer::Node::OnExpired() {
  // The callback may destroy or restart the Timer: take it out first and
  // touch nothing of ours afterwards.
  std::function<void()> callback = std::move(timer.callback_);
  timer.callback_ = nullptr;
  if (callback) callback();
}

Timer::Timer(Loop& loop) : loop_(loop) {}

Timer::~Timer() { Cancel(); }

void Timer::Start(std::chrono::nanoseconds duration, std::function<void()> callback) {
  callback_ = std::move(callback);
  loop_.ArmTimer(&node_, Loop::Clock::now() + duration);
}

void Timer::Cancel() {
  loop_.DisarmTimer(&node_);
  callback_ = nullptr;
}

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
