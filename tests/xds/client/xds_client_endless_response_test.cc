// Control planes whose response never ends (ScriptedGrpcServer): one that
// starts a message and never finishes it, and one that repeats a response
// for as long as the client reads. The client stays bounded and
// responsive, its resource timers still run, and it shuts down cleanly in
// the middle of either.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "support/scripted_grpc_server.h"
#include "support/test_support.h"
#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

using XdsClientEndlessResponseTest = XdsClientTest;

// Waits (up to kWait) until `done` holds.
template <typename Done>
bool WaitFor(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// A message declared at the receive limit and sent but for its last byte:
// the client takes all of it (its flow control lets a message up to the
// limit complete) and holds it, but nothing is ever delivered. The resource
// timer still runs (A88: does not exist), the stream stays up (it is not an
// error), and the client shuts down with the message half received.
TEST_F(XdsClientEndlessResponseTest, AMessageThatNeverCompletesLeavesTheResourceTimerToDecide) {
  const uint32_t declared = XdsClientOptions::kDefaultMaxAdsResponseSize;
  auto server = ScriptedGrpcServer::UnfinishedMessage(declared);
  XdsClientOptions options = TestOptions();
  options.resource_does_not_exist_timeout = milliseconds(500);
  StartClient(MakeBootstrap(server->target()), options);
  auto c1 = Watch(TestClusterType::Get(), "c1");
  // Prefix and all but one byte of the body: the client read all of it.
  EXPECT_TRUE(WaitFor([&] { return server->body_bytes_sent() == uint64_t{declared} + 4; }))
      << server->body_bytes_sent() << " of " << declared + 4;
  EXPECT_TRUE(NextIsError(*c1, StatusCode::kNotFound, "does not exist"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kDoesNotExist);
  EXPECT_EQ(server->connections(), 1u);  // no reconnection: the stream is fine
  EXPECT_EQ(server->streams(), 1u);
  EXPECT_TRUE(NoMoreEvents(*c1));
  ShutdownClient();
}

// The same valid response, again and again, as fast as the client reads:
// the first one is delivered, the identical copies notify nobody (and are
// each ACKed), and the client's loop keeps answering other work while the
// flood goes on.
TEST_F(XdsClientEndlessResponseTest, AResponseRepeatedForeverIsDeliveredOnceAndTheLoopStaysFree) {
  envoy::service::discovery::v3::DiscoveryResponse response;
  response.set_version_info("1");
  response.set_type_url(kClusterTypeUrl);
  response.set_nonce("again");
  response.add_resources()->ParseFromString(ClusterAny("c1"));
  const std::string bytes = response.SerializeAsString();
  auto server = ScriptedGrpcServer::EndlessRepeat(bytes);
  StartClient(MakeBootstrap(server->target()));
  auto c1 = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*c1, "c1"));
  // A thousand copies later the client still reads, and its loop still
  // serves snapshots in between.
  const uint64_t copy = bytes.size() + 5;
  EXPECT_TRUE(WaitFor([&] { return server->body_bytes_sent() >= 1000 * copy; }))
      << server->body_bytes_sent() / copy << " copies";
  const uint64_t before = server->body_bytes_sent();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
  }
  EXPECT_TRUE(WaitFor([&] { return server->body_bytes_sent() > before + 100 * copy; }));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*c1));
  EXPECT_EQ(server->connections(), 1u);
  ShutdownClient();  // in the middle of the flood
}

}  // namespace
}  // namespace uxds::testing
