// Loop: one event loop on one thread, running coroutines: over io_uring where
// the kernel allows it, else over epoll (see RuntimeBackend).
//
// The control thread and each server listener thread own one Loop. State
// that a Loop's coroutines touch belongs to that loop's thread; other threads
// hand work over with Post().
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "uxds/cancel.h"
#include "uxds/status.h"
#include "uxds/task.h"

struct io_uring;
struct io_uring_sqe;

namespace uxds {

class Loop;
class TaskGroup;

namespace detail {

// One request submitted to the ring. The loop hands the request's CQE to
// OnComplete. An op registered with a CancelState submits
// IORING_OP_ASYNC_CANCEL for itself when that state is cancelled.
class IoOp : public CancelState::Callback {
 public:
  explicit IoOp(Loop& loop) : loop_(loop) {}
  // Called once per CQE (several times for a multishot request, `more` set on
  // all but the last).
  virtual void OnComplete(int result, unsigned cqe_flags) = 0;
  void OnCancel() override;
  Loop& loop() const { return loop_; }
  bool in_flight() const { return in_flight_; }

 protected:
  friend class ::uxds::Loop;
  Loop& loop_;
  bool in_flight_ = false;
};

struct TimerNode;
class TimerHeap;
class EpollPoller;

// Tests only: replaces io_uring_submit for every loop (nullptr restores it),
// to make a submit fail as it may under memory pressure or a signal.
using IoUringSubmitFn = int (*)(io_uring* ring);
void SetIoUringSubmitForTesting(IoUringSubmitFn fn);

// An IoOp that resumes one waiting coroutine with the CQE's result.
class ResumingIoOp : public IoOp {
 public:
  using IoOp::IoOp;
  void OnComplete(int result, unsigned cqe_flags) override;
  int result = 0;
  unsigned cqe_flags = 0;
  std::coroutine_handle<> waiter;
};

}  // namespace detail

// What a Loop waits on. The API above it (tasks, timers, sockets, Post,
// cancellation) behaves the same on both.
enum class RuntimeBackend {
  kIoUring,  // the fast path
  kEpoll,    // where io_uring_setup is denied (container seccomp profiles,
             // kernel.io_uring_disabled) or the kernel lacks what uxds uses
};
// "io_uring" or "epoll": the names UXDS_RUNTIME takes.
const char* RuntimeBackendName(RuntimeBackend backend);

struct LoopOptions {
  // Submission queue entries (io_uring). The completion queue is twice this size.
  unsigned queue_entries = 256;
  // Forces a backend. Unset: the UXDS_RUNTIME environment variable
  // ("io_uring" or "epoll") if set, else io_uring when it works, else epoll.
  // A forced io_uring that cannot be set up makes Create() fail.
  std::optional<RuntimeBackend> backend;
};

class Loop {
 public:
  using Clock = std::chrono::steady_clock;

  // Picks the backend (LoopOptions::backend) and logs one line naming it and
  // why. Fails (with the failing syscall and errno named) when the forced
  // backend cannot be set up, e.g. io_uring under a seccomp profile (EPERM).
  static StatusOr<std::unique_ptr<Loop>> Create(const LoopOptions& options = {});
  // Cancels every task spawned with Spawn(), runs the loop until they have all
  // finished and every in-flight operation has completed, then closes the ring.
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // The loop running on this thread, or nullptr.
  static Loop* Current();

  // Runs the loop on this thread until `task` finishes; returns its result.
  template <typename T>
  T BlockOn(Task<T> task);

  // Runs until Stop() is called (from any thread).
  void Run();
  void Stop();

  // Runs `fn` on the loop thread, soon. Safe from any thread. Closures
  // run in the order they were posted (what one thread posts to a loop
  // runs in the order it posted it); once the loop is gone, `fn` is
  // dropped without running.
  void Post(std::function<void()> fn);

  // Starts `task` now as a child of the loop's root group; it is cancelled and
  // joined when the loop is destroyed.
  void Spawn(Task<void> task);
  TaskGroup& root_group() { return *root_group_; }

  // Resumes `h` on a later turn of the loop (never inline).
  void Schedule(std::coroutine_handle<> h);

