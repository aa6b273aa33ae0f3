// The Loop (uxds/loop.h): choosing and setting up a backend, the turn
// (wait, completions, timers, ready coroutines, posted functions), Post()
// and Stop() from other threads, and the structured shutdown. The io_uring
// backend is loop_io_uring.cc, the epoll one epoll_poller.cc.
#include "uxds/loop.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "runtime/epoll_poller.h"
#include "runtime/runtime_backend.h"
#include "runtime/timer_heap.h"
#include "uxds/log.h"

namespace uxds {
namespace {

thread_local Loop* t_current_loop = nullptr;

}  // namespace

Loop::Loop() = default;

StatusOr<std::unique_ptr<Loop>> Loop::Create(const LoopOptions& options) {
  StatusOr<std::optional<RuntimeBackend>> forced = detail::ForcedRuntimeBackend(options);
  if (!forced.ok()) return forced.status();
  std::unique_ptr<Loop> loop(new Loop());
  std::string why;
  if (*forced == RuntimeBackend::kEpoll) {
    why = forced->has_value() && options.backend.has_value() ? "forced by LoopOptions::backend"
                                                             : "forced by UXDS_RUNTIME=epoll";
  } else {
    Status uring = loop->InitIoUring(options);
    if (uring.ok()) {
      why = forced->has_value() ? (options.backend.has_value() ? "forced by LoopOptions::backend"
                                                               : "forced by UXDS_RUNTIME=io_uring")
                                : "io_uring_setup works";
    } else if (forced->has_value()) {
      return uring;
    } else {
      why = "fallback, " + uring.message();
    }
  }
  if (loop->ring_ == nullptr) {
    Status s = loop->InitEpoll();
    if (!s.ok()) return s;
  }
  // A fallback is a warning: the application runs, on the slower backend.
  const bool fell_back = loop->ring_ == nullptr && !forced->has_value();
  Log(fell_back ? LogSeverity::kWarning : LogSeverity::kInfo,
      std::string("uxds: runtime: ") + RuntimeBackendName(loop->backend()) + " (" + why + ")");
  loop->thread_id_ = std::this_thread::get_id();
  loop->timers_ = std::make_unique<detail::TimerHeap>();
  loop->root_group_ = std::make_unique<TaskGroup>(*loop);
  if (loop->ring_ != nullptr) {
    loop->wake_op_ = detail::ArmIoUringWake(*loop, loop->wake_fd_);
  }
  return loop;
}

Status Loop::InitEpoll() {
  // Non-blocking: the poller drains it after each wake-up.
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return ErrnoToStatus(errno, "eventfd");
  StatusOr<std::unique_ptr<detail::EpollPoller>> poller =
      detail::EpollPoller::Create(*this, wake_fd_);
  if (!poller.ok()) {
    close(wake_fd_);
    wake_fd_ = -1;
    return poller.status();
  }
  epoll_ = std::move(*poller);
  return OkStatus();
}

Loop::~Loop() {
  if (root_group_ == nullptr) return;  // Create() failed
  Loop* previous = std::exchange(t_current_loop, this);
  thread_id_ = std::this_thread::get_id();
  // Structured shutdown: cancel every task, let each finish, then wait for
  // every in-flight request (including cancellations) to complete, so no
  // coroutine frame and no kernel reference to our memory outlives the ring.
  root_group_->Cancel();
  while (root_group_->size() > 0 || !ready_.empty()) RunOnce(/*may_block=*/true);
  if (ring_ != nullptr) {
    detail::StopIoUringWake(wake_op_.get());
    CancelOp(wake_op_.get());
    for (auto& orphan : orphans_) CancelOp(orphan.get());
    while (in_flight_ > 0 || !ready_.empty()) RunOnce(/*may_block=*/true);
    ReapOrphans();
  }
  root_group_.reset();
  if (ring_ != nullptr) {
    io_uring_queue_exit(ring_.get());
    ring_.reset();
  }
  epoll_.reset();
  {
    // A Post() racing with our end finishes its write first (see Post).
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.clear();
    close(wake_fd_);
    wake_fd_closed_ = true;
  }
  t_current_loop = previous;
}

Loop* Loop::Current() { return t_current_loop; }

bool Loop::InLoopThread() const { return std::this_thread::get_id() == thread_id_; }

void Loop::Run() {
  Loop* previous = std::exchange(t_current_loop, this);
  thread_id_ = std::this_thread::get_id();
  while (!stop_.load(std::memory_order_acquire)) RunOnce(/*may_block=*/true);
  stop_.store(false, std::memory_order_relaxed);
  t_current_loop = previous;
}

void Loop::Stop() {
  // Under the lock, as in Post(): the loop may leave Run() and be destroyed
  // as soon as it sees stop_, and its destructor takes this lock before it
  // closes wake_fd_. So stop_ is set, and the wake-up written, while the
  // loop cannot be gone.
  std::lock_guard<std::mutex> lock(posted_mu_);
  if (wake_fd_closed_) return;
  stop_.store(true, std::memory_order_release);
  // Wakes the loop if it is blocked; harmless if it is not.
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof one);
  (void)n;
}

