// PollUntil: a test's wait for a condition another thread or loop makes
// true, checked every millisecond on the test's loop, with an upper bound
// (never a timing assertion: the bound only keeps a broken run from hanging).
#pragma once

#include <chrono>
#include <functional>

#include "uxds/loop.h"
#include "uxds/task.h"

namespace uxds::testing {

// True once `condition` holds; false after `limit`, or if the waiting task
// is cancelled.
inline Task<bool> PollUntil(Loop& loop, std::function<bool()> condition,
                            std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const Loop::Clock::time_point deadline = Loop::Clock::now() + limit;
  while (!condition() && Loop::Clock::now() < deadline) {
    const Status slept = co_await SleepFor(loop, std::chrono::milliseconds(1));
    if (!slept.ok()) co_return false;
  }
  co_return condition();
}

}  // namespace uxds::testing
