// Channel end to end on loopback: the fake control plane serves real
// Listener / RouteConfiguration / Cluster / ClusterLoadAssignment resources,
// uxds HTTP/2 servers serve grpc.testing.TestService, and calls go through
// routing (A28), hashing (A42) and the clusters' LB policies.
#include "uxds/client_channel.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <thread>

#include "channel_fixture.h"
#include "test_service/test_service.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

using ChannelTest = ChannelFixture;

// A28: routes in order by path prefix, each to its own cluster.
TEST_F(ChannelTest, CallsAreRoutedByPath) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType,
      {{"svc",
        ApiListenerWithRoutes("svc", "svc",
                              {{"/grpc.testing.TestService/EmptyCall", "empty"}, {"", "main"}})}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType,
      {{"empty", ValidCluster("empty", "s-empty")}, {"main", ValidCluster("main", "s-main")}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-empty", EndpointsAt("s-empty", {addresses_[2]})},
                                 {"s-main", EndpointsAt("s-main", {addresses_[0]})}},
                                "1"));
  CreateChannel("xds:///svc");
  for (int i = 0; i < 3; ++i) {
    auto empty = Call(test_service::kEmptyCall);
    ASSERT_TRUE(empty.ok()) << empty.status().ToString();
    EXPECT_EQ(empty->peer, addresses_[2]);
    auto unary = Call(test_service::kUnaryCall);
    ASSERT_TRUE(unary.ok()) << unary.status().ToString();
    EXPECT_EQ(unary->peer, addresses_[0]);
  }
}

// A config that changes one cluster's endpoints leaves every other
// cluster's tree as it is: no update, no new picker.
TEST_F(ChannelTest, AConfigChangingOneClusterLeavesTheOtherClustersTreesAlone) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType,
      {{"svc",
        ApiListenerWithRoutes("svc", "svc",
                              {{"/grpc.testing.TestService/EmptyCall", "empty"}, {"", "main"}})}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType,
      {{"empty", ValidCluster("empty", "s-empty")}, {"main", ValidCluster("main", "s-main")}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-empty", EndpointsAt("s-empty", {addresses_[2]})},
                                 {"s-main", EndpointsAt("s-main", {addresses_[0]})}},
                                "1"));
  CreateChannel("xds:///svc");
  auto published = [&](const std::string& cluster) {
    return RunOnControl<int64_t>([&]() -> Task<int64_t> {
      co_return client_internal::PickersPublished(*channel_, cluster);
    });
  };
  ASSERT_TRUE(Call(test_service::kEmptyCall).ok());
  ASSERT_TRUE(Call(test_service::kUnaryCall).ok());
  // Both trees READY: nothing changes any more on its own.
  std::this_thread::sleep_for(milliseconds(100));
  const int64_t main_before = published("main");
  const int64_t empty_before = published("empty");
  ASSERT_GT(main_before, 0);
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-empty", EndpointsAt("s-empty", {addresses_[1]})},
                                 {"s-main", EndpointsAt("s-main", {addresses_[0]})}},
                                "2"));
  for (int i = 0; i < 200; ++i) {
    auto empty = Call(test_service::kEmptyCall);
    if (empty.ok() && empty->peer == addresses_[1]) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(Call(test_service::kEmptyCall)->peer, addresses_[1]);
  EXPECT_GT(published("empty"), empty_before);
  EXPECT_EQ(published("main"), main_before);
  auto unary = Call(test_service::kUnaryCall);
  ASSERT_TRUE(unary.ok()) << unary.status().ToString();
  EXPECT_EQ(unary->peer, addresses_[0]);
}

// A42: a header hash policy over a RING_HASH cluster: the same value always
// reaches the same backend; different values spread over the backends.
TEST_F(ChannelTest, RingHashKeepsAHeaderValueOnOneBackend) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "ring", "x-user"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"ring", RingHashCluster("ring", "s-ring")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-ring", EndpointsAt("s-ring", addresses_)}}, "1"));
  CreateChannel("xds:///svc");
  std::map<std::string, std::string> backend_of;
  std::set<std::string> used;
  for (int round = 0; round < 3; ++round) {
    for (int user = 0; user < 20; ++user) {
      CallOptions options;
      options.metadata = {{"x-user", "user-" + std::to_string(user)}};
      // A42: the first pick of an IDLE endpoint queues while it connects.
      options.wait_for_ready = true;
      auto reply = Call(test_service::kEmptyCall, options);
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      const std::string key = "user-" + std::to_string(user);
      if (round == 0) {
        backend_of[key] = reply->peer;
        used.insert(reply->peer);
      } else {
        EXPECT_EQ(reply->peer, backend_of[key]) << key;
      }
    }
  }
  EXPECT_GE(used.size(), 2u);
}

// A plain host:port target: no xDS, round_robin over the resolved addresses.
TEST_F(ChannelTest, AHostPortTargetNeedsNoXds) {
  CreateChannel(addresses_[1]);
  auto reply = Call(test_service::kEmptyCall,
                    {.metadata = {}, .timeout = std::nullopt, .wait_for_ready = true});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[1]);
}

// A74 / A88: a Listener that does not exist fails calls UNAVAILABLE naming
// it; a cluster that does not exist fails only the calls routed to it.
TEST_F(ChannelTest, MissingResourcesFailCallsWithAUsefulMessage) {
  ASSERT_TRUE(cp_->SetResources(kLdsType, {}, "1"));
  CreateChannel("xds:///svc");
  auto no_listener = Call(test_service::kEmptyCall);
  ASSERT_FALSE(no_listener.ok());
  EXPECT_EQ(no_listener.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(no_listener.status().message().find("LDS resource svc"), std::string::npos)
      << no_listener.status().ToString();
  ASSERT_TRUE(cp_->SetResources(
      kLdsType,
      {{"svc", ApiListenerWithRoutes(
                   "svc", "*", {{"/grpc.testing.TestService/EmptyCall", "absent"}, {"", "main"}})}},
      "2"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"main", ValidCluster("main", "s-main")}}, "1"));
  ASSERT_TRUE(
      cp_->SetResources(kEdsType, {{"s-main", EndpointsAt("s-main", {addresses_[0]})}}, "1"));
  // The config arrives once "absent" is known not to exist.
  StatusOr<UnaryResponse> unary = UnavailableError("not yet");
  for (int i = 0; i < 100 && !unary.ok(); ++i) {
    unary = Call(test_service::kUnaryCall,
                 {.metadata = {}, .timeout = std::nullopt, .wait_for_ready = false});
    if (!unary.ok()) std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_TRUE(unary.ok()) << unary.status().ToString();
  auto absent = Call(test_service::kEmptyCall);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(absent.status().message().find("absent"), std::string::npos)
      << absent.status().ToString();
}

}  // namespace
}  // namespace uxds::testing
