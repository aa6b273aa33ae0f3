// Header-value encodings of gRPC over HTTP/2 (grpc/doc/PROTOCOL-HTTP2.md) and
// the status mappings gRPC applies when a peer or proxy does not send one.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "uxds/status.h"

namespace uxds::http2 {

// grpc-timeout: TimeoutValue (1 to 8 ASCII digits) + TimeoutUnit (H M S m u n).
// Encodes in the finest unit whose value fits in 8 digits, rounding up so the
// peer never sees a shorter deadline than ours; a zero or negative timeout
// encodes as "1n". Timeouts beyond 99999999 hours are capped there.
std::string EncodeGrpcTimeout(std::chrono::nanoseconds timeout);
// nullopt when `value` does not follow the grammar (empty, more than 8 digits,
// unknown unit, anything else).
std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value);

// grpc-message: Percent-Encoded. Bytes outside 0x20..0x7E and '%' itself are
// sent as %XX (uppercase hex); the message is UTF-8, so non-ASCII text takes
// one %XX per byte.
std::string PercentEncodeGrpcMessage(std::string_view message);
// Decodes %XX sequences; a '%' not followed by two hex digits is kept as is
// (PROTOCOL-HTTP2: "implementations MUST NOT error or throw away the message").
std::string PercentDecodeGrpcMessage(std::string_view encoded);

// grpc/doc/http-grpc-status-mapping.md: the status a client reports when a
// response carries an HTTP status but no grpc-status.
StatusCode StatusCodeFromHttpStatus(int http_status);

// PROTOCOL-HTTP2 "Errors": the status of a call whose stream the peer reset
// with `http2_error_code` before sending a grpc-status.
Status StatusFromRstStream(uint32_t http2_error_code);

// grpc-status as received: "0".."16" without leading zeros; other numbers
// map to UNKNOWN (as gRPC does); nullopt if `value` is not a decimal number.
std::optional<StatusCode> ParseGrpcStatus(std::string_view value);

// content-type is gRPC when it is "application/grpc" or starts with
// "application/grpc+" or "application/grpc;" (PROTOCOL-HTTP2 Content-Type).
bool IsGrpcContentType(std::string_view content_type);

}  // namespace uxds::http2
