// IoAwaiter: submit one io_uring request and suspend until its completion.
#pragma once

#include <liburing.h>

#include <cerrno>
#include <coroutine>
#include <utility>

#include "uxds/loop.h"

namespace uxds::detail {

// `prep(sqe)` fills the submission entry. co_await yields the CQE result (a
// negative errno on failure). If the awaiting task is cancelled while the
// request is in flight, IORING_OP_ASYNC_CANCEL is submitted and the result is
// usually -ECANCELED (or the real result, if the request won the race).
template <typename Prep>
class IoAwaiter {
 public:
  IoAwaiter(Loop& loop, Prep prep) : op_(loop), prep_(std::move(prep)) {}
  IoAwaiter(const IoAwaiter&) = delete;
  IoAwaiter& operator=(const IoAwaiter&) = delete;

  bool await_ready() const noexcept { return false; }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) {
    return Submit(h, CancelStateOf(h));
  }
  int await_resume() {
    op_.Unregister();
    return op_.result;
  }
  IoOp& op() { return op_; }

 private:
  bool Submit(std::coroutine_handle<> h, CancelState* cancel) {
    if (cancel != nullptr && cancel->cancelled()) {
      op_.result = -ECANCELED;
      return false;
    }
    prep_(op_.loop().PrepareSqe(&op_));
    op_.waiter = h;
    if (cancel != nullptr) cancel->Register(&op_);
    return true;
  }

  ResumingIoOp op_;
  Prep prep_;
};

template <typename Prep>
IoAwaiter<Prep> SubmitIo(Loop& loop, Prep prep) {
  return IoAwaiter<Prep>(loop, std::move(prep));
}

}  // namespace uxds::detail
