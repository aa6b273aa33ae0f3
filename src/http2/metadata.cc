#include "http2/metadata.h"

#include <array>
#include <cstdint>

namespace uxds::http2 {
namespace {

constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> MakeBase64DecodeTable() {
  std::array<int8_t, 256> table{};
  for (auto& v : table) v = -1;
  for (int i = 0; i < 64; ++i) table[static_cast<uint8_t>(kBase64Alphabet[i])] = int8_t(i);
  return table;
}
constexpr std::array<int8_t, 256> kBase64Decode = MakeBase64DecodeTable();

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

const std::string* FindMetadata(const Metadata& metadata, std::string_view key) {
  for (const auto& [k, v] : metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool IsValidMetadataKey(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    const bool ok =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool IsBinaryMetadataKey(std::string_view key) { return EndsWith(key, "-bin"); }

bool IsValidAsciiMetadataValue(std::string_view value) {
  for (char c : value) {
    if (c < 0x20 || c > 0x7E) return false;
  }
  return true;
}

bool IsReservedMetadataKey(std::string_view key) {
  static constexpr std::string_view kReserved[] = {
      "content-type", "te",         "user-agent",       "host",
      "connection",   "keep-alive", "proxy-connection", "transfer-encoding",
      "upgrade"};
  for (std::string_view r : kReserved) {
    if (key == r) return true;
  }
  // PROTOCOL-HTTP2: "Header names starting with "grpc-" but not listed here
  // are reserved for future GRPC use". Rich error details are application data.
  return key.substr(0, 5) == "grpc-" && key != "grpc-status-details-bin";
}

Status ValidateMetadataToSend(const Metadata& metadata) {
  for (const auto& [key, value] : metadata) {
    if (!IsValidMetadataKey(key)) {
      return InternalError("metadata key \"" + key +
                           "\" is invalid: only 0-9 a-z _ - . are allowed");
    }
    if (IsReservedMetadataKey(key)) {
      return InternalError("metadata key \"" + key + "\" is reserved for the transport");
    }
    if (!IsBinaryMetadataKey(key) && !IsValidAsciiMetadataValue(value)) {
      return InternalError("metadata value of \"" + key +
                           "\" is not printable ASCII; use a key ending in -bin for bytes");
    }
  }
  return OkStatus();
}

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{uint8_t(bytes[i])} << 16) |
                       (uint32_t{uint8_t(bytes[i + 1])} << 8) | uint8_t(bytes[i + 2]);
    out.push_back(kBase64Alphabet[(n >> 18) & 63]);
    out.push_back(kBase64Alphabet[(n >> 12) & 63]);
    out.push_back(kBase64Alphabet[(n >> 6) & 63]);
    out.push_back(kBase64Alphabet[n & 63]);
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = uint32_t{uint8_t(bytes[i])} << 16;
    if (rest == 2) n |= uint32_t{uint8_t(bytes[i + 1])} << 8;
    out.push_back(kBase64Alphabet[(n >> 18) & 63]);
    out.push_back(kBase64Alphabet[(n >> 12) & 63]);
    if (rest == 2) out.push_back(kBase64Alphabet[(n >> 6) & 63]);
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 == 0 && !text.empty()) {
    // Strip up to two '=' of a padded final quantum.
    if (text.back() == '=') text.remove_suffix(1);
    if (text.back() == '=') text.remove_suffix(1);
  }
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int8_t v = kBase64Decode[static_cast<uint8_t>(c)];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

std::string EncodeMetadataValue(std::string_view key, std::string_view value) {
  if (IsBinaryMetadataKey(key)) return Base64Encode(value);
  return std::string(value);
}

void AppendReceivedMetadata(Metadata& metadata, std::string_view key, std::string_view value) {
  if (!IsBinaryMetadataKey(key)) {
    metadata.emplace_back(key, value);
    return;
  }
  // PROTOCOL-HTTP2: "Implementations must split Binary-Headers on "," before
  // decoding the Base64-encoded values."
  while (true) {
    const size_t comma = value.find(',');
    std::string_view part = value.substr(0, comma);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    std::optional<std::string> decoded = Base64Decode(part);
    metadata.emplace_back(key, decoded ? std::move(*decoded) : std::string(part));
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace uxds::http2
