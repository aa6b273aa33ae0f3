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

}  // namespace uxds::detail
