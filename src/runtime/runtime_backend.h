// How a Loop picks its backend: a forced choice (LoopOptions::backend, or the
// UXDS_RUNTIME environment variable), and the io_uring features uxds needs.
#pragma once

#include <optional>
#include <string>

#include "uxds/loop.h"

namespace uxds::detail {

// The backend the options or UXDS_RUNTIME force, nullopt when neither does
// (io_uring if it works, else epoll). INVALID_ARGUMENT naming the variable
// for any other value.
StatusOr<std::optional<RuntimeBackend>> ForcedRuntimeBackend(const LoopOptions& options);

// The io_uring operations the runtime submits that `ring`'s kernel does not
// support, comma-separated ("" when it has them all).
std::string MissingIoUringOps(io_uring* ring);

// Keeps one read pending on an io_uring loop's eventfd `fd`, so Post() and
// Stop() from other threads wake a loop blocked in io_uring_enter.
std::unique_ptr<IoOp> ArmIoUringWake(Loop& loop, int fd);
// The wake read is not re-armed after its next completion (the loop is
// being destroyed).
void StopIoUringWake(IoOp* wake);

}  // namespace uxds::detail
