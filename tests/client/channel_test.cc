// Channel end to end on loopback: the fake control plane serves real
// Listener / RouteConfiguration / Cluster / ClusterLoadAssignment resources,
// uxds HTTP/2 servers serve grpc.testing.TestService, and calls go through
// routing (A28), hashing (A42) and the clusters' LB policies.
#include "uxds/client_channel.h"

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <string>

#include "http2/server.h"
#include "support/fake_control_plane.h"
#include "support/test_support.h"
#include "support/xds_test_resources.h"
#include "test_service/test_service.h"
#include "uxds/runtime.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
constexpr char kNodeId[] = "channel-node";

class ChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cp_ = FakeControlPlane::Start();
    ASSERT_NE(cp_, nullptr);
    backends_ = *LoopThread::Start();
    backends_->RunSync([&] {
      for (int i = 0; i < 3; ++i) {
        auto services = std::make_shared<http2::ServiceRegistry>();
        test_service::RegisterTestService(*services, "b" + std::to_string(i));
        servers_.push_back(std::move(
            *http2::Server::Listen(backends_->loop(), SocketAddress::Loopback4(0), services)));
        backends_->loop().Spawn(servers_.back()->Serve());
        addresses_.push_back("127.0.0.1:" + std::to_string(servers_.back()->port()));
      }
    });
    control_ = *LoopThread::Start();
    control_->RunSync([&] {
      Bootstrap bootstrap;
      XdsServerConfig server;
      server.server_uri = cp_->target();
      bootstrap.xds_servers.push_back(server);
      bootstrap.node.id = kNodeId;
      XdsClientOptions options;
      options.resource_does_not_exist_timeout = milliseconds(500);
      pool_ = *XdsClientPool::Create(control_->loop(), bootstrap, options);
    });
  }
  void TearDown() override {
    if (channel_ != nullptr) {
      std::promise<void> done;
      control_->RunSync([&] {
        auto shutdown = [](Channel* channel, std::promise<void>* done) -> Task<void> {
          co_await channel->Shutdown();
          done->set_value();
        };
        control_->loop().Spawn(shutdown(channel_.get(), &done));
      });
      done.get_future().wait();
      control_->RunSync([&] { channel_.reset(); });
    }
    control_->RunSync([&] { pool_.reset(); });
    control_.reset();
    std::promise<void> stopped;
    backends_->RunSync([&] {
      auto stop = [](std::vector<std::unique_ptr<http2::Server>>* servers,
                     std::promise<void>* done) -> Task<void> {
        for (auto& server : *servers) co_await server->Shutdown(milliseconds(0));
        done->set_value();
      };
      backends_->loop().Spawn(stop(&servers_, &stopped));
    });
    stopped.get_future().wait();
    backends_->RunSync([&] { servers_.clear(); });
    backends_.reset();
  }

  void CreateChannel(const std::string& target) {
    control_->RunSync([&] {
      ChannelOptions options;
      options.xds_client_pool = pool_;
      options.initial_backoff = milliseconds(100);
      options.max_backoff = milliseconds(500);
      auto channel = Channel::Create(control_->loop(), target, options);
      ASSERT_TRUE(channel.ok()) << channel.status().ToString();
      channel_ = *std::move(channel);
    });
  }

  // One call from the control loop; waits for its result.
  StatusOr<UnaryResponse> Call(const std::string& method, CallOptions options = {}) {
    if (!options.timeout.has_value()) options.timeout = std::chrono::seconds(10);
    std::promise<StatusOr<UnaryResponse>> result;
    control_->RunSync([&] {
      auto call = [](Channel* channel, std::string method, CallOptions options,
                     std::promise<StatusOr<UnaryResponse>>* out) -> Task<void> {
        out->set_value(co_await channel->UnaryCall(std::move(method), "", std::move(options)));
      };
      control_->loop().Spawn(call(channel_.get(), method, std::move(options), &result));
    });
    return result.get_future().get();
  }

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> backends_;
  std::vector<std::unique_ptr<http2::Server>> servers_;
  std::vector<std::string> addresses_;
  std::unique_ptr<LoopThread> control_;
  std::shared_ptr<XdsClientPool> pool_;
  std::unique_ptr<Channel> channel_;
};

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
