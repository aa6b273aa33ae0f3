// The ownership rule every owner of tasks is tested against (DESIGN.md,
// "Ownership"): its teardown (Shutdown(), Close()) may be awaited by several
// tasks at once, and the first caller to return may destroy the owner right
// there, while the others are still queued to resume.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>

#include "uxds/loop.h"
#include "uxds/task.h"

namespace uxds::testing {

struct TwoTeardownCallers {
  int started = 0;
  int returned = 0;
  // The first caller to return destroyed the owner (the case under test);
  // false if it returned before the second had even called.
  bool destroyed_by_first = false;
};

enum class TeardownCallers {
  kRunning,
  // Both callers' tasks are cancelled before they call: cancelling a caller
  // must not cut the teardown short.
  kCancelled,
};

// Awaits `teardown()` from two tasks started in the same turn; the first to
// return calls `destroy()` at once, while the second is still queued to
// resume. Returns once both have returned. If the first returned before the
// second started, `destroy` is not called.
Task<TwoTeardownCallers> AwaitTeardownTwiceAndDestroy(Loop& loop,
                                                      std::function<Task<void>()> teardown,
                                                      std::function<void()> destroy,
                                                      TeardownCallers how);

// The same for an owner held in `owner`, reset by the first to return.
template <typename Owner>
Task<TwoTeardownCallers> AwaitTeardownTwiceAndDestroy(
    Loop& loop, std::unique_ptr<Owner>& owner,
    std::type_identity_t<std::function<Task<void>(Owner&)>> teardown,
    TeardownCallers how = TeardownCallers::kRunning) {
  Owner* self = owner.get();
  return AwaitTeardownTwiceAndDestroy(
      loop, [self, teardown = std::move(teardown)] { return teardown(*self); },
      [&owner] { owner.reset(); }, how);
}

}  // namespace uxds::testing
