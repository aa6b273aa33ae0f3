// The end-to-end setting of the Channel tests: the fake control plane, uxds
// HTTP/2 servers serving grpc.testing.TestService on their own loop thread,
// and a control loop thread with an XdsClientPool on which the channel
// lives. Every channel operation runs on the control loop; the test thread
// waits for its result.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "http2/server.h"
#include "support/fake_control_plane.h"
#include "support/xds_test_resources.h"
#include "uxds/client_channel.h"
#include "uxds/runtime.h"

namespace uxds::testing {

inline constexpr char kChannelNodeId[] = "channel-node";

class ChannelFixture : public ::testing::Test {
 protected:
  explicit ChannelFixture(int backend_count = 3) : backend_count_(backend_count) {}
  void SetUp() override;
  void TearDown() override;

  void CreateChannel(const std::string& target);

  // Runs `body` as a task on the control loop; waits for its result.
  template <typename T>
  T RunOnControl(std::function<Task<T>()> body) {
    std::promise<T> result;
    control_->RunSync([&] {
      auto run = [](std::function<Task<T>()> body, std::promise<T>* out) -> Task<void> {
        out->set_value(co_await body());
      };
      control_->loop().Spawn(run(std::move(body), &result));
    });
    return result.get_future().get();
  }

  // One unary call (10 s deadline unless options say otherwise).
  StatusOr<UnaryResponse> Call(const std::string& method, CallOptions options = {});
  // `count` unary calls one after another: how many each backend answered,
  // keyed by address, and failed calls keyed by their status code's name.
  std::map<std::string, int> CountCalls(const std::string& method, int count,
                                        CallOptions options = {});

  // Stops backend i (its connections drain for `grace`, then close) /
  // serves again on its port.
  void StopBackend(int index, std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  void RestartBackend(int index);

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> backends_;
  std::vector<std::unique_ptr<http2::Server>> servers_;  // null while stopped
  std::vector<std::string> addresses_;
  std::unique_ptr<LoopThread> control_;
  std::shared_ptr<XdsClientPool> pool_;
  std::unique_ptr<Channel> channel_;
  // ChannelOptions::resolve_host of the channels CreateChannel() makes.
  decltype(ChannelOptions::resolve_host) resolve_host_;
  // Changes the bootstrap of pool_ (set it in the constructor).
  std::function<void(Bootstrap&)> customize_bootstrap_;
  // Changes the options of the channels CreateChannel() makes, last.
  std::function<void(ChannelOptions&)> customize_options_;

 private:
  void ServeBackend(int index, uint16_t port);
  const int backend_count_;
};

}  // namespace uxds::testing
