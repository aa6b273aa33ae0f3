// Cooperative cancellation for coroutines on a Loop.
//
// Every Task runs under a CancelState: the one of the task that awaits it, or
// the one of the TaskGroup that spawned it. Cancelling a state runs every
// registered callback once (a pending io_uring operation submits
// IORING_OP_ASYNC_CANCEL, an Event wait resumes its waiter) and cancels every
// child state. Operations started under a cancelled state fail at once with
// CANCELLED. Single-threaded: only the loop thread touches a CancelState.
#pragma once

#include <cassert>
#include <utility>

namespace uxds {

class CancelState {
 public:
  // One registered interest in cancellation; unlinks itself when destroyed.
  class Callback {
   public:
    virtual ~Callback() { Unregister(); }
    virtual void OnCancel() = 0;
    void Unregister() {
      if (owner_ == nullptr) return;
      if (prev_ != nullptr)
        prev_->next_ = next_;
      else
        owner_->head_ = next_;
      if (next_ != nullptr) next_->prev_ = prev_;
      owner_ = nullptr;
      prev_ = next_ = nullptr;
    }
    bool registered() const { return owner_ != nullptr; }

   private:
    friend class CancelState;
    CancelState* owner_ = nullptr;
    Callback* prev_ = nullptr;
    Callback* next_ = nullptr;
  };

  CancelState() = default;
  // A child: cancelled whenever `parent` is (or already was).
  explicit CancelState(CancelState* parent) : link_(this) {
    if (parent != nullptr) {
      if (parent->cancelled())
        cancelled_ = true;
      else
        parent->Register(&link_);
    }
  }
  CancelState(const CancelState&) = delete;
  CancelState& operator=(const CancelState&) = delete;
  ~CancelState() {
    // Detach registered callbacks so they do not touch a dead state.
    while (head_ != nullptr) head_->Unregister();
  }

  bool cancelled() const { return cancelled_; }

  // Registers `cb`; if this state is already cancelled, runs it at once instead.
  void Register(Callback* cb) {
    assert(!cb->registered());
    if (cancelled_) {
      cb->OnCancel();
      return;
    }
    cb->owner_ = this;
    cb->next_ = head_;
    if (head_ != nullptr) head_->prev_ = cb;
    head_ = cb;
  }

  // Idempotent. Callbacks may unregister others or register new ones.
  void Cancel() {
    if (cancelled_) return;
    cancelled_ = true;
    while (head_ != nullptr) {
      Callback* cb = head_;
      cb->Unregister();
      cb->OnCancel();
    }
  }

 private:
  struct ParentLink : Callback {
    explicit ParentLink(CancelState* self) : self(self) {}
    void OnCancel() override { self->Cancel(); }
    CancelState* self;
  };

  bool cancelled_ = false;
  Callback* head_ = nullptr;
  ParentLink link_{this};
};

}  // namespace uxds
