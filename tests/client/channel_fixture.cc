#include "channel_fixture.h"

#include "test_service/test_service.h"

namespace uxds::testing {

using std::chrono::milliseconds;

void ChannelFixture::SetUp() {
  cp_ = FakeControlPlane::Start();
  ASSERT_NE(cp_, nullptr);
  backends_ = *LoopThread::Start();
  servers_.resize(backend_count_);
  for (int i = 0; i < backend_count_; ++i) {
    ServeBackend(i, 0);
    ASSERT_NE(servers_[i], nullptr);
    addresses_.push_back("127.0.0.1:" + std::to_string(servers_[i]->port()));
  }
  control_ = *LoopThread::Start();
  control_->RunSync([&] {
    Bootstrap bootstrap;
    XdsServerConfig server;
    server.server_uri = cp_->target();
    bootstrap.xds_servers.push_back(server);
    bootstrap.node.id = kChannelNodeId;
    if (customize_bootstrap_) customize_bootstrap_(bootstrap);
    XdsClientOptions options;
    options.resource_does_not_exist_timeout = milliseconds(500);
    pool_ = *XdsClientPool::Create(control_->loop(), bootstrap, options);
  });
}

void ChannelFixture::ServeBackend(int index, uint16_t port) {
  backends_->RunSync([&] {
    auto services = std::make_shared<http2::ServiceRegistry>();
    test_service::RegisterTestService(*services, "b" + std::to_string(index),
                                      "host-" + std::to_string(index));
    auto server =
        http2::Server::Listen(backends_->loop(), SocketAddress::Loopback4(port), services);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    servers_[index] = *std::move(server);
    backends_->loop().Spawn(servers_[index]->Serve());
  });
}

void ChannelFixture::StopBackend(int index, milliseconds grace) {
  std::promise<void> stopped;
  backends_->RunSync([&] {
    auto stop = [](http2::Server* server, milliseconds grace,
                   std::promise<void>* done) -> Task<void> {
      co_await server->Shutdown(grace);
      done->set_value();
    };
    backends_->loop().Spawn(stop(servers_[index].get(), grace, &stopped));
  });
  stopped.get_future().wait();
  backends_->RunSync([&] { servers_[index].reset(); });
}

void ChannelFixture::RestartBackend(int index) {
  const std::string& address = addresses_[index];
  ServeBackend(index, static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
}

void ChannelFixture::TearDown() {
  if (channel_ != nullptr) {
    RunOnControl<bool>([this]() -> Task<bool> {
      co_await channel_->Shutdown();
      co_return true;
    });
    control_->RunSync([&] { channel_.reset(); });
  }
  if (control_ != nullptr) control_->RunSync([&] { pool_.reset(); });
  control_.reset();
  for (int i = 0; i < static_cast<int>(servers_.size()); ++i) {
    if (servers_[i] != nullptr) StopBackend(i);
  }
  backends_.reset();
}

void ChannelFixture::CreateChannel(const std::string& target) {
  control_->RunSync([&] {
    ChannelOptions options;
    options.xds_client_pool = pool_;
    options.initial_backoff = milliseconds(100);
    options.max_backoff = milliseconds(500);
    options.resolve_host = resolve_host_;
    options.min_time_between_resolutions = milliseconds(100);
    if (customize_options_) customize_options_(options);
    auto channel = Channel::Create(control_->loop(), target, options);
    ASSERT_TRUE(channel.ok()) << channel.status().ToString();
    channel_ = *std::move(channel);
  });
}

StatusOr<UnaryResponse> ChannelFixture::Call(const std::string& method, CallOptions options) {
  if (!options.timeout.has_value()) options.timeout = std::chrono::seconds(10);
  return RunOnControl<StatusOr<UnaryResponse>>([&]() -> Task<StatusOr<UnaryResponse>> {
    co_return co_await channel_->UnaryCall(method, "", options);
  });
}

std::map<std::string, int> ChannelFixture::CountCalls(const std::string& method, int count,
                                                      CallOptions options) {
  if (!options.timeout.has_value()) options.timeout = std::chrono::seconds(10);
  return RunOnControl<std::map<std::string, int>>([&]() -> Task<std::map<std::string, int>> {
    std::map<std::string, int> counts;
    for (int i = 0; i < count; ++i) {
      StatusOr<UnaryResponse> reply = co_await channel_->UnaryCall(method, "", options);
      ++counts[reply.ok() ? reply->peer : std::string(StatusCodeName(reply.status().code()))];
    }
    co_return counts;
  });
}

}  // namespace uxds::testing
