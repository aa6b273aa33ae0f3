// Streaming calls through the Channel (client-, server- and bidirectional
// streaming) end to end on loopback: routed (A28), hashed (A42) and picked
// exactly as unary calls, one pick per call, against uxds TestService
// backends and a grpcio 1.51 server.
#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "channel_fixture.h"
#include "grpc/testing/messages.pb.h"
#include "support/test_support.h"
#include "test_service/test_service.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using ChannelStreamingTest = ChannelFixture;

std::string OutputRequest(const std::vector<int>& response_sizes) {
  grpc::testing::StreamingOutputCallRequest request;
  for (int size : response_sizes) request.add_response_parameters()->set_size(size);
  return request.SerializeAsString();
}

std::string InputRequest(int payload_size) {
  grpc::testing::StreamingInputCallRequest request;
  request.mutable_payload()->set_body(std::string(static_cast<size_t>(payload_size), 'x'));
  return request.SerializeAsString();
}

// What a server-streaming call saw: its peer, the sizes of the responses
// and the final status.
struct StreamOutcome {
  Status status;
  std::string peer;
  std::vector<size_t> response_sizes;
};

// Starts a stream; null with outcome->status set when that fails.
Task<std::unique_ptr<ClientStream>> Open(Channel& channel, const char* method, CallOptions options,
                                         StreamOutcome* outcome) {
  StatusOr<std::unique_ptr<ClientStream>> stream = co_await channel.StartStream(method, options);
  if (!stream.ok()) {
    outcome->status = stream.status();
    co_return nullptr;
  }
  outcome->peer = (*stream)->peer();
  co_return *std::move(stream);
}

// Server streaming: one request, responses of the given sizes.
Task<StreamOutcome> ServerStream(Channel& channel, std::vector<int> sizes, CallOptions options) {
  StreamOutcome outcome;
  std::unique_ptr<ClientStream> stream =
      co_await Open(channel, test_service::kStreamingOutputCall, options, &outcome);
  if (stream == nullptr) co_return outcome;
  const std::string request = OutputRequest(sizes);
  const Status written = co_await stream->Write(request);
  if (!written.ok()) {
    outcome.status = written;
    co_return outcome;
  }
  const Status done = co_await stream->WritesDone();
  if (!done.ok()) {
    outcome.status = done;
    co_return outcome;
  }
  while (std::optional<std::string> bytes = co_await stream->Read()) {
    grpc::testing::StreamingOutputCallResponse response;
    if (!response.ParseFromString(*bytes)) break;
    outcome.response_sizes.push_back(response.payload().body().size());
  }
  outcome.status = co_await stream->Finish();
  co_return outcome;
}

// Bidirectional: `rounds` requests, each answered before the next is sent.
Task<StreamOutcome> PingPong(Channel& channel, int rounds, CallOptions options) {
  StreamOutcome outcome;
  std::unique_ptr<ClientStream> stream =
      co_await Open(channel, test_service::kFullDuplexCall, options, &outcome);
  if (stream == nullptr) co_return outcome;
  for (int round = 0; round < rounds; ++round) {
    // Named, not a temporary: g++ 12 miscompiles a braced list inside a
    // co_await expression (docs/developing.md).
    const std::vector<int> sizes = {round + 1};
    const std::string request = OutputRequest(sizes);
    const Status written = co_await stream->Write(request);
    if (!written.ok()) break;
    std::optional<std::string> bytes = co_await stream->Read();
    if (!bytes.has_value()) break;
    grpc::testing::StreamingOutputCallResponse response;
    if (!response.ParseFromString(*bytes)) break;
    outcome.response_sizes.push_back(response.payload().body().size());
  }
  const Status done = co_await stream->WritesDone();
  outcome.status = co_await stream->Finish();
  if (outcome.status.ok() && !done.ok()) outcome.status = done;
  co_return outcome;
}

void ServeOneCluster(FakeControlPlane& cp, const std::vector<std::string>& addresses,
                     bool ring_hash = false) {
  ASSERT_TRUE(cp.SetResources(
      kLdsType,
      {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "main", ring_hash ? "x-user" : ""}})}},
      "1"));
  ASSERT_TRUE(cp.SetResources(
      kCdsType,
      {{"main", ring_hash ? RingHashCluster("main", "s-main") : ValidCluster("main", "s-main")}},
      "1"));
  ASSERT_TRUE(cp.SetResources(kEdsType, {{"s-main", EndpointsAt("s-main", addresses)}}, "1"));
}

CallOptions WaitingOptions() {
  CallOptions options;
  options.timeout = seconds(10);
  options.wait_for_ready = true;
  return options;
}

