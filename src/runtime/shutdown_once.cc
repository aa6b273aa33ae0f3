#include "runtime/shutdown_once.h"

#include <utility>

namespace uxds {

Task<void> ShutdownOnce::Run(std::function<Task<void>()> teardown) {
  if (state_ == State::kNone) {
    state_ = State::kRunning;
    teardown_.Spawn(RunTeardown(this, std::move(teardown)));
  }
  // Returns on the join's own record: `this` may be gone when we resume.
  co_await teardown_.Join();
}

Task<void> ShutdownOnce::RunTeardown(ShutdownOnce* self, std::function<Task<void>()> teardown) {
  co_await teardown();
  self->state_ = State::kDone;
}

}  // namespace uxds
