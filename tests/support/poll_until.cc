#include "support/poll_until.h"

namespace uxds::testing {

Task<bool> PollUntil(Loop& loop, std::function<bool()> condition, std::chrono::milliseconds limit) {
  const Loop::Clock::time_point deadline = Loop::Clock::now() + limit;
  while (!condition() && Loop::Clock::now() < deadline) {
    const Status slept = co_await SleepFor(loop, std::chrono::milliseconds(1));
    if (!slept.ok()) co_return false;
  }
  co_return condition();
}

}  // namespace uxds::testing
