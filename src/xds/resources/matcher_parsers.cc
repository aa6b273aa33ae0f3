// Matchers that several xDS resources share, with gRPC's error texts.
#include "xds/resources/matcher_parsers.h"

#include <arpa/inet.h>

#include <algorithm>
#include <string>

namespace uxds {
namespace {

// Fills the string part of a header matcher; false if `type` is not one.
bool ParseStringMatcherInto(const envoy::type::matcher::v3::StringMatcher& proto,
                            HeaderMatcher& header) {
  using envoy::type::matcher::v3::StringMatcher;
  switch (proto.match_pattern_case()) {
    case StringMatcher::kExact:
      header.type = HeaderMatcher::Type::kExact;
      header.string_matcher.value = proto.exact();
      break;
    case StringMatcher::kPrefix:
      header.type = HeaderMatcher::Type::kPrefix;
      header.string_matcher.value = proto.prefix();
      break;
    case StringMatcher::kSuffix:
      header.type = HeaderMatcher::Type::kSuffix;
      header.string_matcher.value = proto.suffix();
      break;
    case StringMatcher::kContains:
      header.type = HeaderMatcher::Type::kContains;
      header.string_matcher.value = proto.contains();
      break;
    case StringMatcher::kSafeRegex:
      header.type = HeaderMatcher::Type::kSafeRegex;
      header.string_matcher.value = proto.safe_regex().regex();
      break;
    default:
      return false;
  }
  header.string_matcher.ignore_case = proto.ignore_case();
  return true;
}

}  // namespace

std::optional<HeaderMatcher> ParseHeaderMatcher(
    const envoy::config::route::v3::HeaderMatcher& proto, ValidationErrors& errors) {
  HeaderMatcher header;
  header.name = proto.name();
  header.invert_match = proto.invert_match();
  auto& string_matcher = header.string_matcher;
  switch (proto.header_match_specifier_case()) {
    case envoy::config::route::v3::HeaderMatcher::kExactMatch:
      header.type = HeaderMatcher::Type::kExact;
      string_matcher.value = proto.exact_match();
      break;
    case envoy::config::route::v3::HeaderMatcher::kPrefixMatch:
      header.type = HeaderMatcher::Type::kPrefix;
      string_matcher.value = proto.prefix_match();
      break;
    case envoy::config::route::v3::HeaderMatcher::kSuffixMatch:
      header.type = HeaderMatcher::Type::kSuffix;
      string_matcher.value = proto.suffix_match();
      break;
    case envoy::config::route::v3::HeaderMatcher::kContainsMatch:
      header.type = HeaderMatcher::Type::kContains;
      string_matcher.value = proto.contains_match();
      break;
    case envoy::config::route::v3::HeaderMatcher::kSafeRegexMatch:
      header.type = HeaderMatcher::Type::kSafeRegex;
      string_matcher.value = proto.safe_regex_match().regex();
      break;
    case envoy::config::route::v3::HeaderMatcher::kRangeMatch:
      header.type = HeaderMatcher::Type::kRange;
      header.range_start = proto.range_match().start();
      header.range_end = proto.range_match().end();
      if (header.range_start > header.range_end) {
        errors.Add(
            "cannot create header matcher: Invalid range specifier specified: end cannot be "
            "smaller than start.");
        return std::nullopt;
      }
      return header;
    case envoy::config::route::v3::HeaderMatcher::kPresentMatch:
      header.type = HeaderMatcher::Type::kPresent;
      header.present_match = proto.present_match();
      return header;
    case envoy::config::route::v3::HeaderMatcher::kStringMatch:
      if (!ParseStringMatcherInto(proto.string_match(), header)) {
        auto field = errors.Scope(".string_match");
        errors.Add("invalid string matcher");
        return std::nullopt;
      }
      break;
    default:
      errors.Add("invalid header matcher");
      return std::nullopt;
  }
  if (header.type == HeaderMatcher::Type::kSafeRegex) {
    auto regex = Regex::Create(string_matcher.value);
    if (!regex.ok()) {
      errors.Add("cannot create header matcher: Invalid regex string specified in matcher: " +
                 regex.status().message());
      return std::nullopt;
    }
    string_matcher.regex = *std::move(regex);
    string_matcher.value.clear();
    // As gRPC: a regex header matcher is case-sensitive whatever ignore_case says.
    string_matcher.ignore_case = false;
  }
  // The header types map one to one onto the string matcher types.
  string_matcher.type = static_cast<StringMatcher::Type>(header.type);
  return header;
}

std::optional<StringMatcher> ParseStringMatcher(
    const envoy::type::matcher::v3::StringMatcher& proto, ValidationErrors& errors) {
  using Proto = envoy::type::matcher::v3::StringMatcher;
  StringMatcher matcher;
  matcher.ignore_case = proto.ignore_case();
  switch (proto.match_pattern_case()) {
    case Proto::kExact:
      matcher.type = StringMatcher::Type::kExact;
      matcher.value = proto.exact();
      return matcher;
    case Proto::kPrefix:
      matcher.type = StringMatcher::Type::kPrefix;
      matcher.value = proto.prefix();
      return matcher;
    case Proto::kSuffix:
      matcher.type = StringMatcher::Type::kSuffix;
      matcher.value = proto.suffix();
      return matcher;
    case Proto::kContains:
      matcher.type = StringMatcher::Type::kContains;
      matcher.value = proto.contains();
      return matcher;
    case Proto::kSafeRegex: {
      StatusOr<Regex> regex = Regex::Create(proto.safe_regex().regex());
      if (!regex.ok()) {
        errors.Add("Invalid regex string specified in matcher: " + regex.status().message());
        return std::nullopt;
      }
      matcher.type = StringMatcher::Type::kSafeRegex;
      matcher.regex = *std::move(regex);
      // Case folding is not a regex option (gRPC ignores it here too).
      matcher.ignore_case = false;
      return matcher;
    }
    default:
      errors.Add("invalid StringMatcher specified");
      return std::nullopt;
  }
}

// A36 CIDR normalization: prefix_len clamped (absent = 0), host bits zeroed.
std::optional<CidrRange> ParseCidrRange(const envoy::config::core::v3::CidrRange& proto,
                                        ValidationErrors& errors) {
  auto field = errors.Scope(".address_prefix");
  CidrRange range;
  const std::string& prefix = proto.address_prefix();
  if (inet_pton(AF_INET, prefix.c_str(), range.address.data()) == 1) {
    range.is_ipv6 = false;
  } else if (inet_pton(AF_INET6, prefix.c_str(), range.address.data()) == 1) {
    range.is_ipv6 = true;
  } else {
    errors.Add("Failed to parse address:" + prefix);
    return std::nullopt;
  }
  const uint32_t max_len = range.is_ipv6 ? 128 : 32;
  range.prefix_len = proto.has_prefix_len() ? std::min(proto.prefix_len().value(), max_len) : 0;
  for (uint32_t bit = range.prefix_len; bit < max_len; ++bit) {
    range.address[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
  return range;
}

}  // namespace uxds