  // `co_await loop.Yield()`: lets the loop run what is due (completions,
  // timers, other ready tasks) before the awaiting coroutine goes on; how a
  // long computation on the loop is cut into slices.
  class YieldAwaiter {
   public:
    explicit YieldAwaiter(Loop& loop) : loop_(loop) {}
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) { loop_.Schedule(h); }
    void await_resume() const noexcept {}

   private:
    Loop& loop_;
  };
  YieldAwaiter Yield() { return YieldAwaiter(*this); }

  bool InLoopThread() const;
  RuntimeBackend backend() const {
    return epoll_ != nullptr ? RuntimeBackend::kEpoll : RuntimeBackend::kIoUring;
  }
  // Kernel features probed at construction.
  bool has_multishot_accept() const { return has_multishot_accept_; }
  // For operations on the epoll backend (src/runtime); nullptr on io_uring.
  detail::EpollPoller* epoll() const { return epoll_.get(); }

  // For operations (src/runtime): a submission entry whose user_data is `op`.
  // Submits pending entries first if the queue is full.
  io_uring_sqe* PrepareSqe(detail::IoOp* op);
  // Makes room for `n` entries that must go in one submission (linked ops):
  // the next `n` PrepareSqe() calls submit nothing.
  void ReserveSqes(unsigned n);
  // Submits IORING_OP_ASYNC_CANCEL for `op` if it is in flight.
  void CancelOp(detail::IoOp* op);
  // Takes ownership of an op whose owner is gone while it is still in flight;
  // the loop deletes it after its last CQE.
  void AdoptOrphan(std::unique_ptr<detail::IoOp> op);

  // For timers (SleepFor, Timer): arms `node` at `deadline` in the loop's
  // timer heap (re-arming it if armed); its OnExpired() runs on the first
  // turn at or after the deadline. Disarm: it will not run.
  void ArmTimer(detail::TimerNode* node, Clock::time_point deadline);
  void DisarmTimer(detail::TimerNode* node);
  size_t armed_timers() const;

 private:
  Loop();
  // io_uring_setup plus the probe of the operations uxds submits.
  Status InitIoUring(const LoopOptions& options);
  Status InitEpoll();
  void WaitIoUring(int64_t timeout_ns);
  void RunOnce(bool may_block);
  void RunReady();
  void DispatchCompletions();
  void DrainPosted();
  // Submits (retrying failed submits) until the queue has room for `n`.
  void SubmitUntilRoomFor(unsigned n);
  void ArmWakeup();
  void ReapOrphans();
  void FireExpiredTimers();
  // Moves every completion from the ring into reaped_.
  void ReapCompletions();

  std::unique_ptr<io_uring> ring_;
  std::unique_ptr<detail::EpollPoller> epoll_;
  int wake_fd_ = -1;
  std::unique_ptr<detail::IoOp> wake_op_;
  std::thread::id thread_id_;
  std::atomic<bool> stop_{false};
  bool has_multishot_accept_ = false;
  unsigned in_flight_ = 0;
  std::deque<std::coroutine_handle<>> ready_;
  std::mutex posted_mu_;
  std::vector<std::function<void()>> posted_;
  bool wake_fd_closed_ = false;  // guarded by posted_mu_
  std::vector<std::unique_ptr<detail::IoOp>> orphans_;
  // Completions taken from the ring, not dispatched yet.
  struct ReapedCompletion {
    detail::IoOp* op;
    int res;
    unsigned flags;
  };
  std::vector<ReapedCompletion> reaped_;
  std::unique_ptr<detail::TimerHeap> timers_;
  std::unique_ptr<TaskGroup> root_group_;
};

namespace detail {

// One armed deadline in a loop's timer heap (src/runtime/timer_heap.h).
struct TimerNode {
  static constexpr size_t kNotArmed = static_cast<size_t>(-1);
  // Runs on the loop thread once the deadline has passed; the node is
  // already out of the heap (it may re-arm itself).
  virtual void OnExpired() = 0;
  bool armed() const { return heap_index_ != kNotArmed; }

