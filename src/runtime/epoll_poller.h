// EpollPoller: the loop's second backend, for hosts where io_uring is blocked
// (container seccomp profiles, kernel.io_uring_disabled).
//
// Descriptors are registered edge-triggered (EPOLLET), once, for reading and
// writing together. Every operation first tries its non-blocking syscall and
// waits for readiness only after EAGAIN, so an edge can never be missed: the
// EAGAIN and the wait happen in the same turn, and any later change of state
// raises a new edge. Level-triggered would report a writable socket on every
// epoll_wait while nobody writes (a busy loop) unless each wait re-armed its
// interest with epoll_ctl: one extra syscall per operation. Edge-triggered
// costs one epoll_ctl per descriptor lifetime.
#pragma once

#include <cstdint>
#include <memory>

#include "uxds/loop.h"

namespace uxds::detail {

class FdWatch;

class EpollPoller {
 public:
  // Takes no ownership of `wake_fd` (the loop's eventfd); watches it.
  static StatusOr<std::unique_ptr<EpollPoller>> Create(Loop& loop, int wake_fd);
  ~EpollPoller();
  EpollPoller(const EpollPoller&) = delete;
  EpollPoller& operator=(const EpollPoller&) = delete;

  // Waits up to `timeout_ns` (negative: no limit, 0: poll) and schedules the
  // waiters of every descriptor that became ready. Waiters are scheduled,
  // never resumed here, so no handler can close a descriptor whose event is
  // still later in the same batch.
  void Wait(int64_t timeout_ns);

  // An operation that completed without waiting spends one unit of the
  // turn's budget; true when it is spent, and the caller should Yield() so
  // a peer that always has data (or a listener with a deep backlog) cannot
  // starve the loop's other tasks. io_uring gets this for free: every
  // operation there completes on a later turn.
  bool SpendImmediateBudget() { return ++immediate_ops_ > kImmediateOpsPerTurn; }
  void NewTurn() { immediate_ops_ = 0; }

  int epoll_fd() const { return epoll_fd_; }
  Loop& loop() const { return loop_; }

 private:
  static constexpr int kImmediateOpsPerTurn = 32;
  EpollPoller(Loop& loop, int epoll_fd, int wake_fd);
  Loop& loop_;
  int epoll_fd_;
  int wake_fd_;
  int immediate_ops_ = 0;
  bool has_epoll_pwait2_ = true;
};

// One descriptor registered with a loop's EpollPoller, with at most one task
// waiting to read and one waiting to write.
class FdWatch {
 public:
  enum class Direction { kRead, kWrite };

  // Registers `fd` (not owned). A failed registration makes every wait fail
  // with that errno.
  FdWatch(EpollPoller& poller, int fd);
  // Unregisters (before the owner closes the descriptor).
  ~FdWatch();
  FdWatch(const FdWatch&) = delete;
  FdWatch& operator=(const FdWatch&) = delete;

  class Waiter : public CancelState::Callback {
   public:
    Waiter(FdWatch& watch, Direction direction) : watch_(watch), direction_(direction) {}
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) {
      return Suspend(h, CancelStateOf(h));
    }
    // 0 once ready; -ECANCELED when cancelled or unregistered; -errno when
    // the registration failed; the errno given to Wake() otherwise.
    int await_resume() {
      Unregister();
      return result_;
    }
    void OnCancel() override;

   private:
    friend class FdWatch;
    bool Suspend(std::coroutine_handle<> h, CancelState* cancel);
    void Resume(int result);
    FdWatch& watch_;
    Direction direction_;
    std::coroutine_handle<> handle_;
    int result_ = 0;
  };
  // Waits until the descriptor may have changed state for that direction.
  Waiter Wait(Direction direction) { return Waiter(*this, direction); }

  // Wakes the task waiting in `direction` (if any) with `result`.
  void Wake(Direction direction, int result);
  // Called by the poller with an event's mask.
  void OnEvents(uint32_t events);
  // Removes the descriptor from the epoll set and wakes both waiters with
  // -ECANCELED; later waits fail at once. Idempotent.
  void Unregister();
  bool has_waiter(Direction direction) const { return Slot(direction) != nullptr; }

 private:
  Waiter*& Slot(Direction direction) { return direction == Direction::kRead ? reader_ : writer_; }
  Waiter* Slot(Direction direction) const {
    return direction == Direction::kRead ? reader_ : writer_;
  }
  // The loop and the epoll descriptor, not the poller: a socket that
  // outlives its loop must not touch freed memory when it goes.
  Loop& loop_;
  int epoll_fd_;
  int fd_;
  int registration_error_ = 0;
  bool registered_ = false;
  Waiter* reader_ = nullptr;
  Waiter* writer_ = nullptr;
};

}  // namespace uxds::detail
