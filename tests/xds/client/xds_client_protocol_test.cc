// The ADS protocol as the control plane sees it: the node, resource names,
// version_info, response_nonce and error_detail of each request (NOTES
// "ACK / NACK"), partial NACKs (A46), wrapped resources, responses to
// ignore, subscription changes, reconnection with backoff (A57) and A47
// authorities.
#include <gtest/gtest.h>

#include <future>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "google/protobuf/any.pb.h"
#include "support/test_support.h"
#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class XdsClientProtocolTest : public XdsClientTest {};

TEST_F(XdsClientProtocolTest, NodeGoesOnlyInTheFirstRequestOfAStream) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  auto first = WaitForRequest(kClusterTypeUrl, {"c1"});
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(first->node.has_value());
  EXPECT_EQ(first->node->id, kNodeId);
  EXPECT_EQ(first->node->cluster, "test-cluster");
  EXPECT_EQ(first->node->locality_zone, "test-zone");
  EXPECT_EQ(first->node->user_agent_name, "uxds");
  EXPECT_FALSE(first->node->user_agent_version.empty());
  EXPECT_NE(std::find(first->node->client_features.begin(), first->node->client_features.end(),
                      "xds.config.resource-in-sotw"),
            first->node->client_features.end());
  EXPECT_EQ(first->version_info, "");
  EXPECT_EQ(first->response_nonce, "");
  EXPECT_FALSE(first->error_detail.has_value());

  auto c2 = Watch(TestClusterType::Get(), "c2");
  auto second = WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(second->node.has_value());
  EXPECT_EQ(second->stream, first->stream);

  auto e1 = Watch(TestEndpointsType::Get(), "e1");
  auto endpoints = WaitForRequest(kEndpointsTypeUrl, {"e1"});
  ASSERT_TRUE(endpoints.has_value());
  EXPECT_FALSE(endpoints->node.has_value()) << "one stream multiplexes every type";
  EXPECT_EQ(endpoints->stream, first->stream);
}

TEST_F(XdsClientProtocolTest, AckCarriesVersionAndNonce) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});
  ScriptedResponse response;
  response.type_url = kClusterTypeUrl;
  response.version_info = "v1";
  response.nonce = "nonce-a";
  response.resources = {ClusterAny("c1")};
  ASSERT_EQ(cp_->SendResponse(response), "nonce-a");
  auto ack = WaitForAnswerTo("nonce-a");
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->version_info, "v1");
  EXPECT_EQ(ack->resource_names, std::vector<std::string>{"c1"});
  EXPECT_FALSE(ack->error_detail.has_value());
  EXPECT_TRUE(NextIsCluster(*c1, "c1"));
  // A later subscription change answers the same response again.
  auto c2 = Watch(TestClusterType::Get(), "c2");
  auto change = WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->version_info, "v1");
  EXPECT_EQ(change->response_nonce, "nonce-a");
  // The other type has its own version and nonce.
  auto e1 = Watch(TestEndpointsType::Get(), "e1");
  auto endpoints = WaitForRequest(kEndpointsTypeUrl, {"e1"});
  ASSERT_TRUE(endpoints.has_value());
  EXPECT_EQ(endpoints->version_info, "");
  EXPECT_EQ(endpoints->response_nonce, "");
}

TEST_F(XdsClientProtocolTest, NackKeepsTheAcceptedVersionAndListsEveryError) {
  StartClient();
  auto c1 = WatchAndReceiveCluster("c1", "1");
  auto nack = Respond(kClusterTypeUrl, "2", {ClusterAny("c1", -5)});
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->version_info, "1") << "no valid resource: the old version stays";
  ASSERT_TRUE(nack->error_detail.has_value());
  EXPECT_EQ(nack->error_detail->code, 3);  // INVALID_ARGUMENT
  EXPECT_EQ(nack->error_detail->message,
            "xDS response validation errors: [resource index 0: c1: errors validating Cluster "
            "resource: [field:connect_timeout error:must be positive]]");
  // The error goes with that answer only.
  auto c2 = Watch(TestClusterType::Get(), "c2");
  auto change = WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->version_info, "1");
  EXPECT_EQ(change->response_nonce, nack->response_nonce);
  EXPECT_FALSE(change->error_detail.has_value());
}