  Loop::Clock::time_point deadline{};
  uint64_t sequence = 0;  // arming order: ties fire first armed, first

 protected:
  ~TimerNode() = default;

 private:
  friend class TimerHeap;
  size_t heap_index_ = kNotArmed;
};

}  // namespace detail

// A set of concurrently running tasks with a shared CancelState: structured
// concurrency. Cancel() cancels every task (and their nested operations);
// Join() waits until all have finished. A group must be empty (joined, and
// no Join() still waiting) when destroyed; otherwise the process terminates
// with a message, since its tasks and joiners refer to it.
//
// A Join() ends on a fact recorded in the joiner, never on a re-read of the
// group: the first joiner to resume may free the group (its owner's
// Shutdown() returning, then the owner destroyed) while the others are
// still queued to resume.
class TaskGroup {
 public:
  explicit TaskGroup(Loop& loop, CancelState* parent = nullptr);
  ~TaskGroup();
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Starts `task` on the loop's next turn.
  void Spawn(Task<void> task);
  void Cancel() { cancel_.Cancel(); }
  bool cancelled() const { return cancel_.cancelled(); }
  size_t size() const { return live_; }
  CancelState& cancel_state() { return cancel_; }
  Loop& loop() const { return loop_; }

  // Completes (never with an error) once no task is live. A task spawned
  // before the joiner has resumed is waited for too.
  Task<void> Join();
  // Cancel() then Join().
  Task<void> CancelAndJoin();

  // One Join() in progress: lives in the joining coroutine's frame. The
  // group writes the wake into it (done, scheduled) and forgets it; `group`
  // is cleared if the group goes first.
  struct Joiner {
    explicit Joiner(TaskGroup& g);
    ~Joiner();
    Joiner(const Joiner&) = delete;
    Joiner& operator=(const Joiner&) = delete;
    TaskGroup* group;
    std::coroutine_handle<> handle;
    bool done = false;       // the group had no live task when it woke this joiner
    bool scheduled = false;  // a resume of `handle` is in the loop's ready queue
  };

 private:
  friend struct GroupTaskRunner;
  void OnTaskFinished();
  void Unlink(Joiner* joiner);

  Loop& loop_;
  CancelState cancel_;
  size_t live_ = 0;
  std::vector<Joiner*> waiting_;  // joiners to wake when live_ reaches 0
  std::vector<Joiner*> woken_;    // woken, not resumed yet: a Spawn() re-arms them
};

// Waits for `duration`; OK when it elapsed, CANCELLED if cancelled first.
Task<Status> SleepFor(Loop& loop, std::chrono::nanoseconds duration);
Task<Status> SleepUntil(Loop& loop, Loop::Clock::time_point deadline);

// A resettable one-shot timer calling `callback` on the loop thread: the form
// the xDS resource timers, backoff and failover timers use. Destroying or
// cancelling it guarantees the callback will not run.
class Timer {
 public:
  explicit Timer(Loop& loop);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // (Re)starts: a pending expiry is dropped.
  void Start(std::chrono::nanoseconds duration, std::function<void()> callback);
  void Cancel();
  bool pending() const { return node_.armed(); }

 private:
  struct Node final : detail::TimerNode {
    explicit Node(Timer& timer) : timer(timer) {}
    void OnExpired() override;
    Timer& timer;
  };
  Loop& loop_;
  Node node_{*this};
  std::function<void()> callback_;
};

// A one-shot event: Set() wakes every waiter (on a later loop turn).
class Event {
 public:
  explicit Event(Loop& loop) : loop_(loop) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void Set();
  bool is_set() const { return set_; }

  class Awaiter : public CancelState::Callback {
   public:
    explicit Awaiter(Event& e) : event_(e) {}
    bool await_ready() const noexcept { return event_.set_; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) {
      return Suspend(h, detail::CancelStateOf(h));
    }
    // OK when set; CANCELLED when the waiting task was cancelled first.
    Status await_resume() const { return cancelled_ ? CancelledError("cancelled") : Status(); }
    void OnCancel() override;

