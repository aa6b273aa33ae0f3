// ShutdownOnce: the one teardown of an object that spawns tasks, awaited by
// any number of callers.
//
//   Task<void> Thing::Shutdown() {
//     co_await shutdown_.Run([this]() -> Task<void> { co_await tasks_.CancelAndJoin(); });
//   }
//
// The first call starts the teardown (in a task of its own, so cancelling
// that caller does not cut it short); every call returns once it has ended,
// a call after that at once. Any caller may destroy the owner as soon as its
// Shutdown() returns, even while other callers are still queued to resume:
// they return on what their join recorded, without touching the owner
// (TaskGroup::Join). Destroying the owner while the teardown still runs
// terminates the process (the teardown's task would outlive its object).
#pragma once

#include <functional>

#include "uxds/loop.h"
#include "uxds/task.h"

namespace uxds {

class ShutdownOnce {
 public:
  explicit ShutdownOnce(Loop& loop) : teardown_(loop) {}
  ShutdownOnce(const ShutdownOnce&) = delete;
  ShutdownOnce& operator=(const ShutdownOnce&) = delete;

  // Starts `teardown` on the first call only; returns once it has ended.
  Task<void> Run(std::function<Task<void>()> teardown);

  bool started() const { return state_ != State::kNone; }
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kNone, kRunning, kDone };
  static Task<void> RunTeardown(ShutdownOnce* self, std::function<Task<void>()> teardown);

  TaskGroup teardown_;
  State state_ = State::kNone;
};

}  // namespace uxds
