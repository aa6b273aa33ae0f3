#include "http2/grpc_protocol.h"

#include <array>
#include <cstdint>

namespace uxds::http2 {
namespace {

constexpr uint64_t kMaxTimeoutValue = 99999999;  // PROTOCOL-HTTP2: at most 8 digits

struct TimeoutUnit {
  char symbol;
  int64_t nanos;
};
// Finest first: the encoder takes the first unit the value fits in.
constexpr std::array<TimeoutUnit, 6> kTimeoutUnits = {{
    {'n', 1},
    {'u', 1'000},
    {'m', 1'000'000},
    {'S', 1'000'000'000},
    {'M', 60'000'000'000},
    {'H', 3'600'000'000'000},
}};

// Received timeouts are clamped so that now + timeout cannot overflow the clock.
constexpr std::chrono::nanoseconds kMaxParsedTimeout = std::chrono::hours(24 * 365 * 100);

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string_view Http2ErrorName(uint32_t code) {
  static constexpr std::array<std::string_view, 14> kNames = {"NO_ERROR",
                                                              "PROTOCOL_ERROR",
                                                              "INTERNAL_ERROR",
                                                              "FLOW_CONTROL_ERROR",
                                                              "SETTINGS_TIMEOUT",
                                                              "STREAM_CLOSED",
                                                              "FRAME_SIZE_ERROR",
                                                              "REFUSED_STREAM",
                                                              "CANCEL",
                                                              "COMPRESSION_ERROR",
                                                              "CONNECT_ERROR",
                                                              "ENHANCE_YOUR_CALM",
                                                              "INADEQUATE_SECURITY",
                                                              "HTTP_1_1_REQUIRED"};
  return code < kNames.size() ? kNames[code] : std::string_view("unknown error code");
}

}  // namespace

std::string EncodeGrpcTimeout(std::chrono::nanoseconds timeout) {
  const int64_t nanos = timeout.count();
  if (nanos <= 0) return "1n";
  for (const TimeoutUnit& unit : kTimeoutUnits) {
    // Round up: a peer must not cut the call short of our own deadline.
    const uint64_t value = (static_cast<uint64_t>(nanos) + unit.nanos - 1) / unit.nanos;
    if (value <= kMaxTimeoutValue) return std::to_string(value) + unit.symbol;
  }
  return std::to_string(kMaxTimeoutValue) + 'H';
}

std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value) {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  const char symbol = value.back();
  value.remove_suffix(1);
  uint64_t number = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    number = number * 10 + static_cast<uint64_t>(c - '0');
  }
  for (const TimeoutUnit& unit : kTimeoutUnits) {
    if (unit.symbol != symbol) continue;
    // number <= 99999999 and unit.nanos <= 3.6e12: the product can exceed
    // int64, so compare before multiplying.
    if (number > static_cast<uint64_t>(kMaxParsedTimeout.count() / unit.nanos)) {
      return kMaxParsedTimeout;
    }
    return std::chrono::nanoseconds(static_cast<int64_t>(number) * unit.nanos);
  }
  return std::nullopt;
}

std::string PercentEncodeGrpcMessage(std::string_view message) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(message.size());
  for (char c : message) {
    const auto byte = static_cast<uint8_t>(c);
    // Percent-Byte-Unencoded: %x20-24 / %x26-7E.
    if (byte >= 0x20 && byte <= 0x7E && byte != '%') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out;
}

std::string PercentDecodeGrpcMessage(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] == '%' && i + 2 < encoded.size() && HexValue(encoded[i + 1]) >= 0 &&
        HexValue(encoded[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(encoded[i + 1]) * 16 + HexValue(encoded[i + 2])));
      i += 2;
    } else {
      out.push_back(encoded[i]);
    }
  }
  return out;
}

StatusCode StatusCodeFromHttpStatus(int http_status) {
  switch (http_status) {
    case 400:
      return StatusCode::kInternal;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kUnimplemented;
    case 429:
    case 502:
    case 503:
    case 504:
      return StatusCode::kUnavailable;
    default:
      return StatusCode::kUnknown;
  }
}

Status StatusFromRstStream(uint32_t http2_error_code) {
  std::string message = "stream reset with " + std::string(Http2ErrorName(http2_error_code));
  if (http2_error_code >= 14) message += " (" + std::to_string(http2_error_code) + ")";
  switch (http2_error_code) {
    case 7:  // REFUSED_STREAM: nothing was processed; the call may be retried.
      return UnavailableError(std::move(message));
    case 8:  // CANCEL
      return CancelledError(std::move(message));
    case 11:  // ENHANCE_YOUR_CALM
      return ResourceExhaustedError(std::move(message));
    case 12:  // INADEQUATE_SECURITY
      return PermissionDeniedError(std::move(message));
    default:  // NO_ERROR without a grpc-status, and every other code
      return InternalError(std::move(message));
  }
}

std::optional<StatusCode> ParseGrpcStatus(std::string_view value) {
  if (value.empty() || value.size() > 9) return std::nullopt;
  int number = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    number = number * 10 + (c - '0');
  }
  return StatusCodeFromInt(number);
}

bool IsGrpcContentType(std::string_view content_type) {
  constexpr std::string_view kGrpc = "application/grpc";
  if (content_type.substr(0, kGrpc.size()) != kGrpc) return false;
  if (content_type.size() == kGrpc.size()) return true;
  const char next = content_type[kGrpc.size()];
  return next == '+' || next == ';';
}

}  // namespace uxds::http2