// A46: the valid resources of a NACKed response are used, and the request
// carries the new version.
TEST_F(XdsClientProtocolTest, PartialNackUsesTheValidResources) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  auto c2 = Watch(TestClusterType::Get(), "c2");
  WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  auto nack = Respond(kClusterTypeUrl, "7", {ClusterAny("c1", 2000), ClusterAny("c2", -1)});
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->version_info, "7");
  ASSERT_TRUE(nack->error_detail.has_value());
  EXPECT_NE(nack->error_detail->message.find("resource index 1: c2: errors validating Cluster"),
            std::string::npos)
      << nack->error_detail->message;
  EXPECT_EQ(nack->error_detail->message.find("index 0"), std::string::npos);
  EXPECT_TRUE(NextIsCluster(*c1, "c1", 2000));
  EXPECT_TRUE(NextIsError(*c2, StatusCode::kInvalidArgument, "invalid resource"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
  EXPECT_EQ(Entry(kClusterTypeUrl, "c2").state, XdsCacheState::kNacked);
}

// A second copy of a name in one response is an error of its own ("duplicate
// resource name", as gRPC says it): the response is NACKed and the first
// copy's verdict stands, valid or not.
TEST_F(XdsClientProtocolTest, ASecondCopyOfANameIsNackedAndTheFirstStands) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  auto c2 = Watch(TestClusterType::Get(), "c2");
  WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  auto nack = Respond(
      kClusterTypeUrl, "1",
      {ClusterAny("c1", 2000), ClusterAny("c2", -1), ClusterAny("c1", -1), ClusterAny("c2", 3000)});
  ASSERT_TRUE(nack.has_value());
  ASSERT_TRUE(nack->error_detail.has_value());
  const std::string& message = nack->error_detail->message;
  EXPECT_NE(message.find("resource index 2: c1: duplicate resource name"), std::string::npos)
      << message;
  EXPECT_NE(message.find("resource index 3: c2: duplicate resource name"), std::string::npos)
      << message;
  EXPECT_EQ(nack->version_info, "1") << "c1's first copy was valid";
  EXPECT_TRUE(NextIsCluster(*c1, "c1", 2000));
  EXPECT_TRUE(NextIsError(*c2, StatusCode::kInvalidArgument, "connect_timeout"));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*c1));
  EXPECT_TRUE(NoMoreEvents(*c2));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
  EXPECT_EQ(Entry(kClusterTypeUrl, "c2").state, XdsCacheState::kNacked);
}

TEST_F(XdsClientProtocolTest, ResourcesWithoutNameOrOfAnotherTypeAreOnlyNacked) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});
  auto nack = Respond(kClusterTypeUrl, "1",
                      {ResponseResource(kClusterTypeUrl, "\xff\xff garbage"),
                       ResponseResource(EndpointsAny("c1")), ClusterAny("c1")});
  ASSERT_TRUE(nack.has_value());
  ASSERT_TRUE(nack->error_detail.has_value());
  const std::string& message = nack->error_detail->message;
  EXPECT_NE(message.find("resource index 0: Can't parse Cluster resource."), std::string::npos)
      << message;
  EXPECT_NE(
      message.find("resource index 1: incorrect resource type \"" + std::string(kEndpointsTypeUrl) +
                   "\" (should be \"" + kClusterTypeUrl + "\")"),
      std::string::npos)
      << message;
  EXPECT_EQ(nack->version_info, "1") << "c1 was valid";
  EXPECT_TRUE(NextIsCluster(*c1, "c1"));
}

TEST_F(XdsClientProtocolTest, WrappedResourcesAreAccepted) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});
  ScriptedResponse response;
  response.type_url = kClusterTypeUrl;
  response.version_info = "1";
  response.wrap_in_resource = true;
  ResponseResource wrapped(ClusterAny("c1", 3000));
  wrapped.wrapper_name = "c1";
  response.resources = {wrapped};
  const std::string nonce = cp_->SendResponse(response);
  auto ack = WaitForAnswerTo(nonce);
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->error_detail.has_value());
  EXPECT_TRUE(NextIsCluster(*c1, "c1", 3000));
}

