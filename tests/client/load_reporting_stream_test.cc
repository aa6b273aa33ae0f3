// Load reporting (LRS) streams end to end on loopback: one stream per
// XdsClient and LRS server, shared by its channels; LRS over TLS; and
// LoadStatsResponses a client cannot use as they are.
#include "client/load_reporting_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

size_t LrsStreamsOpened(FakeControlPlane& cp) {
  size_t opened = 0;
  for (const ObservedEvent& e : cp.events()) opened += e.kind == "lrs_stream_opened" ? 1 : 0;
  return opened;
}

// As gRPC's XdsClient has one LrsClient: two channels on one XdsClient
// (same target) share one LRS stream, and their calls to the same cluster
// add up in one ClusterStats. The stream stays while a channel needs it
// and ends after the last one is gone.
TEST_F(LoadReportingTest, ChannelsOfOneXdsClientShareOneStream) {
  SetUpService("c");
  second_channel_ = MakeChannel();
  ASSERT_NE(second_channel_, nullptr);
  const int64_t stream = AcceptLrsStream();
  constexpr int kFirstCalls = 5;
  constexpr int kSecondCalls = 7;
  for (int i = 0; i < kFirstCalls; ++i) ASSERT_TRUE(CallOn(*channel_).ok());
  for (int i = 0; i < kSecondCalls; ++i) ASSERT_TRUE(CallOn(*second_channel_).ok());
  ReadReportsUntil(stream, [&] {
    return localities_["z0"].succeeded + localities_["z1"].succeeded == kFirstCalls + kSecondCalls;
  });
  EXPECT_EQ(localities_["z0"].issued + localities_["z1"].issued, kFirstCalls + kSecondCalls);
  EXPECT_EQ(LrsStreamsOpened(*cp_), 1u);

  // One channel gone: the other one's calls are still reported on the
  // same stream.
  ShutDown(channel_);
  ASSERT_TRUE(CallOn(*second_channel_).ok());
  ReadReportsUntil(stream, [&] {
    return localities_["z0"].succeeded + localities_["z1"].succeeded ==
           kFirstCalls + kSecondCalls + 1;
  });
  EXPECT_EQ(LrsStreamsOpened(*cp_), 1u);

  // Both gone: nothing needs the stream any more.
  ShutDown(second_channel_);
  EXPECT_TRUE(cp_->WaitForLrsStreamClosed(kWait, stream).has_value());
  EXPECT_EQ(LrsStreamsOpened(*cp_), 1u);
}

// The LRS server is the xDS server the Cluster came from (lrs_server:
// self), so it is reached with that server's TLS channel credentials.
class LoadReportingTlsTest : public LoadReportingTest {
 protected:
  void SetUp() override {
    certificates_ = MakeTestCertificates(dir_.path());
    cp_options_.tls_cert_file = certificates_.server_cert;
    cp_options_.tls_key_file = certificates_.server_key;
    credentials_.type = "tls";
    credentials_.ca_certificate_file = certificates_.ca_cert;
    LoadReportingTest::SetUp();
  }

  TempDir dir_;
  TestCertificates certificates_;
};

TEST_F(LoadReportingTlsTest, ReportsOverTls) {
  SetUpService("c");
  const int64_t stream = AcceptLrsStream();
  constexpr int kCalls = 6;
  for (int i = 0; i < kCalls; ++i) ASSERT_TRUE(Call(i % 2 == 0 ? 0 : 13).ok() == (i % 2 == 0));
  ReadReportsUntil(stream, [&] {
    const LocalityTotals z0 = localities_["z0"];
    const LocalityTotals z1 = localities_["z1"];
    return z0.succeeded + z1.succeeded == kCalls / 2 && z0.failed + z1.failed == kCalls / 2;
  });
  EXPECT_EQ(localities_["z0"].issued + localities_["z1"].issued, kCalls);
}

// What the stream does with LoadStatsResponses it cannot use as they are
// (gRPC's LRS client): bytes that are no LoadStatsResponse are ignored and
// the stream stays; an interval under the minimum (a negative one too) is
// raised to it; an absurd one is bounded. The channel's calls go on
// regardless.
class LoadReportingResponseTest : public LoadReportingTest {
 protected:
  // `calls` calls that all succeed, then reports on `stream` until the
  // successes reported add up to expected_succeeded_.
  void CallAndReadReports(int64_t stream, int calls) {
    for (int i = 0; i < calls; ++i) {
      StatusOr<UnaryResponse> reply = Call();
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    }
    expected_succeeded_ += calls;
    ReadReportsUntil(stream, [&] { return succeeded() >= expected_succeeded_; });
  }
  uint64_t succeeded() { return localities_["z0"].succeeded + localities_["z1"].succeeded; }

