// LoopThread: a Loop running on a thread of its own.
#include <future>
#include <string>
#include <system_error>

#include "uxds/loop.h"

namespace uxds {

StatusOr<std::unique_ptr<LoopThread>> LoopThread::Start(const LoopOptions& options) {
  std::unique_ptr<LoopThread> lt(new LoopThread());
  std::promise<Status> started;
  auto started_future = started.get_future();
  LoopThread* raw = lt.get();
  try {
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
  } catch (const std::system_error& error) {
    // Out of threads (RLIMIT_NPROC, pid_max): an error to report, not an
    // exception through a coroutine.
    return Status(StatusCode::kResourceExhausted,
                  std::string("cannot start a loop thread: ") + error.what());
  }
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
