// ALPN protocol lists in their wire form (RFC 7301 §3.1): each protocol name
// preceded by its one-byte length.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace uxds {

// {"h2", "http/1.1"} -> "\x02h2\x08http/1.1". Names must be 1..255 bytes.
inline std::vector<uint8_t> EncodeAlpnProtocols(const std::vector<std::string>& protocols) {
  std::vector<uint8_t> wire;
  for (const std::string& p : protocols) {
    wire.push_back(static_cast<uint8_t>(p.size()));
    wire.insert(wire.end(), p.begin(), p.end());
  }
  return wire;
}

// The entry of `wire` equal to `protocol` (pointing into `wire`), or nullopt.
// A malformed list matches nothing.
inline std::optional<std::span<const uint8_t>> FindAlpnProtocol(std::span<const uint8_t> wire,
                                                                std::string_view protocol) {
  size_t i = 0;
  while (i < wire.size()) {
    size_t len = wire[i];
    if (len == 0 || i + 1 + len > wire.size()) return std::nullopt;
    std::span<const uint8_t> name = wire.subspan(i + 1, len);
    if (std::string_view(reinterpret_cast<const char*>(name.data()), name.size()) == protocol) {
      return name;
    }
    i += 1 + len;
  }
  return std::nullopt;
}

}  // namespace uxds
