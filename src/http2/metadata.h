// gRPC metadata: custom headers and trailers of a call (PROTOCOL-HTTP2
// Custom-Metadata).
//
// Keys are lowercase (Header-Name: 0-9 a-z _ - .). A key ending in "-bin"
// holds arbitrary bytes: the application sees raw bytes and the wire carries
// them base64-encoded; every other value is printable ASCII (0x20..0x7E).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "uxds/status.h"

namespace uxds::http2 {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// The value of the first entry named `key`, or nullptr.
const std::string* FindMetadata(const Metadata& metadata, std::string_view key);

bool IsValidMetadataKey(std::string_view key);
bool IsBinaryMetadataKey(std::string_view key);
bool IsValidAsciiMetadataValue(std::string_view value);
// Keys the transport writes itself or HTTP/2 forbids: an application may not
// send them (content-type, te, user-agent, connection-specific headers and
// every "grpc-" key except grpc-status-details-bin).
bool IsReservedMetadataKey(std::string_view key);

// Checks metadata an application wants to send. INTERNAL (what gRPC reports
// for invalid metadata) naming the offending key.
Status ValidateMetadataToSend(const Metadata& metadata);

// RFC 4648 section 4 base64. Encode emits no padding (PROTOCOL-HTTP2: "should
// emit un-padded values"); Decode accepts padded and unpadded input and
// returns nullopt on anything else.
std::string Base64Encode(std::string_view bytes);
std::optional<std::string> Base64Decode(std::string_view text);

// The header value for one application entry: base64 for "-bin" keys.
std::string EncodeMetadataValue(std::string_view key, std::string_view value);

// Adds one received header to `metadata`. "-bin" values are split on ','
// (peers may join duplicates) and decoded; a value that is not valid base64
// is kept undecoded rather than dropped.
void AppendReceivedMetadata(Metadata& metadata, std::string_view key, std::string_view value);

// HTTP/2 header-list size of one field as SETTINGS_MAX_HEADER_LIST_SIZE
// counts it (RFC 9113 section 6.5.2): name + value + 32.
inline size_t HeaderFieldSize(std::string_view name, std::string_view value) {
  return name.size() + value.size() + 32;
}

}  // namespace uxds::http2
