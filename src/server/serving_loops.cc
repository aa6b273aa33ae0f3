#include "server/serving_loops.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <utility>

namespace uxds::server {

namespace {

// The count of tasks still running and the event of the last one's end;
// touched on the home loop only.
struct Join {
  Join(Loop& home, size_t count) : remaining(count), all_ended(home) {}
  size_t remaining;
  Event all_ended;
};

// On loop i. Its reference to `join` travels back to the home loop with
// the report, so the Join is released there and never on a serving loop.
Task<void> RunThenReport(Task<void> task, Loop* home, std::shared_ptr<Join> join) {
  co_await std::move(task);
  home->Post([join = std::move(join)] {
    if (--join->remaining == 0) join->all_ended.Set();
  });
}

}  // namespace

StatusOr<std::unique_ptr<ServingLoops>> ServingLoops::Start(size_t count) {
  std::unique_ptr<ServingLoops> loops(new ServingLoops());
  for (size_t i = 0; i < count; ++i) {
    StatusOr<std::unique_ptr<LoopThread>> thread = LoopThread::Start();
    if (!thread.ok()) return thread.status();
    loops->loops_.push_back(&(*thread)->loop());
    loops->threads_.push_back(*std::move(thread));
  }
  return loops;
}

ServingLoops::~ServingLoops() = default;

size_t LoopShareOfBudget(size_t budget, size_t loops, size_t max_receive_message_size) {
  if (budget == 0) return 0;
  // Saturating: 2 x a huge message size is the whole budget.
  const size_t two_messages =
      max_receive_message_size > SIZE_MAX / 2 ? SIZE_MAX : 2 * max_receive_message_size;
  const size_t floor = std::min(budget, two_messages);
  return std::max({size_t{1}, budget / loops, floor});
}

size_t LoopCountFor(size_t requested) {
  if (requested != 0) return requested;
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxServingLoops);
}

Task<void> RunOnEach(Loop& home, std::vector<Loop*> loops,
                     std::function<Task<void>(size_t)> make_task) {
  if (loops.empty()) co_return;
  auto join = std::make_shared<Join>(home, loops.size());
  auto shared_make =
      std::make_shared<const std::function<Task<void>(size_t)>>(std::move(make_task));
  for (size_t i = 0; i < loops.size(); ++i) {
    Loop* loop = loops[i];
    // The closure hands its reference to the task (mutable, run once).
    loop->Post([loop, i, shared_make, home = &home, join]() mutable {
      loop->Spawn(RunThenReport((*shared_make)(i), home, std::move(join)));
    });
  }
  const Status waited = co_await join->all_ended.Wait();
  (void)waited;  // see the header: callers are not cancelled
}

}  // namespace uxds::server
