// A control plane that repeats itself costs little (#9): a resource whose
// bytes equal those of the last accepted or last rejected version of its name
// is not decoded again, gets the same ACK or NACK, and notifies no watcher
// again, while the A78 counters still count every update.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "support/test_support.h"
#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

// TestClusterType, counting the resources it decodes.
class DecodeCountingClusterType final : public XdsResourceTypeImpl<TestClusterResource> {
 public:
  std::string_view type_url() const override { return kClusterTypeUrl; }
  bool all_resources_required_in_sotw() const override { return true; }
  DecodeResult Decode(const XdsDecodeContext& context, std::string_view serialized) const override {
    decoded_.fetch_add(1);
    return TestClusterType::Get().Decode(context, serialized);
  }
  std::string ToJson(const TestClusterResource& resource) const override {
    return TestClusterType::Get().ToJson(resource);
  }
  int decoded() const { return decoded_.load(); }

 private:
  mutable std::atomic<int> decoded_{0};  // Decode runs on the client's loop thread
};

constexpr char kClusterTypeName[] = "envoy.config.cluster.v3.Cluster";

class XdsClientResendTest : public XdsClientTest {
 protected:
  DecodeCountingClusterType type_;
};

// #9 item 7: go-control-plane's SotW server answers every NACK at once with
// the same resources. For 2 s the client is in that loop; each watcher hears
// once, and each distinct resource is decoded once.
TEST_F(XdsClientResendTest, AnImmediateResendNackLoopNotifiesEachWatcherOnce) {
  StartClient();
  auto bad_a = Watch(type_, "bad");
  auto bad_b = Watch(type_, "bad");
  auto good = Watch(type_, "good");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"bad", "good"}).has_value());
  const std::string command =
      std::string(R"({"cmd":"set_resources","type_url":")") + kClusterTypeUrl +
      R"(","version_info":"1","answer_nacks":true,"resources":{"bad":{"any_b64":")" +
      Base64Encode(ClusterAny("bad", -5)) + R"("},"good":{"any_b64":")" +
      Base64Encode(ClusterAny("good")) + R"("}}})";
  ASSERT_TRUE(cp_->RawCommand(command).has_value());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_TRUE(cp_->IgnoreRequests(true));

  int nacks = 0;
  for (const ObservedRequest& request : cp_->AllRequests()) {
    if (request.error_detail.has_value()) {
      ++nacks;
      EXPECT_EQ(request.error_detail->message,
                "xDS response validation errors: [resource index 0: bad: errors validating "
                "Cluster resource: [field:connect_timeout error:must be positive]]");
      EXPECT_EQ(request.version_info, "1") << "the valid sibling's version is accepted (A46)";
    }
  }
  EXPECT_GE(nacks, 20) << "the control plane did not keep re-sending";
  Flush();
  EXPECT_TRUE(NextIsError(*bad_a, StatusCode::kInvalidArgument, "must be positive"));
  EXPECT_TRUE(NextIsError(*bad_b, StatusCode::kInvalidArgument, "must be positive"));
  EXPECT_TRUE(NextIsCluster(*good, "good"));
  EXPECT_TRUE(NoMoreEvents(*bad_a));
  EXPECT_TRUE(NoMoreEvents(*bad_b));
  EXPECT_TRUE(NoMoreEvents(*good));
  EXPECT_EQ(type_.decoded(), 2) << "each resource's bytes decoded once";
  // A78 counts every update, re-sent or not: each NACK answered a response
  // counted before the NACK went out.
  const XdsClientMetrics metrics = Metrics();
  EXPECT_GE(metrics.InvalidUpdates(cp_->target(), kClusterTypeName), static_cast<uint64_t>(nacks));
  EXPECT_GE(metrics.ValidUpdates(cp_->target(), kClusterTypeName), static_cast<uint64_t>(nacks));
  EXPECT_EQ(Entry(kClusterTypeUrl, "bad").state, XdsCacheState::kNacked);
  EXPECT_EQ(Entry(kClusterTypeUrl, "good").state, XdsCacheState::kAcked);
}

// The verdict reused is the one those bytes got, whatever the entry's state
// now: the accepted bytes after a rejection clear the error; the rejected
// bytes after that are a new NACK the watcher hears about.
TEST_F(XdsClientResendTest, ResentBytesGetTheVerdictTheyGotBefore) {
  StartClient();
  auto watcher = Watch(type_, "c1");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  auto ack = Respond(kClusterTypeUrl, "1", {ClusterAny("c1", 1000)});
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(NextIsCluster(*watcher, "c1", 1000));
  auto nack = Respond(kClusterTypeUrl, "2", {ClusterAny("c1", -5)});
  ASSERT_TRUE(nack.has_value());
  ASSERT_TRUE(nack->error_detail.has_value());
  EXPECT_TRUE(NextIsAmbient(*watcher, StatusCode::kInvalidArgument, "must be positive"));
  EXPECT_EQ(type_.decoded(), 2);

  // The accepted bytes again: valid without decoding, the error is cleared.
  auto again = Respond(kClusterTypeUrl, "3", {ClusterAny("c1", 1000)});
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->error_detail.has_value());
  EXPECT_EQ(again->version_info, "3");
  EXPECT_TRUE(NextIsAmbient(*watcher, StatusCode::kOk));
  XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.state, XdsCacheState::kAcked);
  EXPECT_EQ(entry.version, "3") << "CSDS shows the update";

  // The rejected bytes again: the same NACK, and the watcher hears of it
  // because the entry had left that error.
  auto renack = Respond(kClusterTypeUrl, "4", {ClusterAny("c1", -5)});
  ASSERT_TRUE(renack.has_value());
  ASSERT_TRUE(renack->error_detail.has_value());
  EXPECT_EQ(renack->error_detail->message, nack->error_detail->message);
  EXPECT_EQ(renack->version_info, "3");
  EXPECT_TRUE(NextIsAmbient(*watcher, StatusCode::kInvalidArgument, "must be positive"));
  entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.state, XdsCacheState::kNacked);
  EXPECT_EQ(entry.failed_version, "4");
  // And once more: nothing new for the watcher.
  ASSERT_TRUE(Respond(kClusterTypeUrl, "5", {ClusterAny("c1", -5)}).has_value());
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").failed_version, "5");
  EXPECT_EQ(type_.decoded(), 2) << "no bytes decoded twice";
}

// Bytes that differ (here: one more field) are decoded as usual, even when
// they name the same resource.
TEST_F(XdsClientResendTest, DifferentBytesAreDecoded) {
  StartClient();
  auto watcher = Watch(type_, "c1");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  ASSERT_TRUE(Respond(kClusterTypeUrl, "1", {ClusterAny("c1", 1000)}).has_value());
  EXPECT_TRUE(NextIsCluster(*watcher, "c1", 1000));
  ASSERT_TRUE(Respond(kClusterTypeUrl, "2", {ClusterAny("c1", 1000, "stats")}).has_value());
  EXPECT_TRUE(NextIsCluster(*watcher, "c1", 1000));
  EXPECT_EQ(type_.decoded(), 2);
}

}  // namespace
}  // namespace uxds::testing