TEST_F(ChannelStreamingTest, ServerStreamingCallReceivesEveryResponse) {
  ServeOneCluster(*cp_, {addresses_[0]});
  CreateChannel("xds:///svc");
  StreamOutcome outcome = RunOnControl<StreamOutcome>([&] {
    return ServerStream(*channel_, {1, 10, 100, 1000, 100000}, WaitingOptions());
  });
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.ToString();
  EXPECT_EQ(outcome.peer, addresses_[0]);
  EXPECT_EQ(outcome.response_sizes, (std::vector<size_t>{1, 10, 100, 1000, 100000}));
}

TEST_F(ChannelStreamingTest, ClientStreamingCallSendsEveryRequest) {
  ServeOneCluster(*cp_, {addresses_[1]});
  CreateChannel("xds:///svc");
  auto aggregated = RunOnControl<StatusOr<int>>([&]() -> Task<StatusOr<int>> {
    StatusOr<std::unique_ptr<ClientStream>> stream =
        co_await channel_->StartStream(test_service::kStreamingInputCall, WaitingOptions());
    if (!stream.ok()) co_return stream.status();
    const std::vector<int> sizes = {27182, 8, 1828, 45904};
    for (int size : sizes) {
      const std::string request = InputRequest(size);
      const Status written = co_await (*stream)->Write(request);
      if (!written.ok()) co_return written;
    }
    const Status done = co_await (*stream)->WritesDone();
    if (!done.ok()) co_return done;
    std::optional<std::string> bytes = co_await (*stream)->Read();
    const Status status = co_await (*stream)->Finish();
    if (!status.ok()) co_return status;
    grpc::testing::StreamingInputCallResponse response;
    if (!bytes.has_value() || !response.ParseFromString(*bytes)) {
      co_return InternalError("no StreamingInputCallResponse");
    }
    co_return response.aggregated_payload_size();
  });
  ASSERT_TRUE(aggregated.ok()) << aggregated.status().ToString();
  EXPECT_EQ(*aggregated, 27182 + 8 + 1828 + 45904);
}

TEST_F(ChannelStreamingTest, BidiStreamingCallAnswersEachRequestInTurn) {
  ServeOneCluster(*cp_, {addresses_[2]});
  CreateChannel("xds:///svc");
  StreamOutcome outcome =
      RunOnControl<StreamOutcome>([&] { return PingPong(*channel_, 5, WaitingOptions()); });
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.ToString();
  EXPECT_EQ(outcome.peer, addresses_[2]);
  EXPECT_EQ(outcome.response_sizes, (std::vector<size_t>{1, 2, 3, 4, 5}));
}

// A28: a stream is routed by its method like a unary call.
TEST_F(ChannelStreamingTest, StreamsAreRoutedByPath) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType,
      {{"svc", ApiListenerWithRoutes("svc", "*",
                                     {{test_service::kFullDuplexCall, "duplex"}, {"", "main"}})}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType,
      {{"duplex", ValidCluster("duplex", "s-duplex")}, {"main", ValidCluster("main", "s-main")}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-duplex", EndpointsAt("s-duplex", {addresses_[1]})},
                                 {"s-main", EndpointsAt("s-main", {addresses_[0]})}},
                                "1"));
  CreateChannel("xds:///svc");
  for (int i = 0; i < 3; ++i) {
    StreamOutcome duplex =
        RunOnControl<StreamOutcome>([&] { return PingPong(*channel_, 1, WaitingOptions()); });
    ASSERT_TRUE(duplex.status.ok()) << duplex.status.ToString();
    EXPECT_EQ(duplex.peer, addresses_[1]);
    StreamOutcome output =
        RunOnControl<StreamOutcome>([&] { return ServerStream(*channel_, {5}, WaitingOptions()); });
    ASSERT_TRUE(output.status.ok()) << output.status.ToString();
    EXPECT_EQ(output.peer, addresses_[0]);
  }
}

