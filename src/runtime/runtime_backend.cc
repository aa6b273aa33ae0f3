#include "runtime/runtime_backend.h"

#include <liburing.h>

#include <cstdlib>
#include <string_view>

namespace uxds {

const char* RuntimeBackendName(RuntimeBackend backend) {
  return backend == RuntimeBackend::kEpoll ? "epoll" : "io_uring";
}

namespace detail {

StatusOr<std::optional<RuntimeBackend>> ForcedRuntimeBackend(const LoopOptions& options) {
  if (options.backend.has_value()) return options.backend;
  const char* env = std::getenv("UXDS_RUNTIME");
  if (env == nullptr || *env == '\0') return std::optional<RuntimeBackend>();
  const std::string_view value(env);
  if (value == "io_uring") return std::optional<RuntimeBackend>(RuntimeBackend::kIoUring);
  if (value == "epoll") return std::optional<RuntimeBackend>(RuntimeBackend::kEpoll);
  return InvalidArgumentError("UXDS_RUNTIME: \"" + std::string(value) +
                              "\" is neither \"io_uring\" nor \"epoll\"");
}

std::string MissingIoUringOps(io_uring* ring) {
  io_uring_probe* probe = io_uring_get_probe_ring(ring);
  // No probe (IORING_REGISTER_PROBE arrived in 5.6 with send/recv): the
  // kernel is older than what the backend needs.
  if (probe == nullptr) return "IORING_REGISTER_PROBE";
  struct NamedOp {
    int op;
    const char* name;
  };
  static constexpr NamedOp kNeeded[] = {
      {IORING_OP_READ, "READ"},
      {IORING_OP_SEND, "SEND"},
      {IORING_OP_RECV, "RECV"},
      {IORING_OP_ACCEPT, "ACCEPT"},
      {IORING_OP_CONNECT, "CONNECT"},
      {IORING_OP_LINK_TIMEOUT, "LINK_TIMEOUT"},
      {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
  };
  std::string missing;
  for (const NamedOp& needed : kNeeded) {
    if (io_uring_opcode_supported(probe, needed.op)) continue;
    if (!missing.empty()) missing += ", ";
    missing += std::string("IORING_OP_") + needed.name;
  }
  io_uring_free_probe(probe);
  return missing;
}

}  // namespace detail
}  // namespace uxds