// NOTES: a response that cannot be decoded, or of a type never watched, gets
// no ACK and no NACK.
TEST_F(XdsClientProtocolTest, UndecodableAndUnknownTypeResponsesAreIgnored) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});
  ScriptedResponse unknown;
  unknown.type_url = "type.googleapis.com/unknown.Type";
  unknown.version_info = "1";
  unknown.nonce = "unknown-nonce";
  cp_->SendResponse(unknown);
  ASSERT_TRUE(cp_->SendRawMessage("\x0a\xff\xff not a DiscoveryResponse"));
  auto ack = Respond(kClusterTypeUrl, "1", {ClusterAny("c1")});
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(NextIsCluster(*c1, "c1"));
  for (const ObservedRequest& request : cp_->AllRequests()) {
    EXPECT_NE(request.response_nonce, "unknown-nonce");
    EXPECT_NE(request.type_url, "type.googleapis.com/unknown.Type");
  }
}

TEST_F(XdsClientProtocolTest, UnsubscribedNamesAreIgnored) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});
  auto ack = Respond(kClusterTypeUrl, "1", {ClusterAny("c1"), ClusterAny("not-watched")},
                     {{"also-not-watched", 5, "nope"}});
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->error_detail.has_value());
  EXPECT_TRUE(NextIsCluster(*c1, "c1"));
  EXPECT_FALSE(HasEntry(kClusterTypeUrl, "not-watched"));
  EXPECT_FALSE(HasEntry(kClusterTypeUrl, "also-not-watched"));
}

// Several watchers share one subscription; the last one to go unsubscribes
// the name, and the last name of the server closes the stream.
TEST_F(XdsClientProtocolTest, SubscriptionChangesAndTheLastUnsubscriptionClosesTheStream) {
  StartClient();
  auto c1 = Watch(TestClusterType::Get(), "c1");
  auto c1_again = Watch(TestClusterType::Get(), "c1");
  auto c2 = Watch(TestClusterType::Get(), "c2");
  auto request = WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  ASSERT_TRUE(request.has_value());
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1"), ClusterAny("c2")});
  CancelWatch(TestClusterType::Get(), "c1", c1.get());
  CancelWatch(TestClusterType::Get(), "c2", c2.get());
  WaitForRequest(kClusterTypeUrl, {"c1"});
  CancelWatch(TestClusterType::Get(), "c1", c1_again.get());
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait, request->stream).has_value());
  // A new watch opens a new stream that starts with the node, the accepted
  // version and no nonce.
  auto c3 = Watch(TestClusterType::Get(), "c3");
  auto fresh = WaitForRequest(kClusterTypeUrl, {"c3"});
  ASSERT_TRUE(fresh.has_value());
  EXPECT_NE(fresh->stream, request->stream);
  EXPECT_TRUE(fresh->node.has_value());
  EXPECT_EQ(fresh->version_info, "1");
  EXPECT_EQ(fresh->response_nonce, "");
}

// An empty resource_names list as the first request of a type is the
// legacy wildcard (a server answers with every resource of the type), so a
// watch started and cancelled before its request went out sends nothing;
// unsubscribing the last name after a request was sent does send the empty
// list.
TEST_F(XdsClientProtocolTest, NoWildcardRequestForAWatchCancelledBeforeItsRequest) {
  StartClient();
  auto c1 = WatchAndReceiveCluster("c1");
  // One loop turn: the endpoints request is queued but not yet written.
  auto e1 = std::make_shared<EndpointsWatcher>();
  loop_->RunSync([&] {
    client_->WatchResource(TestEndpointsType::Get(), "e1", e1);
    client_->CancelWatch(TestEndpointsType::Get(), "e1", e1.get());
  });
  // A later request on the stream: whatever was queued before it is written.
  auto c2 = Watch(TestClusterType::Get(), "c2");
  WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  for (const ObservedRequest& request : cp_->AllRequests()) {
    EXPECT_NE(request.type_url, kEndpointsTypeUrl)
        << "names: " << ::testing::PrintToString(request.resource_names);
  }
  EXPECT_EQ(cp_->TakeViolations(), std::vector<std::string>{});

  // Once a request of the type was sent, the last unsubscription is the
  // empty list.
  auto e2 = Watch(TestEndpointsType::Get(), "e2");
  WaitForRequest(kEndpointsTypeUrl, {"e2"});
  CancelWatch(TestEndpointsType::Get(), "e2", e2.get());
  WaitForRequest(kEndpointsTypeUrl, {});
}

