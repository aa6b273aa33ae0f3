#include "uxds/resources/matchers.h"

#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <string>

#include "xds/resources/ascii_case.h"

namespace uxds {
namespace {

// Case-insensitive (ASCII) substring search without copying either side:
// a call's route matchers run on the call path, which allocates nothing.
bool ContainsIgnoreCase(std::string_view text, std::string_view part) {
  auto found = std::search(text.begin(), text.end(), part.begin(), part.end(),
                           [](char x, char y) { return AsciiLower(x) == AsciiLower(y); });
  return found != text.end() || part.empty();
}

}  // namespace

StatusOr<Regex> Regex::Create(std::string_view pattern) {
  RE2::Options options;
  // A bad regex is reported once, in the NACK; RE2 would also log it.
  options.set_log_errors(false);
  auto compiled =
      std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!compiled->ok()) return InvalidArgumentError(compiled->error());
  Regex regex;
  regex.pattern_ = std::string(pattern);
  regex.re2_ = std::move(compiled);
  return regex;
}

bool Regex::FullMatch(std::string_view text) const {
  if (re2_ == nullptr) return false;
  return RE2::FullMatch(re2::StringPiece(text.data(), text.size()), *re2_);
}

int Regex::GlobalReplace(std::string* text, std::string_view rewrite) const {
  if (re2_ == nullptr) return 0;
  return RE2::GlobalReplace(text, *re2_, re2::StringPiece(rewrite.data(), rewrite.size()));
}

bool StringMatcher::Matches(std::string_view text) const {
  switch (type) {
    case Type::kExact:
      return ignore_case ? EqualsIgnoreCase(text, value) : text == value;
    case Type::kPrefix:
      return text.size() >= value.size() &&
             (ignore_case ? EqualsIgnoreCase(text.substr(0, value.size()), value)
                          : text.substr(0, value.size()) == value);
    case Type::kSuffix:
      return text.size() >= value.size() &&
             (ignore_case ? EqualsIgnoreCase(text.substr(text.size() - value.size()), value)
                          : text.substr(text.size() - value.size()) == value);
    case Type::kContains:
      return ignore_case ? ContainsIgnoreCase(text, value)
                         : text.find(value) != std::string_view::npos;
    case Type::kSafeRegex:
      return regex.FullMatch(text);
  }
  return false;
}

std::string StringMatcher::ToString() const {
  std::string out;
  switch (type) {
    case Type::kExact:
      out = "exact:" + value;
      break;
    case Type::kPrefix:
      out = "prefix:" + value;
      break;
    case Type::kSuffix:
      out = "suffix:" + value;
      break;
    case Type::kContains:
      out = "contains:" + value;
      break;
    case Type::kSafeRegex:
      out = "safe_regex:" + regex.pattern();
      break;
  }
  if (ignore_case) out += " (ignore_case)";
  return out;
}

bool HeaderMatcher::Matches(std::string_view value, bool present) const {
  if (!present && treat_missing_as_empty && type != Type::kPresent) {
    value = std::string_view();
    present = true;
  }
  bool match = false;
  if (type == Type::kPresent) {
    match = present == present_match;
  } else if (!present) {
    // A28: every other type fails on a missing header, inverted or not.
    return false;
  } else if (type == Type::kRange) {
    int64_t number = 0;
    const char* end = value.data() + value.size();
    auto [ptr, ec] = std::from_chars(value.data(), end, number);
    match = ec == std::errc() && ptr == end && !value.empty() && number >= range_start &&
            number < range_end;
  } else {
    match = string_matcher.Matches(value);
  }
  return match != invert_match;
}

}  // namespace uxds
