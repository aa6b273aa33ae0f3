#include "xds/client/xds_resource_name.h"

#include <cstdio>
#include <map>
#include <optional>
#include <string>

namespace uxds::xds_internal {

size_t FindInvalidUtf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // Unicode 15, table 3-7 (well-formed UTF-8 byte sequences): the lead byte
    // fixes the length and the range of the second byte, which excludes
    // overlong forms, surrogates and code points above U+10FFFF.
    size_t length;
    unsigned char second_min = 0x80, second_max = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) second_min = 0xA0;
      if (lead == 0xED) second_max = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) second_min = 0x90;
      if (lead == 0xF4) second_max = 0x8F;
    } else {
      return i;
    }
    if (size - i < length) return i;
    if (bytes[i + 1] < second_min || bytes[i + 1] > second_max) return i;
    for (size_t k = 2; k < length; ++k) {
      if (bytes[i + k] < 0x80 || bytes[i + k] > 0xBF) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

StatusOr<XdsResourceName> ParseXdsResourceName(std::string_view name, const XdsResourceType& type) {
  // DiscoveryRequest.resource_names is a proto3 string: a control plane
  // rejects a request with a name that is not UTF-8 as a whole, which would
  // fail every other watch on that server too.
  if (const size_t bad = FindInvalidUtf8(name); bad != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(name[bad]));
    return InvalidArgumentError("resource name is not valid UTF-8 (byte " + std::string(byte) +
                                " at offset " + std::to_string(bad) + ")");
  }
  constexpr std::string_view kScheme = "xdstp:";
  if (!name.starts_with(kScheme))
    return XdsResourceName{std::string(kOldStyleAuthority), std::string(name)};
  auto invalid = [&](std::string_view why) {
    return InvalidArgumentError("invalid xdstp resource name \"" + std::string(name) +
                                "\": " + std::string(why));
  };
  std::string_view rest = name.substr(kScheme.size());
  if (!rest.starts_with("//")) return invalid("expected \"xdstp://\"");
  rest.remove_prefix(2);
  // TP1: a fragment carries client directives, which are not part of the
  // resource's identity; uxds supports none of them.
  if (rest.find('#') != std::string_view::npos) return invalid("fragments are not supported");
  std::string_view query;
  if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const size_t authority_end = rest.find('/');
  if (authority_end == std::string_view::npos) return invalid("no resource type in the path");
  XdsResourceName result;
  result.authority = std::string(rest.substr(0, authority_end));
  std::string_view path = rest.substr(authority_end + 1);
  const size_t type_end = path.find('/');
  const std::string_view type_name = path.substr(0, type_end);
  if (type_name != type.type_name()) {
    return invalid("resource type \"" + std::string(type_name) + "\" in the path is not \"" +
                   std::string(type.type_name()) + "\"");
  }
  if (type_end == std::string_view::npos) return invalid("no resource id in the path");
  const std::string_view id = path.substr(type_end + 1);
  // A47: "sorting the context params in normal lexicographic order"; for a
  // repeated key "just use the last value seen".
  std::map<std::string, std::optional<std::string>, std::less<>> params;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (param.empty()) continue;
    const size_t eq = param.find('=');
    std::string key(param.substr(0, eq));
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value = std::string(param.substr(eq + 1));
    params[std::move(key)] = std::move(value);
  }
  result.key = "xdstp://" + result.authority + "/" + std::string(type_name) + "/" + std::string(id);
  char separator = '?';
  for (const auto& [key, value] : params) {
    result.key += separator;
    result.key += key;
    if (value.has_value()) {
      result.key += '=';
      result.key += *value;
    }
    separator = '&';
  }
  return result;
}

}  // namespace uxds::xds_internal
