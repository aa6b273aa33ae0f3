// AsyncCondition: a condition variable for coroutines of one Loop.
//
// The HTTP/2 transport keeps its state in plain fields that nghttp2 callbacks
// update; tasks wait for a change with
//
//   while (!ready()) {
//     if (!(co_await condition.Wait()).ok()) co_return CancelledError(...);
//   }
//
// NotifyAll() never resumes a waiter inline (they run on a later loop turn),
// so a callback that notifies is never re-entered by the code it wakes.
#pragma once

#include <coroutine>
#include <vector>

#include "uxds/cancel.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds {

class AsyncCondition {
 public:
  explicit AsyncCondition(Loop& loop) : loop_(loop) {}
  ~AsyncCondition() {
    // Owners join their tasks first; a waiter left here would dangle.
    for (Awaiter* w : waiters_) w->condition_ = nullptr;
  }
  AsyncCondition(const AsyncCondition&) = delete;
  AsyncCondition& operator=(const AsyncCondition&) = delete;

  // Wakes every current waiter (on a later loop turn).
  void NotifyAll() {
    if (waiters_.empty()) return;
    std::vector<Awaiter*> woken;
    woken.swap(waiters_);
    for (Awaiter* w : woken) {
      w->Unregister();
      w->condition_ = nullptr;
      loop_.Schedule(w->handle_);
    }
  }
  bool has_waiters() const { return !waiters_.empty(); }

  class Awaiter : public CancelState::Callback {
   public:
    explicit Awaiter(AsyncCondition& c) : condition_(&c), loop_(c.loop_) {}
    ~Awaiter() override { Remove(); }
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) {
      CancelState* cancel = detail::CancelStateOf(h);
      if (cancel != nullptr && cancel->cancelled()) {
        cancelled_ = true;
        return false;
      }
      handle_ = h;
      condition_->waiters_.push_back(this);
      if (cancel != nullptr) cancel->Register(this);
      return true;
    }
    // OK after a NotifyAll(); CANCELLED when the waiting task was cancelled.
    Status await_resume() {
      Unregister();
      return cancelled_ ? CancelledError("cancelled") : OkStatus();
    }
    void OnCancel() override {
      cancelled_ = true;
      Remove();
      loop_.Schedule(handle_);
    }

   private:
    friend class AsyncCondition;
    void Remove() {
      if (condition_ == nullptr) return;
      auto& ws = condition_->waiters_;
      for (size_t i = 0; i < ws.size(); ++i) {
        if (ws[i] == this) {
          ws[i] = ws.back();
          ws.pop_back();
          break;
        }
      }
      condition_ = nullptr;
    }
    AsyncCondition* condition_;
    Loop& loop_;
    std::coroutine_handle<> handle_;
    bool cancelled_ = false;
  };

  Awaiter Wait() { return Awaiter(*this); }

 private:
  Loop& loop_;
  std::vector<Awaiter*> waiters_;
};

}  // namespace uxds
