// Channel end to end on loopback: the fake control plane serves real
// Listener / RouteConfiguration / Cluster / ClusterLoadAssignment resources,
// uxds HTTP/2 servers serve grpc.testing.TestService, and calls go through
// routing (A28), hashing (A42) and the clusters' LB policies.
#include "uxds/client_channel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// A cluster whose load_balancing_policy is wrr_locality over ring_hash:
// weighted_target over one ring_hash per locality. Every ring_hash child
// starts IDLE; the first pick must make them exit IDLE (gRPC's queueing
// picker), or no call ever reaches a backend.
TEST_F(ChannelTest, WrrLocalityOverRingHashServesCalls) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "wrr", "x-user"}})}}, "1"));
  ASSERT_TRUE(
      cp_->SetResources(kCdsType, {{"wrr", WrrLocalityCluster("wrr", "s-wrr", true)}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-wrr", EndpointsAt("s-wrr", addresses_)}}, "1"));
  CreateChannel("xds:///svc");
  std::string first_peer;
  for (int i = 0; i < 3; ++i) {
    auto reply = Call(test_service::kEmptyCall,
                      {.metadata = {{"x-user", "alice"}}, .timeout = std::chrono::seconds(5)});
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    if (i == 0) first_peer = reply->peer;
    EXPECT_EQ(reply->peer, first_peer);  // A42: one key, one backend
  }
}

// wrr_locality over round_robin: weighted_target over one round_robin per
// locality (round_robin connects at once).
TEST_F(ChannelTest, WrrLocalityOverRoundRobinServesCalls) {
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "wrr"}})}}, "1"));
  ASSERT_TRUE(
      cp_->SetResources(kCdsType, {{"wrr", WrrLocalityCluster("wrr", "s-wrr", false)}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-wrr", EndpointsAt("s-wrr", addresses_)}}, "1"));
  CreateChannel("xds:///svc");
  std::set<std::string> peers;
  for (int i = 0; i < 30; ++i) {
    auto reply = Call(test_service::kEmptyCall,
                      {.metadata = {}, .timeout = std::chrono::seconds(5), .wait_for_ready = true});
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    peers.insert(reply->peer);
  }
  // Once every endpoint is READY the picks rotate over all of them.
  for (int i = 0; i < 9; ++i) {
    auto reply = Call(test_service::kEmptyCall);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    peers.insert(reply->peer);
  }
  EXPECT_EQ(peers.size(), addresses_.size());
}

// A42: "the call's hash will be the same when it is re-attempted with a new
// picker". A call without a hash policy gets one random hash: however
// often its pick is retried while the endpoint connects, it asks one IDLE
// endpoint to connect, not one per retry.
TEST_F(ChannelTest, AQueuedCallKeepsItsHashAcrossRepicks) {
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "ring"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"ring", RingHashCluster("ring", "s-ring")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-ring", EndpointsAt("s-ring", addresses_)}}, "1"));
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kEmptyCall);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  size_t connections = 0;
  backends_->RunSync([&] {
    for (const auto& server : servers_) connections += server->connection_count();
  });
  EXPECT_EQ(connections, 1u);
}

// A call that finds no config names what the channel still waits for.
TEST_F(ChannelTest, ACallWaitingForConfigNamesTheMissingResource) {
  CreateChannel("xds:///svc");  // the control plane has no Listener "svc"
  auto reply = Call(test_service::kEmptyCall,
                    {.metadata = {}, .timeout = milliseconds(200), .wait_for_ready = false});
  ASSERT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("LDS resource svc"), std::string::npos)
      << reply.status().ToString();
}

// With wait_for_ready, a call whose endpoints cannot be reached ends at its
// deadline with the last connection error, not only "deadline exceeded".
TEST_F(ChannelTest, AWaitForReadyDeadlineCarriesTheLastConnectionError) {
  // A port nothing listens on: connections are refused at once.
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
  socklen_t length = sizeof(any);
  ASSERT_EQ(getsockname(probe, reinterpret_cast<sockaddr*>(&any), &length), 0);
  close(probe);
  const std::string refused = "127.0.0.1:" + std::to_string(ntohs(any.sin_port));
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c", ValidCluster("c", "s-c")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-c", EndpointsAt("s-c", {refused})}}, "1"));
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kEmptyCall,
                    {.metadata = {}, .timeout = milliseconds(1500), .wait_for_ready = true});
  ASSERT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("last error"), std::string::npos)
      << reply.status().ToString();
  EXPECT_NE(reply.status().message().find(refused), std::string::npos) << reply.status().ToString();
}

// A plain host:port target: no xDS, round_robin over the resolved addresses.
TEST_F(ChannelTest, AHostPortTargetNeedsNoXds) {
  CreateChannel(addresses_[1]);
  auto reply = Call(test_service::kEmptyCall,
                    {.metadata = {}, .timeout = std::nullopt, .wait_for_ready = true});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[1]);
}

// A host:port target whose name does not resolve fails its calls with the
// resolver's error (wait_for_ready calls wait for their deadline).
TEST_F(ChannelTest, AHostPortTargetThatDoesNotResolveFailsCalls) {
  CreateChannel("name.invalid:443");  // RFC 6761: never resolves
  StatusOr<UnaryResponse> reply = UnavailableError("not yet");
  for (int i = 0; i < 200; ++i) {
    reply = Call(test_service::kEmptyCall,
                 {.metadata = {}, .timeout = milliseconds(100), .wait_for_ready = false});
    if (reply.status().code() == StatusCode::kUnavailable) break;
  }
  ASSERT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("name.invalid"), std::string::npos)
      << reply.status().ToString();
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
