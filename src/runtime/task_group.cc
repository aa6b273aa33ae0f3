#include <cstdio>
#include <exception>

#include "uxds/loop.h"

namespace uxds {

// The coroutine that owns a spawned task: runs it under the group's
// CancelState, tells the group when it is done, and frees itself.
struct GroupTaskRunner {
  struct promise_type : detail::PromiseBase {
    GroupTaskRunner get_return_object() noexcept {
      return {std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    // uxds reports errors as values; an exception escaping a task is a bug.
    void unhandled_exception() noexcept {
      std::fprintf(stderr, "uxds: an exception escaped a spawned task\n");
      std::terminate();
    }
  };
  std::coroutine_handle<promise_type> handle;

  static GroupTaskRunner Run(TaskGroup* group, Task<void> task);
};

GroupTaskRunner GroupTaskRunner::Run(TaskGroup* group, Task<void> task) {
  co_await std::move(task);
  group->OnTaskFinished();
}

TaskGroup::TaskGroup(Loop& loop, CancelState* parent) : loop_(loop), cancel_(parent) {}

TaskGroup::~TaskGroup() {
  if (live_ != 0) {
    // A group must be joined before it goes away: its tasks refer to it.
    std::fprintf(stderr, "uxds: TaskGroup destroyed with %zu live tasks\n", live_);
    std::terminate();
  }
}

void TaskGroup::Spawn(Task<void> task) {
  GroupTaskRunner runner = GroupTaskRunner::Run(this, std::move(task));
  runner.handle.promise().cancel = &cancel_;
  ++live_;
  loop_.Schedule(runner.handle);
}

void TaskGroup::OnTaskFinished() {
  if (--live_ == 0) {
    for (std::coroutine_handle<> h : joiners_) loop_.Schedule(h);
    joiners_.clear();
  }
}

namespace {
struct JoinAwaiter {
  size_t& live;
  std::vector<std::coroutine_handle<>>& joiners;
  bool await_ready() const noexcept { return live == 0; }
  void await_suspend(std::coroutine_handle<> h) { joiners.push_back(h); }
  void await_resume() const noexcept {}
};
}  // namespace

Task<void> TaskGroup::Join() {
  // Cancelling the joiner does not interrupt the join: structured
  // concurrency means the children finish before their parent goes on.
  while (live_ > 0) co_await JoinAwaiter{live_, joiners_};
}

Task<void> TaskGroup::CancelAndJoin() {
  Cancel();
  co_await Join();
}

}  // namespace uxds