// A42: a stream's header hash keeps it on one ring_hash backend, like a
// unary call with the same header; different values spread.
TEST_F(ChannelStreamingTest, RingHashKeepsAStreamsHeaderValueOnOneBackend) {
  ServeOneCluster(*cp_, addresses_, /*ring_hash=*/true);
  CreateChannel("xds:///svc");
  std::set<std::string> used;
  for (int user = 0; user < 12; ++user) {
    CallOptions options = WaitingOptions();
    options.metadata = {{"x-user", "user-" + std::to_string(user)}};
    StreamOutcome first =
        RunOnControl<StreamOutcome>([&] { return PingPong(*channel_, 1, options); });
    ASSERT_TRUE(first.status.ok()) << first.status.ToString();
    StreamOutcome again =
        RunOnControl<StreamOutcome>([&] { return ServerStream(*channel_, {1}, options); });
    ASSERT_TRUE(again.status.ok()) << again.status.ToString();
    StatusOr<UnaryResponse> unary = Call(test_service::kEmptyCall, options);
    ASSERT_TRUE(unary.ok()) << unary.status().ToString();
    EXPECT_EQ(again.peer, first.peer) << "user-" << user;
    EXPECT_EQ(unary->peer, first.peer) << "user-" << user;
    used.insert(first.peer);
  }
  EXPECT_GE(used.size(), 2u);
}

// gRPC queues a pick while there is no config: a stream started before the
// control plane has answered waits (within its deadline) and then runs.
TEST_F(ChannelStreamingTest, AStreamStartedBeforeTheConfigWaitsForIt) {
  CreateChannel("xds:///svc");
  std::promise<StreamOutcome> result;
  control_->RunSync([&] {
    auto run = [](Channel* channel, std::promise<StreamOutcome>* out) -> Task<void> {
      CallOptions options;
      options.timeout = seconds(20);
      out->set_value(co_await PingPong(*channel, 2, options));
    };
    control_->loop().Spawn(run(channel_.get(), &result));
  });
  std::future<StreamOutcome> outcome = result.get_future();
  // The pick is queued: nothing can answer it before the resources exist.
  EXPECT_EQ(outcome.wait_for(milliseconds(300)), std::future_status::timeout);
  ServeOneCluster(*cp_, {addresses_[0]});
  StreamOutcome done = outcome.get();
  ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(done.peer, addresses_[0]);
  EXPECT_EQ(done.response_sizes, (std::vector<size_t>{1, 2}));
}

