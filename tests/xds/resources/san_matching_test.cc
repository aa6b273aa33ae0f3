// A29 server authorization: SANs of each type against each StringMatcher
// type, and the DNS rules exact matchers follow for DNS SANs.
#include "xds/resources/san_matching.h"

#include <gtest/gtest.h>

namespace uxds {
namespace {

using Type = SubjectAltName::Type;

StringMatcher Matcher(StringMatcher::Type type, std::string value, bool ignore_case = false) {
  StringMatcher matcher;
  matcher.type = type;
  matcher.ignore_case = ignore_case;
  if (type == StringMatcher::Type::kSafeRegex) {
    matcher.regex = *Regex::Create(value);
  } else {
    matcher.value = std::move(value);
  }
  return matcher;
}

StringMatcher Exact(std::string value, bool ignore_case = false) {
  return Matcher(StringMatcher::Type::kExact, std::move(value), ignore_case);
}

TEST(SanMatchingTest, NoMatchersAuthorizeAnyCertificate) {
  EXPECT_TRUE(MatchesSubjectAltNames({}, {}));
  EXPECT_TRUE(MatchesSubjectAltNames({{Type::kDns, "a.example.com"}}, {}));
}

TEST(SanMatchingTest, ACertificateWithoutSansFailsEveryMatcher) {
  EXPECT_FALSE(MatchesSubjectAltNames({}, {Exact("a.example.com")}));
  EXPECT_FALSE(MatchesSubjectAltNames({{Type::kDns, ""}}, {Exact("")}));
}

TEST(SanMatchingTest, OneSanMatchingOneMatcherIsEnough) {
  const std::vector<SubjectAltName> sans = {{Type::kUri, "spiffe://td/ns/a/sa/b"},
                                            {Type::kDns, "b.example.com"}};
  EXPECT_TRUE(MatchesSubjectAltNames(sans, {Exact("nope"), Exact("b.example.com")}));
  EXPECT_TRUE(MatchesSubjectAltNames(
      sans, {Exact("nope"), Matcher(StringMatcher::Type::kPrefix, "spiffe://td/")}));
  EXPECT_FALSE(MatchesSubjectAltNames(sans, {Exact("nope"), Exact("spiffe://td/ns/a")}));
}

TEST(SanMatchingTest, EachMatcherTypeOnAUri) {
  const std::vector<SubjectAltName> sans = {{Type::kUri, "spiffe://TD.example/ns/default/sa/web"}};
  using M = StringMatcher::Type;
  EXPECT_TRUE(MatchesSubjectAltNames(sans, {Exact("spiffe://TD.example/ns/default/sa/web")}));
  // Not a DNS SAN: exact is exact, case and all, unless ignore_case.
  EXPECT_FALSE(MatchesSubjectAltNames(sans, {Exact("spiffe://td.example/ns/default/sa/web")}));
  EXPECT_TRUE(MatchesSubjectAltNames(sans, {Exact("spiffe://td.example/ns/default/sa/web", true)}));
  EXPECT_TRUE(MatchesSubjectAltNames(sans, {Matcher(M::kPrefix, "spiffe://TD.example/")}));
  EXPECT_FALSE(MatchesSubjectAltNames(sans, {Matcher(M::kPrefix, "spiffe://td.example/")}));
  EXPECT_TRUE(MatchesSubjectAltNames(sans, {Matcher(M::kPrefix, "spiffe://td.example/", true)}));
  EXPECT_TRUE(MatchesSubjectAltNames(sans, {Matcher(M::kSuffix, "/sa/web")}));
  EXPECT_TRUE(MatchesSubjectAltNames(sans, {Matcher(M::kContains, "/ns/default/")}));
  EXPECT_TRUE(MatchesSubjectAltNames(sans, {Matcher(M::kContains, "/NS/DEFAULT/", true)}));
  EXPECT_TRUE(
      MatchesSubjectAltNames(sans, {Matcher(M::kSafeRegex, "spiffe://[^/]+/ns/\\w+/sa/web")}));
  EXPECT_FALSE(MatchesSubjectAltNames(sans, {Matcher(M::kSafeRegex, "sa/web")}));  // whole string
}

TEST(SanMatchingTest, IpAndEmailSansCompareAsText) {
  EXPECT_TRUE(MatchesSubjectAltNames({{Type::kIpAddress, "2001:db8::1"}}, {Exact("2001:db8::1")}));
  EXPECT_FALSE(
      MatchesSubjectAltNames({{Type::kIpAddress, "2001:db8::1"}}, {Exact("2001:DB8:0::01")}));
  EXPECT_TRUE(
      MatchesSubjectAltNames({{Type::kEmail, "ops@example.com"}}, {Exact("ops@example.com")}));
}

TEST(SanMatchingTest, ExactMatchersUseDnsRulesForDnsSans) {
  // Case never matters for DNS names; a trailing dot is the same name.
  EXPECT_TRUE(DnsSanMatches("API.Example.com", "api.example.COM"));
  EXPECT_TRUE(DnsSanMatches("api.example.com.", "api.example.com"));
  EXPECT_TRUE(DnsSanMatches("api.example.com", "api.example.com."));
  EXPECT_FALSE(DnsSanMatches("api.example.com", "web.example.com"));
  // A wildcard is one whole leftmost label.
  EXPECT_TRUE(DnsSanMatches("*.example.com", "api.example.com"));
  EXPECT_TRUE(DnsSanMatches("*.Example.com", "API.example.com."));
  EXPECT_FALSE(DnsSanMatches("*.example.com", "example.com"));
  EXPECT_FALSE(DnsSanMatches("*.example.com", "a.b.example.com"));
  EXPECT_FALSE(DnsSanMatches("*.example.com", ".example.com"));
  EXPECT_FALSE(DnsSanMatches("a*.example.com", "ab.example.com"));
  EXPECT_FALSE(DnsSanMatches("*.*.example.com", "a.b.example.com"));
  EXPECT_FALSE(DnsSanMatches("*.", "a."));
  EXPECT_FALSE(DnsSanMatches("*", "a"));
  // Empty names and names starting with a dot match nothing.
  EXPECT_FALSE(DnsSanMatches("", ""));
  EXPECT_FALSE(DnsSanMatches(".example.com", ".example.com"));
  // Through MatchesSubjectAltNames: only exact matchers get the DNS rules.
  const std::vector<SubjectAltName> wildcard = {{Type::kDns, "*.svc.example.com"}};
  EXPECT_TRUE(MatchesSubjectAltNames(wildcard, {Exact("backend.svc.example.com")}));
  EXPECT_FALSE(MatchesSubjectAltNames(
      wildcard, {Matcher(StringMatcher::Type::kSuffix, "backend.svc.example.com")}));
  EXPECT_TRUE(MatchesSubjectAltNames(wildcard,
                                     {Matcher(StringMatcher::Type::kSuffix, ".svc.example.com")}));
}

}  // namespace
}  // namespace uxds
