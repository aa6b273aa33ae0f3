// Errors as values: gRPC status codes with a message.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace uxds {

// The gRPC status codes (same numbers as grpc/status.h and google.rpc.Code).
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "NOT_FOUND", "UNAVAILABLE", ...; "UNKNOWN" for values outside the enum.
std::string_view StatusCodeName(StatusCode code);
std::optional<StatusCode> StatusCodeFromName(std::string_view name);
// Any integer received on the wire; values outside 0..16 become kUnknown.
StatusCode StatusCodeFromInt(int value);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {
    if (code_ == StatusCode::kOk) message_.clear();
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "NOT_FOUND: does not exist".
  std::string ToString() const;
  // Same code, message prefixed with `context + ": "`.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status UnknownError(std::string m) { return {StatusCode::kUnknown, std::move(m)}; }
inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status PermissionDeniedError(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status UnimplementedError(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }

// Maps a (positive) errno value to a status whose message reads
// "<what>: <strerror> (<ENAME>)", e.g. "connect 127.0.0.1:1: Connection refused (ECONNREFUSED)".
Status ErrnoToStatus(int err, std::string_view what);
// "ECONNREFUSED" for 111, "errno 4242" for unknown values.
std::string ErrnoName(int err);

template <typename T>
class [[nodiscard]] StatusOr {
  static_assert(!std::is_same_v<std::remove_cvref_t<T>, Status>);

 public:
  StatusOr(const Status& status) : v_(status) { assert(!status.ok()); }
  StatusOr(Status&& status) : v_(std::move(status)) { assert(!std::get<0>(v_).ok()); }
  template <typename U = T,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                        !std::is_same_v<std::remove_cvref_t<U>, Status> &&
                                        !std::is_same_v<std::remove_cvref_t<U>, StatusOr>>>
  StatusOr(U&& value) : v_(std::in_place_index<1>, std::forward<U>(value)) {}

  bool ok() const { return v_.index() == 1; }
  Status status() const { return ok() ? Status() : std::get<0>(v_); }

  T& value() & { return std::get<1>(v_); }
  const T& value() const& { return std::get<1>(v_); }
  T&& value() && { return std::get<1>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace uxds

// Early-return helpers for code that returns Status or StatusOr<T>.
#define UXDS_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::uxds::Status uxds_status_ = (expr);        \
    if (!uxds_status_.ok()) return uxds_status_; \
  } while (0)
// The same inside a coroutine (Task<Status> / Task<StatusOr<T>>).
#define UXDS_CO_RETURN_IF_ERROR(expr)               \
  do {                                              \
    ::uxds::Status uxds_status_ = (expr);           \
    if (!uxds_status_.ok()) co_return uxds_status_; \
  } while (0)
