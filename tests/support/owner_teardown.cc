#include "support/owner_teardown.h"

#include <utility>

namespace uxds::testing {
namespace {

Task<void> TeardownCaller(const std::function<Task<void>()>& teardown,
                          const std::function<void()>& destroy, TwoTeardownCallers& callers) {
  ++callers.started;
  co_await teardown();
  if (++callers.returned == 1 && callers.started == 2) {
    // The other caller has not resumed yet: its resume is queued behind us.
    destroy();
    callers.destroyed_by_first = true;
  }
}

}  // namespace

Task<TwoTeardownCallers> AwaitTeardownTwiceAndDestroy(Loop& loop,
                                                      std::function<Task<void>()> teardown,
                                                      std::function<void()> destroy,
                                                      TeardownCallers how) {
  TwoTeardownCallers callers;
  TaskGroup group(loop);
  group.Spawn(TeardownCaller(teardown, destroy, callers));
  group.Spawn(TeardownCaller(teardown, destroy, callers));
  if (how == TeardownCallers::kCancelled) group.Cancel();
  co_await group.Join();
  co_return callers;
}

}  // namespace uxds::testing
