#include "uxds/loop.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

#include <cstring>
#include <future>

#include "runtime/epoll_poller.h"
#include "runtime/runtime_backend.h"
#include "runtime/timer_heap.h"
#include "uxds/log.h"

namespace uxds {
namespace {

thread_local Loop* t_current_loop = nullptr;

// Multishot accept arrived in Linux 5.19.
bool KernelAtLeast(int major, int minor) {
  utsname u{};
  if (uname(&u) != 0) return false;
  int maj = 0, min = 0;
  if (std::sscanf(u.release, "%d.%d", &maj, &min) != 2) return false;
  return maj > major || (maj == major && min >= minor);
}

}  // namespace

namespace detail {

void IoOp::OnCancel() { loop_.CancelOp(this); }

void ResumingIoOp::OnComplete(int res, unsigned flags) {
  result = res;
  cqe_flags = flags;
  Unregister();
  if (std::coroutine_handle<> w = std::exchange(waiter, {})) w.resume();
}

// Keeps one read pending on the loop's eventfd, so Post() and Stop() from
// other threads wake a loop blocked in io_uring_enter.
class WakeOp final : public IoOp {
 public:
  WakeOp(Loop& loop, int fd) : IoOp(loop), fd_(fd) {}
  void Arm() {
    if (stopping_) return;
    io_uring_prep_read(loop_.PrepareSqe(this), fd_, &value_, sizeof value_, 0);
  }
  void OnComplete(int /*result*/, unsigned /*flags*/) override { Arm(); }
  void StopRearming() { stopping_ = true; }

 private:
  int fd_;
  uint64_t value_ = 0;
  bool stopping_ = false;
};

}  // namespace detail

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
    auto wake = std::make_unique<detail::WakeOp>(*loop, loop->wake_fd_);
    wake->Arm();
    loop->wake_op_ = std::move(wake);
  }
  return loop;
}

Status Loop::InitIoUring(const LoopOptions& options) {
  ring_ = std::make_unique<io_uring>();
  io_uring_params params{};
  params.flags = IORING_SETUP_CQSIZE;
  params.cq_entries = options.queue_entries * 2;
  int rc = io_uring_queue_init_params(options.queue_entries, ring_.get(), &params);
  if (rc < 0) {
    ring_.reset();
    Status s = ErrnoToStatus(-rc, "io_uring_setup");
    return Status(StatusCode::kUnavailable,
                  s.message() +
                      ": io_uring is not available here (a kernel without it, a seccomp "
                      "profile that blocks the io_uring_setup syscall, or "
                      "kernel.io_uring_disabled)");
  }
  std::string missing = detail::MissingIoUringOps(ring_.get());
  if (missing.empty()) {
    wake_fd_ = eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ >= 0) {
      has_multishot_accept_ = KernelAtLeast(5, 19);
      return OkStatus();
    }
    missing = "eventfd: " + std::string(std::strerror(errno));
  } else {
    missing = "io_uring lacks " + missing;
  }
  io_uring_queue_exit(ring_.get());
  ring_.reset();
  return UnavailableError(missing);
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
    static_cast<detail::WakeOp*>(wake_op_.get())->StopRearming();
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

namespace {
// io_uring_submit, or what a test put in its place (SetIoUringSubmitForTesting).
std::atomic<detail::IoUringSubmitFn> g_submit{nullptr};

int Submit(io_uring* ring) {
  detail::IoUringSubmitFn fn = g_submit.load(std::memory_order_relaxed);
  return fn != nullptr ? fn(ring) : io_uring_submit(ring);
}
}  // namespace

void detail::SetIoUringSubmitForTesting(IoUringSubmitFn fn) {
  g_submit.store(fn, std::memory_order_relaxed);
}

void Loop::SubmitUntilRoomFor(unsigned n) {
  int failures = 0;
  while (io_uring_sq_space_left(ring_.get()) < n) {
    const int rc = Submit(ring_.get());
    if (rc == -EBUSY || rc == -EAGAIN) {
      // The completion queue is full (its overflow too), or the kernel is
      // short of memory: it takes no more submissions until completions
      // are reaped. Copy them out to be dispatched by this turn (not here:
      // we may be inside an op's own code), which frees the ring.
      ReapCompletions();
    } else if (rc < 0 && rc != -EINTR) {
      // Anything else means the ring itself is unusable: say so rather than
      // spin silently.
      if (++failures == 1 || failures % 1000 == 0) {
        Log(LogSeverity::kError, std::string("uxds: io_uring_submit: ") + std::strerror(-rc) +
                                     " (submission queue full, retrying)");
      }
      ReapCompletions();
    }
  }
}

