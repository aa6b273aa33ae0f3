#include "xds/client/xds_resource_name.h"

#include <map>
#include <optional>
#include <string>

namespace uxds::xds_internal {

StatusOr<XdsResourceName> ParseXdsResourceName(std::string_view name, const XdsResourceType& type) {
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