// A88: with no endpoint to go to, a stream fails UNAVAILABLE at once and
// its message carries the resolution note (the node ID, when there is no
// ambient error); with wait_for_ready it waits and ends at its deadline.
// uxds never fails a call with NOT_FOUND or INVALID_ARGUMENT of its own.
TEST_F(ChannelStreamingTest, NoEndpointFailsUnavailableWithTheResolutionNote) {
  ServeOneCluster(*cp_, {});
  CreateChannel("xds:///svc");
  // The first config may not have reached the channel: wait for it, not
  // for an endpoint (there is none).
  StreamOutcome failed;
  for (int i = 0; i < 200; ++i) {
    CallOptions options;
    options.timeout = seconds(10);
    failed = RunOnControl<StreamOutcome>([&] { return PingPong(*channel_, 1, options); });
    if (failed.status.message().find(kChannelNodeId) != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(failed.status.code(), StatusCode::kUnavailable) << failed.status.ToString();
  EXPECT_NE(failed.status.message().find(kChannelNodeId), std::string::npos)
      << failed.status.ToString();
  CallOptions waiting;
  waiting.timeout = milliseconds(300);
  waiting.wait_for_ready = true;
  StreamOutcome waited =
      RunOnControl<StreamOutcome>([&] { return ServerStream(*channel_, {1}, waiting); });
  EXPECT_EQ(waited.status.code(), StatusCode::kDeadlineExceeded) << waited.status.ToString();
}

// The server's status reaches the caller unchanged, and a stream whose
// deadline passes mid-call ends DEADLINE_EXCEEDED.
TEST_F(ChannelStreamingTest, ServerStatusAndDeadlineEndTheStream) {
  ServeOneCluster(*cp_, {addresses_[0]});
  CreateChannel("xds:///svc");
  auto statuses = RunOnControl<std::pair<Status, Status>>([&]() -> Task<std::pair<Status, Status>> {
    StatusOr<std::unique_ptr<ClientStream>> stream =
        co_await channel_->StartStream(test_service::kFullDuplexCall, WaitingOptions());
    if (!stream.ok()) co_return std::pair(stream.status(), stream.status());
    grpc::testing::StreamingOutputCallRequest request;
    request.mutable_response_status()->set_code(static_cast<int>(StatusCode::kAborted));
    request.mutable_response_status()->set_message("told to abort");
    const std::string bytes = request.SerializeAsString();
    const Status written = co_await (*stream)->Write(bytes);
    Status server_status = co_await (*stream)->Finish();
    if (!written.ok() && server_status.ok()) server_status = written;
    CallOptions short_deadline = WaitingOptions();
    short_deadline.timeout = milliseconds(200);
    StatusOr<std::unique_ptr<ClientStream>> idle =
        co_await channel_->StartStream(test_service::kFullDuplexCall, short_deadline);
    if (!idle.ok()) co_return std::pair(server_status, idle.status());
    // Nothing written: the server waits for a request until the deadline.
    co_return std::pair(server_status, co_await (*idle)->Finish());
  });
  EXPECT_EQ(statuses.first.code(), StatusCode::kAborted) << statuses.first.ToString();
  EXPECT_EQ(statuses.first.message(), "told to abort");
  EXPECT_EQ(statuses.second.code(), StatusCode::kDeadlineExceeded) << statuses.second.ToString();
}

// A31: a route's max_stream_duration caps a call's deadline (here the
// application's is 10 s); grpc_timeout_header_max replaces it, and 0 there
// means the application's deadline alone, even under an
// HttpConnectionManager default; a route that sets neither takes the
// HttpConnectionManager's. Each stream writes nothing, so the server
// waits for the client until the deadline ends the call.
TEST_F(ChannelStreamingTest, ARoutesMaxStreamDurationCapsTheDeadline) {
  envoy::config::route::v3::RouteConfiguration config;
  config.set_name("svc-routes");
  auto* vhost = config.add_virtual_hosts();
  vhost->add_domains("*");
  auto add_route = [&](const std::string& prefix) {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix(prefix);
    route->mutable_route()->set_cluster("main");
    return route->mutable_route();
  };
  // The header max at 0: the application's deadline, uncapped.
  add_route(test_service::kFullDuplexCall)
      ->mutable_max_stream_duration()
      ->mutable_grpc_timeout_header_max();
  // max_stream_duration 200 ms, and a header max of 150 ms that wins.
  auto* both = add_route(test_service::kStreamingInputCall)->mutable_max_stream_duration();
  both->mutable_max_stream_duration()->set_nanos(200'000'000);
  both->mutable_grpc_timeout_header_max()->set_nanos(150'000'000);
  add_route("");  // HalfDuplexCall: the HttpConnectionManager's 200 ms
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"svc", ApiListenerWithRouteConfig("svc", config, milliseconds(200))}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"main", ValidCluster("main", "s-main")}}, "1"));
  ASSERT_TRUE(
      cp_->SetResources(kEdsType, {{"s-main", EndpointsAt("s-main", {addresses_[0]})}}, "1"));
  CreateChannel("xds:///svc");
  struct Ends {
    Status uncapped, capped_by_route, capped_by_default;
  };
  const Ends ends = RunOnControl<Ends>([&]() -> Task<Ends> {
    Ends ends;
    // First the uncapped stream, with the same application deadline as the
    // others: had the caps no effect, it would end (DEADLINE_EXCEEDED)
    // before they do.
    StatusOr<std::unique_ptr<ClientStream>> open =
        co_await channel_->StartStream(test_service::kFullDuplexCall, WaitingOptions());
    auto idle_until_end = [&](const char* method) -> Task<Status> {
      StatusOr<std::unique_ptr<ClientStream>> stream =
          co_await channel_->StartStream(method, WaitingOptions());
      if (!stream.ok()) co_return stream.status();
      co_return co_await (*stream)->Finish();
    };
    ends.capped_by_route = co_await idle_until_end(test_service::kStreamingInputCall);
    ends.capped_by_default = co_await idle_until_end(test_service::kHalfDuplexCall);
    if (!open.ok()) {
      ends.uncapped = open.status();
      co_return ends;
    }
    // Past every cap, the uncapped stream is still open: cancelled here.
    (void)co_await SleepFor(control_->loop(), milliseconds(300));
    (*open)->Cancel();
    ends.uncapped = co_await (*open)->Finish();
    co_return ends;
  });
  EXPECT_EQ(ends.capped_by_route.code(), StatusCode::kDeadlineExceeded)
      << ends.capped_by_route.ToString();
  EXPECT_EQ(ends.capped_by_default.code(), StatusCode::kDeadlineExceeded)
      << ends.capped_by_default.ToString();
  EXPECT_EQ(ends.uncapped.code(), StatusCode::kCancelled) << ends.uncapped.ToString();
}