io_uring_sqe* Loop::PrepareSqe(detail::IoOp* op) {
  assert(ring_ != nullptr && "io_uring requests on an epoll loop");
  SubmitUntilRoomFor(1);
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  assert(sqe != nullptr);
  io_uring_sqe_set_data(sqe, op);
  if (op != nullptr) {
    op->in_flight_ = true;
    ++in_flight_;
  }
  return sqe;
}

void Loop::ReserveSqes(unsigned n) {
  if (ring_ == nullptr) return;
  // Linked requests go in one submission or the link is lost: a submit
  // between a connect and its link timeout sends the connect alone, bounded
  // only by the kernel's SYN retries. So a failed submit is retried until
  // the room is there, never ignored.
  assert(n <= ring_->sq.ring_entries);
  SubmitUntilRoomFor(n);
}

void Loop::CancelOp(detail::IoOp* op) {
  if (op == nullptr || !op->in_flight_) return;
  io_uring_sqe* sqe = PrepareSqe(nullptr);
  io_uring_prep_cancel64(sqe, reinterpret_cast<uint64_t>(op), 0);
  io_uring_sqe_set_data(sqe, nullptr);
}

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

void Loop::WaitIoUring(int64_t timeout_ns) {
  int rc;
  if (timeout_ns > 0) {
    __kernel_timespec ts{};
    ts.tv_sec = timeout_ns / 1'000'000'000;
    ts.tv_nsec = timeout_ns % 1'000'000'000;
    io_uring_cqe* cqe = nullptr;
    rc = io_uring_submit_and_wait_timeout(ring_.get(), &cqe, 1, &ts, nullptr);
    if (rc == -ETIME) rc = 0;
  } else {
    rc = io_uring_submit_and_wait(ring_.get(), timeout_ns < 0 ? 1 : 0);
  }
  if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
    Log(LogSeverity::kError, std::string("uxds: io_uring_submit_and_wait: ") + std::strerror(-rc));
  }
}

void Loop::ReapCompletions() {
  std::array<io_uring_cqe*, 64> cqes;
  while (true) {
    const unsigned n = io_uring_peek_batch_cqe(ring_.get(), cqes.data(), cqes.size());
    if (n == 0) break;
    for (unsigned i = 0; i < n; ++i) {
      reaped_.push_back({static_cast<detail::IoOp*>(io_uring_cqe_get_data(cqes[i])), cqes[i]->res,
                         cqes[i]->flags});
    }
    io_uring_cq_advance(ring_.get(), n);
  }
}

void Loop::DispatchCompletions() {
  // Copy completions out before dispatching: a completion handler may submit
  // new requests (and so touch the rings, or reap more) while we iterate.
  while (true) {
    ReapCompletions();
    if (reaped_.empty()) break;
    std::vector<ReapedCompletion> done = std::exchange(reaped_, {});
    for (size_t i = 0; i < done.size(); ++i) {
      detail::IoOp* op = done[i].op;
      // Cancel requests, link timeouts, and the wait timeout liburing
      // submits itself on kernels without IORING_FEAT_EXT_ARG.
      if (op == nullptr || reinterpret_cast<uint64_t>(op) == LIBURING_UDATA_TIMEOUT) continue;
      if ((done[i].flags & IORING_CQE_F_MORE) == 0) {
        op->in_flight_ = false;
        --in_flight_;
      }
      op->OnComplete(done[i].res, done[i].flags);
    }
  }
}

// --- LoopThread ------------------------------------------------------------

StatusOr<std::unique_ptr<LoopThread>> LoopThread::Start(const LoopOptions& options) {
  std::unique_ptr<LoopThread> lt(new LoopThread());
  std::promise<Status> started;
  auto started_future = started.get_future();
  LoopThread* raw = lt.get();
  lt->thread_ = std::thread([raw, options, &started] {
    auto loop = Loop::Create(options);
    if (!loop.ok()) {
      started.set_value(loop.status());
      return;
    }
    raw->loop_ = loop->get();
    started.set_value(OkStatus());
    (*loop)->Run();
    {
      // Run() may also end on a Stop() from elsewhere: from here on
      // ~LoopThread must not post to the loop.
      std::lock_guard<std::mutex> lock(raw->mu_);
      raw->loop_ended_ = true;
    }
    // The loop is destroyed on its own thread: tasks unwind where they ran.
  });
  Status s = started_future.get();
  if (!s.ok()) {
    lt->thread_.join();
    return s;
  }
  return lt;
}

LoopThread::~LoopThread() {
  {
    // Held while posting: the loop thread cannot destroy the loop meanwhile.
    // Stopped from inside the loop, after the work posted before.
    std::lock_guard<std::mutex> lock(mu_);
    if (loop_ != nullptr && !loop_ended_) {
      Loop* loop = loop_;
      loop->Post([loop] { loop->Stop(); });
    }
  }
  if (thread_.joinable()) thread_.join();
}

void LoopThread::RunSync(std::function<void()> fn) {
  std::promise<void> done;
  loop_->Post([&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace uxds