void Loop::Post(std::function<void()> fn) {
  // The wake-up is written under the lock: once the loop thread has run the
  // posted function it may leave Run() and destroy the Loop, and the
  // destructor takes this lock before it closes wake_fd_. Written after the
  // unlock, it could hit a closed (or reused) descriptor of a freed Loop.
  std::lock_guard<std::mutex> lock(posted_mu_);
  if (wake_fd_closed_) return;  // the loop is gone: nothing will run `fn`
  posted_.push_back(std::move(fn));
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof one);
  (void)n;
}

void Loop::Spawn(Task<void> task) { root_group_->Spawn(std::move(task)); }

void Loop::Schedule(std::coroutine_handle<> h) { ready_.push_back(h); }

void Loop::AdoptOrphan(std::unique_ptr<detail::IoOp> op) {
  if (!op->in_flight_) return;  // nothing references it any more
  CancelOp(op.get());
  orphans_.push_back(std::move(op));
}

void Loop::ArmTimer(detail::TimerNode* node, Clock::time_point deadline) {
  node->deadline = deadline;
  timers_->Push(node);
}

void Loop::DisarmTimer(detail::TimerNode* node) {
  if (timers_ != nullptr) timers_->Remove(node);
}

size_t Loop::armed_timers() const { return timers_->size(); }

void Loop::FireExpiredTimers() {
  // Cancelled timers' slots fall due too: they are dropped here.
  if (!timers_->has_deadline()) return;
  const Clock::time_point now = Clock::now();
  // Timers armed while firing (a callback restarting its timer at 0) wait
  // for the next turn, so one pass always ends.
  const uint64_t limit = timers_->sequence_limit();
  while (detail::TimerNode* node = timers_->PopDue(now, limit)) node->OnExpired();
}

void Loop::ReapOrphans() {
  std::erase_if(orphans_, [](const std::unique_ptr<detail::IoOp>& op) { return !op->in_flight_; });
}

void Loop::RunReady() {
  // Handles scheduled while running are taken on the next pass, so a
  // coroutine that keeps rescheduling itself cannot starve the ring.
  size_t n = ready_.size();
  for (size_t i = 0; i < n && !ready_.empty(); ++i) {
    std::coroutine_handle<> h = ready_.front();
    ready_.pop_front();
    h.resume();
  }
}

void Loop::DrainPosted() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

void Loop::RunOnce(bool may_block) {
  // Current() is this loop while it runs, whoever drives it (Run, BlockOn).
  struct CurrentScope {
    Loop* previous;
    explicit CurrentScope(Loop* loop) : previous(std::exchange(t_current_loop, loop)) {}
    ~CurrentScope() { t_current_loop = previous; }
  } current_scope(this);
  // Wait first, run second: callers test their exit condition between turns,
  // so a turn must never end by blocking after it ran the work that
  // satisfied that condition.
  bool has_posted;
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    has_posted = !posted_.empty();
  }
  bool wait = may_block && ready_.empty() && reaped_.empty() && !has_posted &&
              !stop_.load(std::memory_order_relaxed);
  // One kernel wait bounded by the earliest deadline serves every timer.
  int64_t timeout_ns = wait ? -1 : 0;
  if (wait && timers_->has_deadline()) {
    const auto left =
        std::max(Clock::duration::zero(), timers_->earliest_deadline() - Clock::now());
    timeout_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  }
  if (epoll_ != nullptr) {
    epoll_->Wait(timeout_ns);
    epoll_->NewTurn();
  } else {
    WaitIoUring(timeout_ns);
    DispatchCompletions();
  }
  FireExpiredTimers();
  RunReady();
  DrainPosted();
  if (!orphans_.empty()) ReapOrphans();
}

}  // namespace uxds