// NOTES: the accepted version survives a stream restart; the nonce does not;
// every subscription is sent again.
TEST_F(XdsClientProtocolTest, ANewStreamResendsSubscriptionsWithTheAcceptedVersion) {
  StartClient();
  auto c1 = WatchAndReceiveCluster("c1", "42");
  auto e1 = Watch(TestEndpointsType::Get(), "e1");
  auto old_request = WaitForRequest(kEndpointsTypeUrl, {"e1"});
  ASSERT_TRUE(old_request.has_value());
  ASSERT_TRUE(cp_->CloseStream(0, "rebalancing"));
  auto clusters = cp_->NextRequestMatching(kWait, [&](const ObservedRequest& r) {
    return r.stream != old_request->stream && r.type_url == kClusterTypeUrl;
  });
  ASSERT_TRUE(clusters.has_value());
  EXPECT_EQ(clusters->version_info, "42");
  EXPECT_EQ(clusters->response_nonce, "");
  EXPECT_EQ(clusters->resource_names, std::vector<std::string>{"c1"});
  auto endpoints = WaitForRequest(kEndpointsTypeUrl, {"e1"});
  ASSERT_TRUE(endpoints.has_value());
  EXPECT_EQ(endpoints->stream, clusters->stream);
  EXPECT_EQ(endpoints->version_info, "");
  // Exactly one of the new stream's requests carries the node: the first.
  EXPECT_NE(clusters->node.has_value(), endpoints->node.has_value());
  Flush();
  EXPECT_TRUE(NoMoreEvents(*c1)) << "a stream that had a response ends silently";
}

