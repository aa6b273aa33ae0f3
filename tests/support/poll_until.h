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
// is cancelled. (Defined in the .cc: clang cannot emit an inline coroutine
// under the sanitizers: "Cannot represent a difference across sections".)
Task<bool> PollUntil(Loop& loop, std::function<bool()> condition,
                     std::chrono::milliseconds limit = std::chrono::seconds(20));

}  // namespace uxds::testing