   private:
    friend class Event;
    bool Suspend(std::coroutine_handle<> h, CancelState* cancel);
    Event& event_;
    std::coroutine_handle<> waiter_;
    bool cancelled_ = false;
  };
  Awaiter Wait() { return Awaiter(*this); }

 private:
  Loop& loop_;
  bool set_ = false;
  std::vector<Awaiter*> waiters_;
};

// A small unbounded single-consumer queue between coroutines of one loop.
template <typename T>
class AsyncQueue {
 public:
  explicit AsyncQueue(Loop& loop) : loop_(loop) {}
  AsyncQueue(const AsyncQueue&) = delete;
  AsyncQueue& operator=(const AsyncQueue&) = delete;
  ~AsyncQueue() { assert(waiter_ == nullptr); }

  // False (and `value` dropped) once closed.
  bool Send(T value) {
    if (closed_) return false;
    items_.push_back(std::move(value));
    WakeWaiter();
    return true;
  }
  // Wakes the receiver; Receive() yields the remaining items, then nullopt.
  void Close() {
    closed_ = true;
    WakeWaiter();
  }
  bool closed() const { return closed_; }
  size_t size() const { return items_.size(); }
  std::optional<T> TryReceive() {
    if (items_.empty()) return std::nullopt;
    T v = std::move(items_.front());
    items_.pop_front();
    return v;
  }

  class Awaiter : public CancelState::Callback {
   public:
    explicit Awaiter(AsyncQueue& c) : channel_(c) {}
    bool await_ready() const noexcept { return !channel_.items_.empty() || channel_.closed_; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) {
      CancelState* cancel = detail::CancelStateOf(h);
      if (cancel != nullptr && cancel->cancelled()) {
        cancelled_ = true;
        return false;
      }
      assert(channel_.waiter_ == nullptr && "AsyncQueue has a single receiver");
      handle_ = h;
      channel_.waiter_ = this;
      if (cancel != nullptr) cancel->Register(this);
      return true;
    }
    // The next item; nullopt when the channel is closed and empty, or when the
    // receiving task was cancelled.
    std::optional<T> await_resume() {
      Unregister();
      if (cancelled_) return std::nullopt;
      return channel_.TryReceive();
    }
    void OnCancel() override {
      cancelled_ = true;
      channel_.waiter_ = nullptr;
      channel_.loop_.Schedule(handle_);
    }

   private:
    friend class AsyncQueue;
    AsyncQueue& channel_;
    std::coroutine_handle<> handle_;
    bool cancelled_ = false;
  };
  Awaiter Receive() { return Awaiter(*this); }

 private:
  void WakeWaiter() {
    if (waiter_ == nullptr) return;
    Awaiter* w = std::exchange(waiter_, nullptr);
    w->Unregister();
    loop_.Schedule(w->handle_);
  }
  Loop& loop_;
  std::deque<T> items_;
  bool closed_ = false;
  Awaiter* waiter_ = nullptr;
};

// Runs a Loop on its own thread (tests, demos, application embedding).
class LoopThread {
 public:
  static StatusOr<std::unique_ptr<LoopThread>> Start(const LoopOptions& options = {});
  // Stops the loop and joins the thread (the Loop is destroyed on it).
  ~LoopThread();
  Loop& loop() { return *loop_; }
  // Runs `fn` on the loop thread and waits for it.
  void RunSync(std::function<void()> fn);

 private:
  LoopThread() = default;
  Loop* loop_ = nullptr;
  std::mutex mu_;
  bool loop_ended_ = false;  // guarded by mu_: Run() returned, the loop is going
  std::thread thread_;
};

// ---------------------------------------------------------------------------

template <typename T>
T Loop::BlockOn(Task<T> task) {
  // An exception escaping `task` terminates (see GroupTaskRunner): uxds
  // reports errors as values.
  std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> result;
  auto runner = [](Task<T> t, decltype(result)& out) -> Task<void> {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(t);
      out.emplace(true);
    } else {
      out.emplace(co_await std::move(t));
    }
  };
  Spawn(runner(std::move(task), result));
  while (!result.has_value()) RunOnce(/*may_block=*/true);
  if constexpr (!std::is_void_v<T>) return std::move(*result);
}

}  // namespace uxds
