// Pieces of the XdsClient that need no I/O: A47 resource names, the stream
// backoff, and the parts of the client API that fail before any stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>

#include "test_resource_types.h"
#include "uxds/loop.h"
#include "uxds/xds_client.h"
#include "xds/client/exponential_backoff.h"
#include "xds/client/xds_resource_name.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
using xds_internal::ExponentialBackoff;
using xds_internal::FindInvalidUtf8;
using xds_internal::ParseXdsResourceName;

TEST(XdsResourceNameTest, OldStyleNamesUseTheDefaultAuthority) {
  auto name = ParseXdsResourceName("cluster-1", TestClusterType::Get());
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->authority, "#old");
  EXPECT_EQ(name->key, "cluster-1");
  EXPECT_FALSE(name->is_xdstp());
}

TEST(XdsResourceNameTest, XdstpNamesAreNormalized) {
  // A47: context parameters sorted; the last value of a repeated key wins.
  auto name = ParseXdsResourceName(
      "xdstp://auth.example.com/envoy.config.cluster.v3.Cluster/a/b?z=1&a=2&z=3&flag",
      TestClusterType::Get());
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_EQ(name->authority, "auth.example.com");
  EXPECT_EQ(name->key, "xdstp://auth.example.com/envoy.config.cluster.v3.Cluster/a/b?a=2&flag&z=3");
  EXPECT_TRUE(name->is_xdstp());

  auto no_authority =
      ParseXdsResourceName("xdstp:///envoy.config.cluster.v3.Cluster/c", TestClusterType::Get());
  ASSERT_TRUE(no_authority.ok());
  EXPECT_EQ(no_authority->authority, "");
}

TEST(XdsResourceNameTest, InvalidXdstpNames) {
  for (const char* bad : {
           "xdstp:auth/envoy.config.cluster.v3.Cluster/c",             // no "//"
           "xdstp://auth",                                             // no path
           "xdstp://auth/envoy.config.listener.v3.Listener/c",         // other type
           "xdstp://auth/envoy.config.cluster.v3.Cluster",             // no id
           "xdstp://auth/envoy.config.cluster.v3.Cluster/c#fragment",  // directives
       }) {
    auto name = ParseXdsResourceName(bad, TestClusterType::Get());
    EXPECT_FALSE(name.ok()) << bad;
    if (!name.ok()) {
      EXPECT_EQ(name.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

// Well-formed UTF-8 as Unicode's table 3-7 defines it (what protobuf
// requires of a proto3 string).
TEST(XdsResourceNameTest, Utf8IsCheckedByteByByte) {
  constexpr size_t kValid = std::string_view::npos;
  EXPECT_EQ(FindInvalidUtf8(""), kValid);
  EXPECT_EQ(FindInvalidUtf8("cluster-\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80"), kValid);
  EXPECT_EQ(FindInvalidUtf8("\xf4\x8f\xbf\xbf"), kValid);  // U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("a\xf4\x90\x80\x80"), 1u);     // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("ab\xc0\x80"), 2u);            // overlong NUL
  EXPECT_EQ(FindInvalidUtf8("\xe0\x9f\xbf"), 0u);          // overlong 3 bytes
  EXPECT_EQ(FindInvalidUtf8("\xed\xa0\x80"), 0u);          // a surrogate
  EXPECT_EQ(FindInvalidUtf8("ok\xe2\x82"), 2u);            // cut short
  EXPECT_EQ(FindInvalidUtf8("\xe2\x28\xa1"), 0u);          // bad continuation
  EXPECT_EQ(FindInvalidUtf8("\x80"), 0u);                  // lone continuation
  EXPECT_EQ(FindInvalidUtf8("\xff"), 0u);
  const auto parsed = ParseXdsResourceName("xdstp://a/\xff", TestClusterType::Get());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
}

TEST(ExponentialBackoffTest, GrowsByTheMultiplierUpToTheMaximumWithJitter) {
  ExponentialBackoff backoff({milliseconds(1000), 1.6, 0.2, milliseconds(120'000)});
  double expected = 1000;
  for (int attempt = 0; attempt < 20; ++attempt) {
    const auto delay = backoff.NextDelay().count();
    EXPECT_GE(delay, static_cast<int64_t>(expected * 0.8) - 1) << attempt;
    EXPECT_LE(delay, static_cast<int64_t>(expected * 1.2) + 1) << attempt;
    expected = std::min(expected * 1.6, 120'000.0);
  }
  backoff.Reset();
  const auto after_reset = backoff.NextDelay().count();
  EXPECT_GE(after_reset, 799);
  EXPECT_LE(after_reset, 1201);
}

// Backoffs made one after another (a subchannel per endpoint) must not
// retry in step: each draws its own jitter, spread over the whole range.
TEST(ExponentialBackoffTest, BackoffsMadeTogetherSpreadTheirFirstDelays) {
  int64_t lowest = 1'000'000, highest = 0;
  std::set<int64_t> distinct;
  for (int i = 0; i < 1000; ++i) {
    ExponentialBackoff backoff({milliseconds(1000), 1.6, 0.2, milliseconds(120'000)});
    const int64_t delay = backoff.NextDelay().count();
    lowest = std::min(lowest, delay);
    highest = std::max(highest, delay);
    distinct.insert(delay);
  }
  EXPECT_GE(lowest, 800);
  EXPECT_LE(highest, 1200);
  EXPECT_LT(lowest, 820);
  EXPECT_GT(highest, 1180);
  EXPECT_GT(distinct.size(), 300u);
}

TEST(ExponentialBackoffTest, WithoutJitterTheDelaysAreExact) {
  ExponentialBackoff backoff({milliseconds(100), 2.0, 0.0, milliseconds(500)});
  EXPECT_EQ(backoff.NextDelay(), milliseconds(100));
  EXPECT_EQ(backoff.NextDelay(), milliseconds(200));
  EXPECT_EQ(backoff.NextDelay(), milliseconds(400));
  EXPECT_EQ(backoff.NextDelay(), milliseconds(500));
  EXPECT_EQ(backoff.NextDelay(), milliseconds(500));
}

TEST(XdsClientCreateTest, RejectsInvalidOptionsAndBootstraps) {
  auto loop = Loop::Create();
  ASSERT_TRUE(loop.ok());
  Bootstrap bootstrap;
  bootstrap.node.id = "n";
  // No server at all.
  auto no_server = XdsClient::Create(**loop, bootstrap);
  EXPECT_FALSE(no_server.ok());

  XdsServerConfig server;
  server.server_uri = "127.0.0.1:1";
  bootstrap.xds_servers.push_back(server);
  XdsClientOptions options;
  options.resource_does_not_exist_timeout = milliseconds(0);
  auto bad_timer = XdsClient::Create(**loop, bootstrap, options);
  ASSERT_FALSE(bad_timer.ok());
  EXPECT_EQ(bad_timer.status().code(), StatusCode::kInvalidArgument);

  options = {};
  options.backoff_jitter = 1.5;
  EXPECT_FALSE(XdsClient::Create(**loop, bootstrap, options).ok());
}

TEST(XdsCacheStateTest, NamesAreCsdsEnumNames) {
  EXPECT_EQ(XdsCacheStateName(XdsCacheState::kRequested), "REQUESTED");
  EXPECT_EQ(XdsCacheStateName(XdsCacheState::kReceivedError), "RECEIVED_ERROR");
  EXPECT_EQ(static_cast<int>(XdsCacheState::kTimeout), 6);
}

}  // namespace
}  // namespace uxds::testing
