// UpstreamTls keys: subchannels to one address are shared only by clusters
// secured exactly alike (A29), so two configs that differ in any field that
// decides the security must never share a key.
#include "lb/upstream_tls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uxds {
namespace {

StringMatcher Exact(std::string value, bool ignore_case) {
  StringMatcher matcher;
  matcher.value = std::move(value);
  matcher.ignore_case = ignore_case;
  return matcher;
}

std::string KeyOf(const std::string& identity, const std::string& ca,
                  std::vector<StringMatcher> matchers) {
  CommonTlsContext context;
  context.tls_certificate_provider_instance.instance_name = identity;
  context.certificate_validation_context.ca_certificate_provider_instance.instance_name = ca;
  context.certificate_validation_context.match_subject_alt_names = std::move(matchers);
  return UpstreamTls::FromXds(Bootstrap(), context)->key();
}

TEST(UpstreamTlsTest, KeysTellEveryDifferenceApart) {
  EXPECT_EQ(KeyOf("id", "ca", {Exact("a", false)}), KeyOf("id", "ca", {Exact("a", false)}));
  // A matcher whose text looks like another's flags.
  EXPECT_NE(KeyOf("id", "ca", {Exact("a (ignore_case)", false)}),
            KeyOf("id", "ca", {Exact("a", true)}));
  // Instance names that run into each other.
  EXPECT_NE(KeyOf("ab", "c", {}), KeyOf("a", "bc", {}));
  EXPECT_NE(KeyOf("", "ca", {}), KeyOf("ca", "", {}));
  StringMatcher prefix = Exact("a", false);
  prefix.type = StringMatcher::Type::kPrefix;
  EXPECT_NE(KeyOf("id", "ca", {Exact("a", false)}), KeyOf("id", "ca", {prefix}));
  EXPECT_NE(KeyOf("id", "ca", {Exact("a", false), Exact("b", false)}),
            KeyOf("id", "ca", {Exact("a", false)}));
  // A fixed context is never taken for an xDS one.
  EXPECT_NE(UpstreamTls::Fixed(nullptr, "localhost")->key(), KeyOf("", "", {}));
}

}  // namespace
}  // namespace uxds
