// Matchers shared by the parsed xDS resources: RE2 regexes, string matchers
// and header matchers (A28), compiled once when the resource is decoded on the
// control thread and read without locks afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "uxds/status.h"

namespace re2 {
class RE2;
}

namespace uxds {

// A compiled RE2 regex. Copies share the (immutable, thread-safe) program.
// Equality compares patterns, so two decodes of the same resource are equal.
class Regex {
 public:
  // INVALID_ARGUMENT with RE2's error text if `pattern` does not compile.
  static StatusOr<Regex> Create(std::string_view pattern);

  // An empty Regex matches nothing (it is only a placeholder).
  Regex() = default;

  const std::string& pattern() const { return pattern_; }
  bool valid() const { return re2_ != nullptr; }
  // The whole of `text` matches.
  bool FullMatch(std::string_view text) const;
  // Replaces every non-overlapping match in `text` by `rewrite` (\1..\9 name
  // groups), as RE2::GlobalReplace; returns the number of replacements.
  int GlobalReplace(std::string* text, std::string_view rewrite) const;
  const re2::RE2* re2() const { return re2_.get(); }

  friend bool operator==(const Regex& a, const Regex& b) { return a.pattern_ == b.pattern_; }

 private:
  std::string pattern_;
  std::shared_ptr<const re2::RE2> re2_;
};

// envoy.type.matcher.v3.StringMatcher, and the path matcher of a route.
struct StringMatcher {
  enum class Type { kExact, kPrefix, kSuffix, kContains, kSafeRegex };

  Type type = Type::kExact;
  std::string value;  // every type but kSafeRegex
  Regex regex;        // kSafeRegex
  // Case-insensitive comparison (ASCII) for every type but kSafeRegex.
  bool ignore_case = false;

  bool Matches(std::string_view text) const;
  // "exact:/svc/method", "prefix:/svc/", "safe_regex:^/svc/.*$", plus
  // " (ignore_case)" when set.
  std::string ToString() const;

  friend bool operator==(const StringMatcher&, const StringMatcher&) = default;
};

// envoy.config.route.v3.HeaderMatcher as gRPC evaluates it (A28): headers
// ending in "-bin" never match (the caller passes nullopt for them), and a
// missing header fails every type but present_match.
struct HeaderMatcher {
  enum class Type { kExact, kPrefix, kSuffix, kContains, kSafeRegex, kRange, kPresent };

  std::string name;
  Type type = Type::kExact;
  StringMatcher string_matcher;  // the string types (its type mirrors `type`)
  int64_t range_start = 0;       // kRange: [start, end)
  int64_t range_end = 0;
  bool present_match = false;  // kPresent
  bool invert_match = false;
  // treat_missing_header_as_empty (RBAC only): a missing header is matched
  // as "" by every type but kPresent.
  bool treat_missing_as_empty = false;

  // `value`: the header's value (several values joined with ','), nullopt
  // if the request does not carry it.
  bool Matches(std::optional<std::string_view> value) const {
    return value.has_value() ? Matches(*value, true) : Matches(std::string_view(), false);
  }
  // The same with the value's presence apart (an optional passed by value
  // goes through memory; this form stays in registers on a hot path).
  bool Matches(std::string_view value, bool present) const;

  friend bool operator==(const HeaderMatcher&, const HeaderMatcher&) = default;
};

}  // namespace uxds