// A57: failed stream attempts back off exponentially (here from 100 ms, x3,
// no jitter); a stream that saw a response resets the backoff.
TEST_F(XdsClientProtocolTest, StreamRetriesBackOffExponentiallyAndResetAfterAResponse) {
  XdsClientOptions options = TestOptions();
  options.backoff_initial = milliseconds(100);
  options.backoff_multiplier = 3;
  options.backoff_jitter = 0;
  options.backoff_max = milliseconds(60'000);
  StartClient(BootstrapFeatures{}, options);
  auto c1 = Watch(TestClusterType::Get(), "c1");
  const std::vector<milliseconds> expected_delays = {milliseconds(100), milliseconds(300),
                                                     milliseconds(900)};
  auto stream = cp_->WaitForStreamOpened(kWait);
  ASSERT_TRUE(stream.has_value());
  for (milliseconds delay : expected_delays) {
    WaitForRequest(kClusterTypeUrl, {"c1"});
    const auto closed_at = Clock::now();
    ASSERT_TRUE(cp_->CloseStream(14, "no"));
    stream = cp_->WaitForStreamOpened(kWait);
    ASSERT_TRUE(stream.has_value());
    // A lower bound only: the retry cannot come before its delay.
    EXPECT_GE(Clock::now() - closed_at, delay - milliseconds(5));
  }
  // This stream gets a response before it ends: the next attempt waits the
  // initial 100 ms again, not 2.7 s (then 8.1 s).
  WaitForRequest(kClusterTypeUrl, {"c1"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1")});
  ASSERT_TRUE(cp_->CloseStream(14, "after a response"));
  EXPECT_TRUE(cp_->WaitForStreamOpened(std::chrono::seconds(2)).has_value())
      << "backoff was not reset by the response";
}

// A response over the receive limit (4 MiB by default, as gRPC) ends the
// stream, and although the stream had responses the backoff is not reset:
// a server that keeps sending it must not get a reconnection every initial
// delay. Lower bounds on the delays only.
TEST_F(XdsClientProtocolTest, AnOversizedResponseEndsTheStreamWithoutResettingBackoff) {
  XdsClientOptions options = TestOptions();
  options.backoff_initial = milliseconds(100);
  options.backoff_multiplier = 3;
  options.backoff_jitter = 0;
  options.backoff_max = milliseconds(60'000);
  StartClient(BootstrapFeatures{}, options);
  auto c1 = Watch(TestClusterType::Get(), "c1");
  const std::string oversized(XdsClientOptions::kDefaultMaxAdsResponseSize + 1, 'x');
  ASSERT_TRUE(cp_->WaitForStreamOpened(kWait).has_value());
  for (milliseconds delay : {milliseconds(100), milliseconds(300), milliseconds(900)}) {
    auto request = WaitForRequest(kClusterTypeUrl, {"c1"});
    ASSERT_TRUE(request.has_value());
    Respond(kClusterTypeUrl, "1", {ClusterAny("c1")});
    const auto sent_at = Clock::now();
    ASSERT_TRUE(cp_->SendRawMessage(oversized, request->stream));
    ASSERT_TRUE(cp_->WaitForStreamClosed(kWait, request->stream).has_value());
    ASSERT_TRUE(cp_->WaitForStreamOpened(kWait).has_value());
    EXPECT_GE(Clock::now() - sent_at, delay - milliseconds(5));
  }
  EXPECT_TRUE(NextIsCluster(*c1, "c1"));
  EXPECT_TRUE(Entry(kClusterTypeUrl, "c1").has_resource);
}

// XdsClientOptions::max_ads_response_size bounds every ADS response.
TEST_F(XdsClientProtocolTest, TheReceiveLimitIsAnOption) {
  XdsClientOptions options = TestOptions();
  options.max_ads_response_size = 4096;
  StartClient(BootstrapFeatures{}, options);
  auto c1 = Watch(TestClusterType::Get(), "c1");
  auto request = WaitForRequest(kClusterTypeUrl, {"c1"});
  ASSERT_TRUE(request.has_value());
  ASSERT_TRUE(cp_->SendRawMessage(std::string(4097, 'x'), request->stream));
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait, request->stream).has_value());
  EXPECT_TRUE(NextIsError(*c1, StatusCode::kUnavailable,
                          "xDS call failed with no responses received; status: "
                          "RESOURCE_EXHAUSTED: received message larger than max"));
  // Up to the limit is fine.
  auto again = WaitForRequest(kClusterTypeUrl, {"c1"});
  ASSERT_TRUE(again.has_value());
  ScriptedResponse response;
  response.stream = again->stream;
  response.type_url = kClusterTypeUrl;
  response.version_info = "1";
  response.resources = {ClusterAny("c1")};
  WaitForAnswerTo(cp_->SendResponse(response));
  EXPECT_TRUE(NextIsCluster(*c1, "c1"));
}

// A connection that stays open but carries nothing more (a hung control
// plane, a path that silently drops everything) is found by keepalive PINGs
// and closed: the stream ends (A57) and, the server being unreachable, the
// watchers get the channel's error as an ambient error. Times shortened.
TEST_F(XdsClientProtocolTest, KeepaliveEndsAStreamOnAConnectionThatNoLongerAnswers) {
  XdsClientOptions options = TestOptions();
  options.keepalive_time = milliseconds(200);
  options.keepalive_timeout = milliseconds(200);
  StartClient(BootstrapFeatures{}, options);
  auto c1 = WatchAndReceiveCluster("c1");
  const std::vector<int64_t> streams = cp_->OpenStreams();
  ASSERT_EQ(streams.size(), 1u);
  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(cp_->FreezeConnections());
  EXPECT_TRUE(NextIsAmbient(*c1, StatusCode::kUnavailable,
                            "xDS channel for server " + cp_->target() + ": connection failed: "));
  EXPECT_TRUE(Entry(kClusterTypeUrl, "c1").has_resource);
  // Reachable again: a new stream, and the error is cleared.
  ASSERT_TRUE(cp_->RestartListening());
  auto resent = WaitForRequest(kClusterTypeUrl, {"c1"});
  ASSERT_TRUE(resent.has_value());
  EXPECT_NE(resent->stream, streams.front());
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1")});
  for (;;) {
    auto event = c1->Next();
    ASSERT_TRUE(event.has_value());
    ASSERT_EQ(event->kind, ClusterWatcher::Event::Kind::kAmbient) << event->ToString();
    if (event->status.ok()) break;
  }
}

// A47: an xdstp:// name is fetched from its authority's servers (or the
// top-level ones when it lists none), any other name from the top-level
// servers; a response from one server does not touch another's resources.
TEST_F(XdsClientProtocolTest, AuthoritiesRouteNamesToTheirServers) {
  auto other_cp = FakeControlPlane::Start();
  ASSERT_NE(other_cp, nullptr);
  Bootstrap bootstrap = MakeBootstrap(cp_->target());
  XdsAuthority own_servers;
  XdsServerConfig other_server;
  other_server.server_uri = other_cp->target();
  own_servers.xds_servers.push_back(other_server);
  bootstrap.authorities["a1.example.com"] = own_servers;
  bootstrap.authorities["a2.example.com"] = XdsAuthority{};
  StartClient(bootstrap);

  const std::string x = "xdstp://a1.example.com/envoy.config.cluster.v3.Cluster/x";
  const std::string y = "xdstp://a2.example.com/envoy.config.cluster.v3.Cluster/y?b=2&a=1";
  const std::string y_normalized =
      "xdstp://a2.example.com/envoy.config.cluster.v3.Cluster/y?a=1&b=2";
  auto wx = Watch(TestClusterType::Get(), x);
  auto wy = Watch(TestClusterType::Get(), y);
  auto wc = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(*other_cp, kClusterTypeUrl, {x});
  WaitForRequest(kClusterTypeUrl, {y_normalized, "c1"});

  // The other server sends c1 too: not subscribed there, ignored.
  ScriptedResponse from_other;
  from_other.type_url = kClusterTypeUrl;
  from_other.version_info = "o1";
  from_other.resources = {ClusterAny(x), ClusterAny("c1", 7000)};
  WaitForAnswerTo(*other_cp, other_cp->SendResponse(from_other));
  EXPECT_TRUE(NextIsCluster(*wx, x));
  Respond(kClusterTypeUrl, "1", {ClusterAny(y_normalized), ClusterAny("c1", 1000)});
  EXPECT_TRUE(NextIsCluster(*wy, y_normalized));
  EXPECT_TRUE(NextIsCluster(*wc, "c1", 1000));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*wc));
  EXPECT_EQ(Entry(kClusterTypeUrl, x).authority, "a1.example.com");
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").authority, "#old");

  auto unknown = Watch(TestClusterType::Get(),
                       "xdstp://nowhere.example.com/envoy.config.cluster.v3.Cluster/z");
  EXPECT_TRUE(NextIsError(*unknown, StatusCode::kFailedPrecondition,
                          "authority \"nowhere.example.com\" not present in bootstrap config"));
  auto invalid =
      Watch(TestClusterType::Get(), "xdstp://a1.example.com/envoy.config.listener.v3.Listener/z");
  auto event = invalid->Next();
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(event->status.code(), StatusCode::kInvalidArgument) << event->ToString();
}