// A stream keeps its endpoint when a config update drops its cluster: it
// runs to its end, and calls started after the update go to the new cluster.
TEST_F(ChannelStreamingTest, AStreamOutlivesTheClusterItWasPickedFrom) {
  ServeOneCluster(*cp_, {addresses_[0]});
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-main", EndpointsAt("s-main", {addresses_[0]})},
                                 {"s-next", EndpointsAt("s-next", {addresses_[1]})}},
                                "2"));
  CreateChannel("xds:///svc");
  StreamOutcome opened;
  std::unique_ptr<ClientStream> stream = RunOnControl<std::unique_ptr<ClientStream>>(
      [&] { return Open(*channel_, test_service::kFullDuplexCall, WaitingOptions(), &opened); });
  ASSERT_NE(stream, nullptr) << opened.status.ToString();
  EXPECT_EQ(opened.peer, addresses_[0]);

  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"next", ValidCluster("next", "s-next")}}, "2"));
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "next"}})}}, "2"));
  bool moved = false;
  for (int i = 0; i < 300 && !moved; ++i) {
    StatusOr<UnaryResponse> reply = Call(test_service::kEmptyCall, WaitingOptions());
    moved = reply.ok() && reply->peer == addresses_[1];
    if (!moved) std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_TRUE(moved) << "the update never reached the channel";

  StreamOutcome finished = RunOnControl<StreamOutcome>([&]() -> Task<StreamOutcome> {
    StreamOutcome outcome;
    const std::vector<int> sizes = {7};  // named: see PingPong
    const std::string request = OutputRequest(sizes);
    outcome.status = co_await stream->Write(request);
    if (std::optional<std::string> bytes = co_await stream->Read()) {
      grpc::testing::StreamingOutputCallResponse response;
      if (response.ParseFromString(*bytes)) {
        outcome.response_sizes.push_back(response.payload().body().size());
      }
    }
    const Status done = co_await stream->WritesDone();
    const Status status = co_await stream->Finish();
    if (outcome.status.ok()) outcome.status = done.ok() ? status : done;
    co_return outcome;
  });
  EXPECT_TRUE(finished.status.ok()) << finished.status.ToString();
  EXPECT_EQ(finished.response_sizes, (std::vector<size_t>{7}));
  control_->RunSync([&] { stream.reset(); });
}

// A grpcio 1.51 server behind the channel: server streaming and bidi calls.
TEST_F(ChannelStreamingTest, StreamsReachAGrpcioServer) {
  Subprocess peer = Subprocess::Start(
      {Python(), SourceRoot() + "/tests/peers/grpc_test_server.py", "--server-id", "grpcio"});
  std::optional<std::string> port = peer.WaitForLine("PORT ", seconds(60));
  ASSERT_TRUE(port.has_value()) << "grpcio server did not start";
  const std::string address = "127.0.0.1:" + *port;
  ServeOneCluster(*cp_, {address});
  CreateChannel("xds:///svc");
  StreamOutcome output = RunOnControl<StreamOutcome>([&] {
    return ServerStream(*channel_, {3, 30000, 7}, WaitingOptions());
  });
  ASSERT_TRUE(output.status.ok()) << output.status.ToString();
  EXPECT_EQ(output.peer, address);
  EXPECT_EQ(output.response_sizes, (std::vector<size_t>{3, 30000, 7}));
  StreamOutcome duplex =
      RunOnControl<StreamOutcome>([&] { return PingPong(*channel_, 4, WaitingOptions()); });
  ASSERT_TRUE(duplex.status.ok()) << duplex.status.ToString();
  EXPECT_EQ(duplex.response_sizes, (std::vector<size_t>{1, 2, 3, 4}));
}

// A gRPC C++ 1.51 server behind the channel: bidi calls (its server has no
// streaming-output method). Skipped in builds without the C++ peers.
TEST_F(ChannelStreamingTest, BidiStreamsReachAGrpcCppServer) {
  const std::string binary = BuildRoot() + "/tests/peers/grpc_cpp_test_server";
  if (access(binary.c_str(), X_OK) != 0) GTEST_SKIP() << "built with -Dpeers=false";
  Subprocess peer = Subprocess::Start({binary});
  std::optional<std::string> port = peer.WaitForLine("PORT ", seconds(60));
  ASSERT_TRUE(port.has_value()) << "gRPC C++ server did not start";
  const std::string address = "127.0.0.1:" + *port;
  ServeOneCluster(*cp_, {address});
  CreateChannel("xds:///svc");
  for (int call = 0; call < 3; ++call) {
    StreamOutcome duplex =
        RunOnControl<StreamOutcome>([&] { return PingPong(*channel_, 3, WaitingOptions()); });
    ASSERT_TRUE(duplex.status.ok()) << duplex.status.ToString();
    EXPECT_EQ(duplex.peer, address);
    EXPECT_EQ(duplex.response_sizes, (std::vector<size_t>{1, 2, 3}));
  }
}

}  // namespace
}  // namespace uxds::testing
