#include <algorithm>
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
  if (live_ != 0 || !waiting_.empty()) {
    // Its tasks and joiners refer to the group: freeing it now would let
    // them write into freed memory later. The owner must join first.
    std::fprintf(stderr, "uxds: TaskGroup destroyed with %zu live tasks and %zu waiting joiners\n",
                 live_, waiting_.size());
    std::terminate();
  }
  // Woken joiners resume on their own record and must not unlink from us.
  for (Joiner* joiner : woken_) joiner->group = nullptr;
}

void TaskGroup::Spawn(Task<void> task) {
  GroupTaskRunner runner = GroupTaskRunner::Run(this, std::move(task));
  runner.handle.promise().cancel = &cancel_;
  ++live_;
  // A joiner woken but not resumed yet waits for this task too: its Join()
  // has not ended.
  for (Joiner* joiner : woken_) {
    joiner->done = false;
    waiting_.push_back(joiner);
  }
  woken_.clear();
  loop_.Schedule(runner.handle);
}

void TaskGroup::OnTaskFinished() {
  if (--live_ != 0) return;
  for (Joiner* joiner : waiting_) {
    joiner->done = true;
    // Re-armed by a Spawn() before it resumed: its first resume is still
    // queued, and a handle must never be queued twice.
    if (!joiner->scheduled) {
      joiner->scheduled = true;
      loop_.Schedule(joiner->handle);
    }
    woken_.push_back(joiner);
  }
  waiting_.clear();
}

void TaskGroup::Unlink(Joiner* joiner) {
  for (std::vector<Joiner*>* list : {&waiting_, &woken_}) {
    auto it = std::find(list->begin(), list->end(), joiner);
    if (it != list->end()) {
      *it = list->back();
      list->pop_back();
      return;
    }
  }
}

TaskGroup::Joiner::Joiner(TaskGroup& g) : group(&g) { g.waiting_.push_back(this); }

TaskGroup::Joiner::~Joiner() {
  if (group != nullptr) group->Unlink(this);
}

namespace {
// Suspends the joining coroutine until the group schedules it; reads only
// the joiner's own record.
struct JoinAwaiter {
  TaskGroup::Joiner& joiner;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept { joiner.handle = h; }
  void await_resume() const noexcept { joiner.scheduled = false; }
};
}  // namespace

Task<void> TaskGroup::Join() {
  // Cancelling the joiner does not interrupt the join: structured
  // concurrency means the children finish before their parent goes on.
  if (live_ == 0) co_return;
  Joiner joiner(*this);
  while (!joiner.done) co_await JoinAwaiter{joiner};
}

Task<void> TaskGroup::CancelAndJoin() {
  Cancel();
  co_await Join();
}

}  // namespace uxds
