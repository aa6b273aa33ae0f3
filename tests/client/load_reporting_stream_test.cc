// Load reporting (LRS) streams end to end on loopback: one stream per
// XdsClient and LRS server, shared by its channels.
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

}  // namespace
}  // namespace uxds::testing
