#include "xds/resources/san_matching.h"

#include <string>

namespace uxds {
namespace {

// Lower case with a trailing dot: "Api.Example.com" -> "api.example.com.".
std::string NormalizedDnsName(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (out.empty() || out.back() != '.') out.push_back('.');
  return out;
}

}  // namespace

bool DnsSanMatches(std::string_view san, std::string_view name) {
  if (san.empty() || san.front() == '.' || name.empty() || name.front() == '.') return false;
  const std::string normalized_san = NormalizedDnsName(san);
  const std::string normalized_name = NormalizedDnsName(name);
  if (normalized_san.find('*') == std::string::npos) return normalized_san == normalized_name;
  // A wildcard only as the whole leftmost label, and only one.
  if (!normalized_san.starts_with("*.") || normalized_san == "*.") return false;
  const std::string_view suffix = std::string_view(normalized_san).substr(1);  // ".example.com."
  if (suffix.find('*') != std::string_view::npos) return false;
  if (normalized_name.size() <= suffix.size() || !normalized_name.ends_with(suffix)) return false;
  // The label the '*' stands for is one label: no dot before the suffix.
  const std::string_view label =
      std::string_view(normalized_name).substr(0, normalized_name.size() - suffix.size());
  return label.find('.') == std::string_view::npos;
}

bool MatchesSubjectAltNames(const std::vector<SubjectAltName>& sans,
                            const std::vector<StringMatcher>& matchers) {
  if (matchers.empty()) return true;
  for (const SubjectAltName& san : sans) {
    if (san.value.empty()) continue;
    for (const StringMatcher& matcher : matchers) {
      const bool matched =
          matcher.type == StringMatcher::Type::kExact && san.type == SubjectAltName::Type::kDns
              ? DnsSanMatches(san.value, matcher.value)
              : matcher.Matches(san.value);
      if (matched) return true;
    }
  }
  return false;
}

}  // namespace uxds
