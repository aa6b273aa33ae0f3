// A33 fault injection through a Channel: the HTTP fault filter of the
// client Listener (and its per-route and per-cluster overrides) delays and
// aborts calls before they are picked, against the fake control plane and
// uxds backends on loopback; and gRPC C++ 1.51 given the same config ends
// its calls the same way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "channel_fixture.h"
#include "client/fault_injection.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/http/fault/v3/fault.pb.h"
#include "support/test_support.h"
#include "test_service/test_service.h"

namespace uxds::testing {
namespace {

using envoy::extensions::filters::http::fault::v3::HTTPFault;
using std::chrono::milliseconds;
using std::chrono::seconds;
using RouteConfiguration = envoy::config::route::v3::RouteConfiguration;

// Percentages over HUNDRED (the default denominator).
HTTPFault AbortWithGrpcStatus(uint32_t code, uint32_t percent = 100) {
  HTTPFault fault;
  fault.mutable_abort()->set_grpc_status(code);
  fault.mutable_abort()->mutable_percentage()->set_numerator(percent);
  return fault;
}

HTTPFault DelayOf(milliseconds delay, uint32_t percent = 100) {
  HTTPFault fault;
  fault.mutable_delay()->mutable_fixed_delay()->set_seconds(delay.count() / 1000);
  fault.mutable_delay()->mutable_fixed_delay()->set_nanos(
      static_cast<int32_t>(delay.count() % 1000 * 1000000));
  fault.mutable_delay()->mutable_percentage()->set_numerator(percent);
  return fault;
}

// One virtual host: "/grpc.testing.TestService/EmptyCall" to cluster "c"
// (route 0), everything else to "c" (route 1).
RouteConfiguration TwoRoutes() {
  RouteConfiguration config;
  config.set_name("svc-routes");
  auto* vhost = config.add_virtual_hosts();
  vhost->set_name("vhost");
  vhost->add_domains("*");
  auto* empty = vhost->add_routes();
  empty->mutable_match()->set_path(test_service::kEmptyCall);
  empty->mutable_route()->set_cluster("c");
  auto* rest = vhost->add_routes();
  rest->mutable_match()->set_prefix("");
  rest->mutable_route()->set_cluster("c");
  return config;
}

// Polls `condition` from the test thread until it holds (false after
// `limit`).
bool Eventually(const std::function<bool()>& condition, std::chrono::seconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

google::protobuf::Any Packed(const HTTPFault& fault) {
  google::protobuf::Any any;
  any.set_type_url("type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault");
  any.set_value(fault.SerializeAsString());
  return any;
}

class ChannelFaultInjectionTest : public ChannelFixture {
 protected:
  ChannelFaultInjectionTest() : ChannelFixture(1) {}

  void Serve(const RouteConfiguration& routes, const HTTPFault& fault) {
    ASSERT_TRUE(cp_->SetResources(
        kLdsType, {{"svc", ApiListenerWithFaultFilter("svc", routes, fault.SerializeAsString())}},
        std::to_string(++version_)));
    if (version_ == 1) {
      ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c", ValidCluster("c", "s-c")}}, "1"));
      ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-c", EndpointsAt("s-c", {addresses_[0]})}}, "1"));
    }
  }
  static CallOptions Waiting(milliseconds timeout = milliseconds(10000)) {
    CallOptions options;
    options.wait_for_ready = true;
    options.timeout = timeout;
    return options;
  }
  // The first call's status once the config has come (the first call may
  // wait for it; it is not faulted before it is routed).
  Status FirstStatus(const std::string& method, CallOptions options = Waiting()) {
    StatusOr<UnaryResponse> reply = Call(method, options);
    return reply.status();
  }

  int version_ = 0;
};

// An abort with a gRPC status fails every call with it, "Fault injected",
// without a pick (the backend is never reached: it is not even needed).
TEST_F(ChannelFaultInjectionTest, AnAbortFailsEveryCallWithItsGrpcStatus) {
  Serve(TwoRoutes(), AbortWithGrpcStatus(static_cast<uint32_t>(StatusCode::kAborted)));
  CreateChannel("xds:///svc");
  std::map<std::string, int> counts = CountCalls(test_service::kEmptyCall, 20, Waiting());
  EXPECT_EQ(counts["ABORTED"], 20) << ::testing::PrintToString(counts);
  const Status status = FirstStatus(test_service::kUnaryCall);
  EXPECT_EQ(status.code(), StatusCode::kAborted);
  EXPECT_EQ(status.message(), "Fault injected");
  EXPECT_EQ(client_internal::ActiveFaults(), 0u);
}

// A33: an HTTP status is mapped as gRPC maps one without grpc-status; 200
// is UNKNOWN.
TEST_F(ChannelFaultInjectionTest, AnHttpStatusAbortIsMappedToItsGrpcCode) {
  HTTPFault fault;
  fault.mutable_abort()->set_http_status(404);
  fault.mutable_abort()->mutable_percentage()->set_numerator(100);
  Serve(TwoRoutes(), fault);
  CreateChannel("xds:///svc");
  EXPECT_EQ(FirstStatus(test_service::kEmptyCall).code(), StatusCode::kUnimplemented);
  fault.mutable_abort()->set_http_status(200);
  Serve(TwoRoutes(), fault);
  ASSERT_TRUE(Eventually(
      [&] { return FirstStatus(test_service::kEmptyCall).code() == StatusCode::kUnknown; },
      seconds(10)));
}

// A delay holds the call before its pick: a call whose deadline ends
// first fails DEADLINE_EXCEEDED, one with time to spare succeeds after it.
TEST_F(ChannelFaultInjectionTest, ADelayHoldsTheCallBeforeItIsSent) {
  Serve(TwoRoutes(), DelayOf(milliseconds(300)));
  CreateChannel("xds:///svc");
  const auto start = std::chrono::steady_clock::now();
  StatusOr<UnaryResponse> reply = Call(test_service::kEmptyCall, Waiting());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  // The config was already there for the next one: it is delayed alone.
  const auto second_start = std::chrono::steady_clock::now();
  reply = Call(test_service::kEmptyCall, Waiting());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - second_start, milliseconds(300));
  EXPECT_GE(second_start - start, milliseconds(300));
  const Status late = FirstStatus(test_service::kEmptyCall, Waiting(milliseconds(100)));
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded) << late.ToString();
  // The longest delay a Duration holds (10000 years, past the clock's
  // range) waits as long as the deadline lets it, like any other.
  HTTPFault longest;
  longest.mutable_delay()->mutable_fixed_delay()->set_seconds(315576000000);
  longest.mutable_delay()->mutable_percentage()->set_numerator(100);
  Serve(TwoRoutes(), longest);
  // (1 s is time enough for the 300 ms delay: the new config fails it.)
  ASSERT_TRUE(Eventually(
      [&] {
        return FirstStatus(test_service::kEmptyCall, Waiting(milliseconds(1000))).code() ==
               StatusCode::kDeadlineExceeded;
      },
      seconds(20)));
  const auto long_start = std::chrono::steady_clock::now();
  EXPECT_EQ(FirstStatus(test_service::kEmptyCall, Waiting(milliseconds(200))).code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_GE(std::chrono::steady_clock::now() - long_start, milliseconds(200));
}

// header_abort / header_delay: the request's x-envoy-fault-* headers say
// what to inject, within the configured percentage; without them, nothing.
TEST_F(ChannelFaultInjectionTest, HeadersChooseTheFaultWhenTheConfigSaysSo) {
  HTTPFault fault;
  fault.mutable_abort()->mutable_header_abort();
  fault.mutable_abort()->mutable_percentage()->set_numerator(100);
  Serve(TwoRoutes(), fault);
  CreateChannel("xds:///svc");
  EXPECT_TRUE(FirstStatus(test_service::kEmptyCall).ok());
  CallOptions options = Waiting();
  options.metadata = {{"x-envoy-fault-abort-grpc-request", "3"}};
  EXPECT_EQ(FirstStatus(test_service::kEmptyCall, options).code(), StatusCode::kInvalidArgument);
  options.metadata = {{"x-envoy-fault-abort-request", "503"}};
  EXPECT_EQ(FirstStatus(test_service::kEmptyCall, options).code(), StatusCode::kUnavailable);
  // A percentage header of 0 turns the abort off; an invalid one is ignored.
  options.metadata = {{"x-envoy-fault-abort-grpc-request", "3"},
                      {"x-envoy-fault-abort-request-percentage", "0"}};
  EXPECT_TRUE(FirstStatus(test_service::kEmptyCall, options).ok());
  options.metadata = {{"x-envoy-fault-abort-grpc-request", "3"},
                      {"x-envoy-fault-abort-request-percentage", "lots"}};
  EXPECT_EQ(FirstStatus(test_service::kEmptyCall, options).code(), StatusCode::kInvalidArgument);
}

// A39 overrides: an empty HTTPFault on a route turns the filter off there;
// a weighted cluster's override wins over its route's.
TEST_F(ChannelFaultInjectionTest, RouteAndClusterOverridesWinOverTheFilter) {
  RouteConfiguration routes = TwoRoutes();
  auto* vhost = routes.mutable_virtual_hosts(0);
  (*vhost->mutable_routes(0)->mutable_typed_per_filter_config())["fault"] = Packed(HTTPFault());
  auto* weighted = vhost->mutable_routes(1)->mutable_route()->mutable_weighted_clusters();
  auto* only = weighted->add_clusters();
  only->set_name("c");
  only->mutable_weight()->set_value(1);
  (*only->mutable_typed_per_filter_config())["fault"] =
      Packed(AbortWithGrpcStatus(static_cast<uint32_t>(StatusCode::kDataLoss)));
  (*vhost->mutable_routes(1)->mutable_typed_per_filter_config())["fault"] =
      Packed(AbortWithGrpcStatus(static_cast<uint32_t>(StatusCode::kInternal)));
  Serve(routes, AbortWithGrpcStatus(static_cast<uint32_t>(StatusCode::kAborted)));
  CreateChannel("xds:///svc");
  EXPECT_TRUE(FirstStatus(test_service::kEmptyCall).ok());
  EXPECT_EQ(FirstStatus(test_service::kUnaryCall).code(), StatusCode::kDataLoss);
}

// The percentage is a per-call draw: about half of the calls abort at 50%.
TEST_F(ChannelFaultInjectionTest, APercentageAbortsThatShareOfCalls) {
  Serve(TwoRoutes(), AbortWithGrpcStatus(static_cast<uint32_t>(StatusCode::kAborted), 50));
  CreateChannel("xds:///svc");
  std::map<std::string, int> counts = CountCalls(test_service::kEmptyCall, 400, Waiting());
  // Binomial(400, 1/2): 200 +- 10; the bounds are 6 sigmas out.
  EXPECT_GT(counts["ABORTED"], 140) << ::testing::PrintToString(counts);
  EXPECT_LT(counts["ABORTED"], 260) << ::testing::PrintToString(counts);
  EXPECT_EQ(counts["ABORTED"] + counts[addresses_[0]], 400) << ::testing::PrintToString(counts);
}

// max_active_faults: while one call is delayed, the next is not faulted.
TEST_F(ChannelFaultInjectionTest, MaxActiveFaultsLeavesCallsAlonePastTheLimit) {
  HTTPFault fault = DelayOf(milliseconds(3000));
  fault.mutable_abort()->set_grpc_status(static_cast<uint32_t>(StatusCode::kAborted));
  fault.mutable_abort()->mutable_percentage()->set_numerator(100);
  fault.mutable_max_active_faults()->set_value(1);
  Serve(TwoRoutes(), fault);
  CreateChannel("xds:///svc");
  // The first call (it may wait for the config) is faulted: delayed, then
  // aborted.
  EXPECT_EQ(FirstStatus(test_service::kEmptyCall).code(), StatusCode::kAborted);
  std::thread delayed(
      [&] { EXPECT_EQ(FirstStatus(test_service::kEmptyCall).code(), StatusCode::kAborted); });
  ASSERT_TRUE(Eventually([] { return client_internal::ActiveFaults() == 1; }, seconds(10)));
  // One fault active: this call goes through untouched.
  EXPECT_TRUE(FirstStatus(test_service::kEmptyCall).ok());
  delayed.join();
  EXPECT_EQ(client_internal::ActiveFaults(), 0u);
}

Task<void> CallInto(Channel& channel, std::promise<Status>& ended) {
  CallOptions options;
  options.timeout = seconds(60);
  StatusOr<UnaryResponse> reply = co_await channel.UnaryCall(test_service::kEmptyCall, "", options);
  ended.set_value(reply.status());
}

// A call cancelled during its delay ends there, CANCELLED, and its fault
// leaves the gauge.
TEST_F(ChannelFaultInjectionTest, ACallCancelledDuringItsDelayEndsThere) {
  Serve(TwoRoutes(), DelayOf(milliseconds(30000)));
  CreateChannel("xds:///svc");
  std::promise<Status> ended;
  auto calls = RunOnControl<std::shared_ptr<TaskGroup>>([&]() -> Task<std::shared_ptr<TaskGroup>> {
    auto group = std::make_shared<TaskGroup>(control_->loop());
    group->Spawn(CallInto(*channel_, ended));
    co_return group;
  });
  ASSERT_TRUE(Eventually([] { return client_internal::ActiveFaults() == 1; }, seconds(10)));
  const auto start = std::chrono::steady_clock::now();
  RunOnControl<bool>([&]() -> Task<bool> {
    co_await calls->CancelAndJoin();
    calls.reset();  // on its loop, joined
    co_return true;
  });
  // Far sooner than the 30 s delay.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10));
  std::future<Status> status = ended.get_future();
  ASSERT_EQ(status.wait_for(seconds(0)), std::future_status::ready);
  EXPECT_EQ(status.get().code(), StatusCode::kCancelled);
  EXPECT_EQ(client_internal::ActiveFaults(), 0u);
}

// The channel's Shutdown() ends a call waiting out its delay.
TEST_F(ChannelFaultInjectionTest, ShutdownEndsACallDuringItsDelay) {
  Serve(TwoRoutes(), DelayOf(milliseconds(30000)));
  CreateChannel("xds:///svc");
  std::promise<Status> ended;
  control_->RunSync([&] { control_->loop().Spawn(CallInto(*channel_, ended)); });
  ASSERT_TRUE(Eventually([] { return client_internal::ActiveFaults() == 1; }, seconds(10)));
  RunOnControl<bool>([&]() -> Task<bool> {
    co_await channel_->Shutdown();
    co_return true;
  });
  std::future<Status> status = ended.get_future();
  ASSERT_EQ(status.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(status.get().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client_internal::ActiveFaults(), 0u);
}

// The same config through gRPC C++ 1.51's xDS client: the same status and
// message. Skipped in builds without the gRPC C++ peers.
TEST_F(ChannelFaultInjectionTest, GrpcCppAbortsTheSameCallsTheSameWay) {
  const std::string binary = BuildRoot() + "/tests/peers/grpc_cpp_xds_client";
  if (access(binary.c_str(), X_OK) != 0) GTEST_SKIP() << "no gRPC C++ peer in this build";
  HTTPFault fault;
  fault.mutable_abort()->set_http_status(503);
  fault.mutable_abort()->mutable_percentage()->set_numerator(100);
  Serve(TwoRoutes(), fault);
  CreateChannel("xds:///svc");
  const Status uxds_status = FirstStatus(test_service::kUnaryCall);
  EXPECT_EQ(uxds_status.code(), StatusCode::kUnavailable);
  TempDir dir;
  const std::string bootstrap = dir.File("bootstrap.json");
  WriteFile(bootstrap, R"({"xds_servers":[{"server_uri":")" + cp_->target() +
                           R"(","channel_creds":[{"type":"insecure"}],)"
                           R"("server_features":["xds_v3"]}],"node":{"id":"grpc-cpp-client"}})");
  Subprocess client =
      Subprocess::Start({binary, "--calls", "5", "--deadline-ms", "20000", "xds:///svc"},
                        {{"GRPC_XDS_BOOTSTRAP", bootstrap}});
  std::optional<std::string> summary = client.WaitForLine("{\"summary\"", seconds(60));
  (void)client.Wait(seconds(30));
  ASSERT_TRUE(summary.has_value()) << "gRPC C++ client printed no summary";
  EXPECT_NE(summary->find("\"by_status\":{\"UNAVAILABLE\":5}"), std::string::npos) << *summary;
  EXPECT_NE(summary->find("UNAVAILABLE: " + std::string(uxds_status.message())), std::string::npos)
      << *summary;

  // A delay: both send the calls, after it.
  Serve(TwoRoutes(), DelayOf(milliseconds(400)));
  ASSERT_TRUE(Eventually([&] { return FirstStatus(test_service::kUnaryCall).ok(); }, seconds(10)));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(FirstStatus(test_service::kUnaryCall).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(400));
  Subprocess delayed =
      Subprocess::Start({binary, "--calls", "3", "--deadline-ms", "20000", "xds:///svc"},
                        {{"GRPC_XDS_BOOTSTRAP", bootstrap}});
  summary = delayed.WaitForLine("{\"summary\"", seconds(60));
  EXPECT_EQ(delayed.Wait(seconds(30)), 0);
  ASSERT_TRUE(summary.has_value()) << "gRPC C++ client printed no summary";
  EXPECT_NE(summary->find("\"ok\":3"), std::string::npos) << *summary;
  // The calls waited the delay (the median one did).
  const size_t p50 = summary->find("\"p50\":");
  ASSERT_NE(p50, std::string::npos) << *summary;
  EXPECT_GE(std::stod(summary->substr(p50 + 6)), 400000.0) << *summary;
}

}  // namespace
}  // namespace uxds::testing
