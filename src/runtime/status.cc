#include "uxds/status.h"

#include <array>
#include <cerrno>
#include <cstring>

namespace uxds {
namespace {

constexpr std::array<std::string_view, 17> kCodeNames = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

}  // namespace

std::string_view StatusCodeName(StatusCode code) {
  auto i = static_cast<size_t>(code);
  return i < kCodeNames.size() ? kCodeNames[i] : std::string_view("UNKNOWN");
}

std::optional<StatusCode> StatusCodeFromName(std::string_view name) {
  for (size_t i = 0; i < kCodeNames.size(); ++i) {
    if (kCodeNames[i] == name) return static_cast<StatusCode>(i);
  }
  return std::nullopt;
}

StatusCode StatusCodeFromInt(int value) {
  if (value < 0 || value >= static_cast<int>(kCodeNames.size())) return StatusCode::kUnknown;
  return static_cast<StatusCode>(value);
}

std::string Status::ToString() const {
  std::string out(StatusCodeName(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

std::string ErrnoName(int err) {
  // strerrorname_np is glibc >= 2.32 (Debian 12 has 2.36).
  const char* name = strerrorname_np(err);
  return name != nullptr ? std::string(name) : "errno " + std::to_string(err);
}

Status ErrnoToStatus(int err, std::string_view what) {
  StatusCode code;
  switch (err) {
    case ECANCELED:
      code = StatusCode::kCancelled;
      break;
    case ETIMEDOUT:
    case ETIME:
      code = StatusCode::kDeadlineExceeded;
      break;
    case EPERM:
    case EACCES:
      code = StatusCode::kPermissionDenied;
      break;
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
      code = StatusCode::kResourceExhausted;
      break;
    case EINVAL:
    case EBADF:
    case ENOTSOCK:
    case EAFNOSUPPORT:
      code = StatusCode::kInvalidArgument;
      break;
    case ENOSYS:
    case EOPNOTSUPP:
      code = StatusCode::kUnimplemented;
      break;
    case EADDRINUSE:
      code = StatusCode::kAlreadyExists;
      break;
    default:
      // ECONNREFUSED, ECONNRESET, EPIPE, EHOSTUNREACH, ENETUNREACH, ...
      code = StatusCode::kUnavailable;
      break;
  }
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  msg += " (" + ErrnoName(err) + ")";
  return Status(code, std::move(msg));
}

}  // namespace uxds
