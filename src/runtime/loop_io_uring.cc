// The io_uring backend of Loop: setting the ring up, preparing and
// submitting requests, waiting, and dispatching completions to their ops.
// (The epoll backend is epoll_poller.cc; the loop itself, loop.cc.)
#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/runtime_backend.h"
#include "uxds/log.h"
#include "uxds/loop.h"

namespace uxds {
namespace {

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

std::unique_ptr<IoOp> ArmIoUringWake(Loop& loop, int fd) {
  auto wake = std::make_unique<WakeOp>(loop, fd);
  wake->Arm();
  return wake;
}

void StopIoUringWake(IoOp* wake) { static_cast<WakeOp*>(wake)->StopRearming(); }

}  // namespace detail

Status Loop::InitIoUring(const LoopOptions& options) {
  ring_ = std::make_unique<io_uring>();
  io_uring_params params{};
  // COOP_TASKRUN (5.19): completions are finished when the loop next
  // enters the kernel, which it does every turn, instead of by
  // interrupting it wherever it runs; TASKRUN_FLAG tells liburing's peek
  // when such work is waiting. An older kernel refuses the flags: set up
  // without them.
  params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
  params.cq_entries = options.queue_entries * 2;
  int rc = io_uring_queue_init_params(options.queue_entries, ring_.get(), &params);
  if (rc == -EINVAL) {
    params = io_uring_params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = options.queue_entries * 2;
    rc = io_uring_queue_init_params(options.queue_entries, ring_.get(), &params);
  }
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

}  // namespace uxds
