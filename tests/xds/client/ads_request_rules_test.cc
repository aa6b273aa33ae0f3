// AdsRequestRules (tests/support/ads_request_rules.h): each rule passes a
// well-formed request sequence and fails the request that breaks it.
#include "support/ads_request_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace uxds::testing {
namespace {

constexpr char kCds[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr char kLds[] = "type.googleapis.com/envoy.config.listener.v3.Listener";

AdsRequestFacts Request(std::vector<std::string> names, std::string nonce = "",
                        std::string version = "", bool node = false, std::string type_url = kCds) {
  AdsRequestFacts facts;
  facts.type_url = std::move(type_url);
  facts.resource_names = std::move(names);
  facts.response_nonce = std::move(nonce);
  facts.version_info = std::move(version);
  facts.has_node = node;
  return facts;
}

// One violation, containing `what`.
void ExpectOne(const std::vector<std::string>& violations, const std::string& what) {
  ASSERT_EQ(violations.size(), 1u) << (violations.empty() ? "" : violations[0]);
  EXPECT_NE(violations[0].find(what), std::string::npos) << violations[0];
}

TEST(AdsRequestRulesTest, SubscribeAckAndNackPass) {
  AdsRequestRules rules;
  EXPECT_TRUE(rules.Check(1, Request({"c1"}, "", "", true)).empty());
  rules.ResponseSent(1, kCds, "1", "n1");
  EXPECT_TRUE(rules.Check(1, Request({"c1"}, "n1", "1")).empty());
  rules.ResponseSent(1, kCds, "2", "n2");
  // NACK: the previous version, the new nonce.
  EXPECT_TRUE(rules.Check(1, Request({"c1"}, "n2", "1")).empty());
  // Unsubscribing the last name is an empty list, allowed after the first.
  EXPECT_TRUE(rules.Check(1, Request({}, "n2", "1")).empty());
  // A new stream: node again, the version accepted on the old stream kept.
  EXPECT_TRUE(rules.Check(2, Request({"c1"}, "", "1", true)).empty());
}

TEST(AdsRequestRulesTest, FirstRequestOfStreamNeedsNode) {
  AdsRequestRules rules;
  ExpectOne(rules.Check(1, Request({"c1"})), "has no node");
}

TEST(AdsRequestRulesTest, NodeOnlyOnFirstRequest) {
  AdsRequestRules rules;
  EXPECT_TRUE(rules.Check(1, Request({"c1"}, "", "", true)).empty());
  ExpectOne(rules.Check(1, Request({"l1"}, "", "", true, kLds)), "not the first");
}

TEST(AdsRequestRulesTest, FirstRequestOfTypeIsNoWildcard) {
  AdsRequestRules rules;
  EXPECT_TRUE(rules.Check(1, Request({"c1"}, "", "", true)).empty());
  ExpectOne(rules.Check(1, Request({}, "", "", false, kLds)), "wildcard");
}

TEST(AdsRequestRulesTest, NoEmptyName) {
  AdsRequestRules rules;
  ExpectOne(rules.Check(1, Request({"c1", ""}, "", "", true)), "empty resource name");
}

TEST(AdsRequestRulesTest, NoRepeatedName) {
  AdsRequestRules rules;
  ExpectOne(rules.Check(1, Request({"c1", "c2", "c1"}, "", "", true)), "repeated");
}

TEST(AdsRequestRulesTest, NonceMustBeSentForTypeOnStream) {
  AdsRequestRules rules;
  rules.ResponseSent(1, kCds, "1", "n1");
  EXPECT_TRUE(rules.Check(1, Request({"c1"}, "", "", true)).empty());
  ExpectOne(rules.Check(1, Request({"c1"}, "n9")), "response_nonce 'n9'");
  // Another type's nonce, and this type's nonce on another stream.
  ExpectOne(rules.Check(1, Request({"l1"}, "n1", "", false, kLds)), "response_nonce 'n1'");
  EXPECT_TRUE(rules.Check(2, Request({"c1"}, "", "", true)).empty());
  ExpectOne(rules.Check(2, Request({"c1"}, "n1")), "response_nonce 'n1'");
}

TEST(AdsRequestRulesTest, VersionMustBeSentForType) {
  AdsRequestRules rules;
  rules.ResponseSent(1, kCds, "1", "n1");
  EXPECT_TRUE(rules.Check(1, Request({"c1"}, "", "", true)).empty());
  ExpectOne(rules.Check(1, Request({"c1"}, "n1", "7")), "version_info '7'");
  ExpectOne(rules.Check(1, Request({"l1"}, "", "1", false, kLds)), "version_info '1'");
}

}  // namespace
}  // namespace uxds::testing