// A watcher whose callback blocks the control loop until the test thread
// says whether the control plane has received the ACK by then (only the test
// thread touches the control plane).
class AckCheckingWatcher final : public XdsResourceWatcher<TestClusterResource> {
 public:
  void OnResourceChanged(StatusOr<std::shared_ptr<const TestClusterResource>>) override {
    if (std::exchange(called_, true)) return;
    callback_started_.set_value();
    // The control loop stays blocked here: whatever is not on the wire yet
    // stays unwritten until the test thread answers.
    answered_.get_future().wait_for(std::chrono::seconds(10));
  }
  void OnAmbientError(Status) override {}
  std::future<void> CallbackStarted() { return callback_started_.get_future(); }
  void Answer() { answered_.set_value(); }

 private:
  bool called_ = false;
  std::promise<void> callback_started_;
  std::promise<void> answered_;
};

// The ACK of a response goes out before any callback about it runs: slow
// callbacks (or `uxds watch --for` ending meanwhile) must not hold back the
// verdict the control plane waits for.
TEST_F(XdsClientProtocolTest, TheAckIsOnTheWireBeforeAnyCallbackRuns) {
  StartClient();
  auto watcher = std::make_shared<AckCheckingWatcher>();
  std::future<void> started = watcher->CallbackStarted();
  loop_->RunSync([&] { client_->WatchResource(TestClusterType::Get(), "c1", watcher); });
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  ScriptedResponse response;
  response.type_url = kClusterTypeUrl;
  response.version_info = "1";
  response.nonce = "ack-first";
  response.resources = {ClusterAny("c1", 1000)};
  ASSERT_EQ(cp_->SendResponse(response), "ack-first");
  ASSERT_EQ(started.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  // The callback is running and holds the loop: the ACK is already out, or
  // it never comes while we wait.
  const bool acked = cp_->NextRequestMatching(std::chrono::seconds(5),
                                              [](const ObservedRequest& request) {
                                                return request.response_nonce == "ack-first";
                                              })
                         .has_value();
  watcher->Answer();
  EXPECT_TRUE(acked);
}

// Counts the resources it is given (on the client's loop thread).
class CountingWatcher final : public XdsResourceWatcher<TestClusterResource> {
 public:
  explicit CountingWatcher(std::atomic<int>& count) : count_(count) {}
  void OnResourceChanged(StatusOr<std::shared_ptr<const TestClusterResource>> r) override {
    if (r.ok()) count_.fetch_add(1);
  }
  void OnAmbientError(Status) override {}

 private:
  std::atomic<int>& count_;
};

// A large response is applied, and its watchers told, in slices with the
// loop free in between: a task on the client's loop that only yields sees
// the response half applied (the first Cluster ACKED, the last still
// REQUESTED) and its watchers half told. Done in one piece, the loop would
// run nothing else from the response's first byte to its last callback,
// and a timer or an ACK due meanwhile would wait as long.
TEST_F(XdsClientProtocolTest, ALargeResponseIsAppliedAndDeliveredInSlices) {
  StartClient();
  constexpr int kClusters = 3000;
  std::atomic<int> told{0};
  std::vector<std::shared_ptr<CountingWatcher>> watchers;
  std::vector<std::string> names;
  std::vector<ResponseResource> resources;
  for (int i = 0; i < kClusters; ++i) names.push_back("c" + std::to_string(i));
  loop_->RunSync([&] {
    for (const std::string& name : names) {
      watchers.push_back(std::make_shared<CountingWatcher>(told));
      client_->WatchResource(TestClusterType::Get(), name, watchers.back());
    }
  });
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, names).has_value());
  for (const std::string& name : names) resources.push_back(ClusterAny(name, 1000));
  std::atomic<bool> saw_half_applied{false};
  std::atomic<bool> saw_half_told{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> probe_finished{false};
  auto probe = [&]() -> Task<void> {
    auto acked = [&](const std::string& name) {
      auto entry = client_->Lookup(TestClusterType::Get(), name);
      return entry.has_value() && entry->state == XdsCacheState::kAcked;
    };
    while (!stop.load()) {
      if (acked(names.front()) && !acked(names.back())) saw_half_applied = true;
      const int n = told.load();
      if (n > 0 && n < kClusters) saw_half_told = true;
      co_await loop_->loop().Yield();
    }
    probe_finished = true;
  };
  loop_->RunSync([&] { loop_->loop().Spawn(probe()); });
  Respond(kClusterTypeUrl, "1", std::move(resources));
  const auto deadline = Clock::now() + kWait;
  while (told.load() < kClusters && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(told.load(), kClusters);
  stop = true;
  while (!probe_finished.load()) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(saw_half_applied) << "the response was applied in one piece";
  EXPECT_TRUE(saw_half_told) << "the watchers were told in one piece";
}

// A host name in server_uri is resolved off the control loop; one that does
// not resolve is a connectivity failure like a refused connection.
TEST_F(XdsClientProtocolTest, HostNamesInServerUriAreResolved) {
  const std::string port = cp_->target().substr(cp_->target().rfind(':') + 1);
  StartClient(MakeBootstrap("localhost:" + port));
  auto watcher = Watch(TestClusterType::Get(), "c1");
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1", 1000)});
  EXPECT_TRUE(NextIsCluster(*watcher, "c1", 1000));
}

TEST_F(XdsClientProtocolTest, ANameThatDoesNotResolveIsAConnectivityFailure) {
  StartClient(MakeBootstrap("xds.example.invalid:443"));
  auto watcher = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(
      NextIsError(*watcher, StatusCode::kUnavailable, "cannot resolve xds.example.invalid:443"));
}

TEST_F(XdsClientProtocolTest, TlsChannelCredentials) {
  TempDir dir;
  TestCertificates certificates = MakeTestCertificates(dir.path());
  FakeControlPlaneOptions tls_options;
  tls_options.tls_cert_file = certificates.server_cert;
  tls_options.tls_key_file = certificates.server_key;
  auto tls_cp = FakeControlPlane::Start(tls_options);
  ASSERT_NE(tls_cp, nullptr);
  Bootstrap bootstrap = MakeBootstrap(tls_cp->target());
  bootstrap.xds_servers[0].channel_credentials.type = "tls";
  bootstrap.xds_servers[0].channel_credentials.ca_certificate_file = certificates.ca_cert;
  StartClient(bootstrap);
  auto c1 = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(*tls_cp, kClusterTypeUrl, {"c1"});
  ScriptedResponse response;
  response.type_url = kClusterTypeUrl;
  response.version_info = "1";
  response.resources = {ClusterAny("c1")};
  WaitForAnswerTo(*tls_cp, tls_cp->SendResponse(response));
  EXPECT_TRUE(NextIsCluster(*c1, "c1"));
}

// A65: "tls" credentials re-read their files; the next connection uses
// what was read. The client starts with roots that do not sign the control
// plane's certificate and an identity the control plane does not trust, so
// every handshake fails; once both files are replaced, it connects.
TEST_F(XdsClientProtocolTest, TlsCredentialFilesAreReadAgainForTheNextConnection) {
  TempDir dir;
  TestCertificates certificates = MakeTestCertificates(dir.path());
  FakeControlPlaneOptions tls_options;
  tls_options.tls_cert_file = certificates.server_cert;
  tls_options.tls_key_file = certificates.server_key;
  tls_options.client_ca_file = certificates.ca_cert;
  auto tls_cp = FakeControlPlane::Start(tls_options);
  ASSERT_NE(tls_cp, nullptr);

  TempDir credentials_dir;
  const std::string ca = credentials_dir.File("ca.pem");
  const std::string cert = credentials_dir.File("cert.pem");
  const std::string key = credentials_dir.File("key.pem");
  WriteFile(ca, ReadFile(certificates.other_ca_cert));
  WriteFile(cert, ReadFile(certificates.other_ca_cert));  // self-signed, not the CA's
  WriteFile(key, ReadFile(dir.File("uxds-other-ca.key")));
  Bootstrap bootstrap = MakeBootstrap(tls_cp->target());
  XdsChannelCredentials& credentials = bootstrap.xds_servers[0].channel_credentials;
  credentials.type = "tls";
  credentials.ca_certificate_file = ca;
  credentials.certificate_file = cert;
  credentials.private_key_file = key;
  StartClient(bootstrap);
  auto c1 = Watch(TestClusterType::Get(), "c1");
  // The CA as a client identity: BoringSSL refuses it (its key usage is
  // certificate signing only), so no connection is even tried.
  ASSERT_TRUE(NextIsError(*c1, StatusCode::kUnavailable, "KEY_USAGE_BIT_INCORRECT"));

  // Replaced as deployment tools do: written beside, renamed over.
  auto replace = [](const std::string& path, const std::string& contents) {
    WriteFile(path + ".new", contents);
    ASSERT_EQ(rename((path + ".new").c_str(), path.c_str()), 0);
  };
  replace(ca, ReadFile(certificates.ca_cert));
  replace(cert, ReadFile(certificates.client_cert));
  replace(key, ReadFile(certificates.client_key));
  ASSERT_TRUE(WaitForRequest(*tls_cp, kClusterTypeUrl, {"c1"}).has_value());
  ScriptedResponse response;
  response.type_url = kClusterTypeUrl;
  response.version_info = "1";
  response.resources = {ClusterAny("c1")};
  WaitForAnswerTo(*tls_cp, tls_cp->SendResponse(response));
  // The failed attempts before the files changed each reported an error.
  while (true) {
    auto event = c1->Next();
    ASSERT_TRUE(event.has_value());
    using Kind = std::remove_reference_t<decltype(*event)>::Kind;
    if (event->kind == Kind::kError) continue;
    ASSERT_EQ(event->kind, Kind::kResource);
    break;
  }
}

}  // namespace
}  // namespace uxds::testing