  uint64_t expected_succeeded_ = 0;
};

TEST_F(LoadReportingResponseTest, MalformedResponseIsIgnoredAndTheStreamStays) {
  SetUpService("c");
  // A field tag cut off in the middle: the bytes do not parse.
  const int64_t stream = AcceptLrsStreamWith(std::string("\x10\x05\xff\xff", 4));
  // No usable response yet, so no report; calls work all the same (and
  // count: the first report covers them).
  ASSERT_TRUE(Call().ok());
  expected_succeeded_ = 1;
  ASSERT_TRUE(cp_->SendLrsResponse(LrsResponse(milliseconds(kReportIntervalMs)), stream));
  CallAndReadReports(stream, 3);
  // Another one mid-stream (a length cut off) changes nothing either.
  ASSERT_TRUE(cp_->SendLrsResponse(std::string("\x12\xff", 2), stream));
  CallAndReadReports(stream, 2);
  EXPECT_EQ(succeeded(), 6u);
  EXPECT_EQ(LrsStreamsOpened(*cp_), 1u);
}

TEST_F(LoadReportingResponseTest, NegativeIntervalIsRaisedToTheMinimum) {
  SetUpService("c");
  LoadStatsResponse response;
  response.set_send_all_clusters(true);
  response.mutable_load_reporting_interval()->set_seconds(-5);
  // The channels' min_report_interval is 50 ms.
  min_interval_ms_ = 50;
  const int64_t stream = AcceptLrsStreamWith(response.SerializeAsString());
  CallAndReadReports(stream, 3);
  EXPECT_EQ(succeeded(), 3u);
  EXPECT_EQ(LrsStreamsOpened(*cp_), 1u);
}

TEST_F(LoadReportingResponseTest, AbsurdIntervalIsBounded) {
  // Reports would otherwise never come in this test's lifetime.
  max_report_interval_ = milliseconds(300);
  SetUpService("c");
  LoadStatsResponse response;
  response.set_send_all_clusters(true);
  response.mutable_load_reporting_interval()->set_seconds(int64_t{1} << 50);
  const int64_t stream = AcceptLrsStreamWith(response.SerializeAsString());
  CallAndReadReports(stream, 3);
  EXPECT_EQ(succeeded(), 3u);
  EXPECT_EQ(LrsStreamsOpened(*cp_), 1u);
}

TEST_F(LoadReportingResponseTest, UnknownClustersGetNoReports) {
  SetUpService("c");
  const int64_t stream = AcceptLrsStream({"no-such-cluster"});
  // Counted, but reported nowhere: the server did not ask for "c".
  ASSERT_TRUE(Call().ok());
  // Several report intervals pass without a report (there is nothing of
  // the clusters asked for to send).
  EXPECT_FALSE(cp_->NextLrsRequest(milliseconds(kReportIntervalMs * 4), stream).has_value());
  // Asked for the channel's cluster, the stream reports it. The client
  // takes the response on its own loop: a call made before then, and
  // taken by a report interval that ends before then, counts for no
  // report (so that "c" starts from when it was asked for). Calls go on
  // until one is reported.
  ASSERT_TRUE(
      cp_->SendLrsResponse(LrsResponse(milliseconds(kReportIntervalMs), {"c", "unknown"}), stream));
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (succeeded() == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no call of c was ever reported";
    ASSERT_TRUE(Call().ok());
    // Three intervals: a report of the call, or its interval went by.
    std::optional<ObservedLrsRequest> report =
        cp_->NextLrsRequest(milliseconds(kReportIntervalMs * 3), stream);
    if (report.has_value()) RecordReport(*report);
    ASSERT_FALSE(HasFatalFailure());
  }
  // The response is applied now: every later call of c is reported.
  expected_succeeded_ = succeeded();
  CallAndReadReports(stream, 2);
  EXPECT_EQ(reported_clusters_, std::set<std::string>{"c"});
  EXPECT_EQ(LrsStreamsOpened(*cp_), 1u);
}

}  // namespace
}  // namespace uxds::testing
