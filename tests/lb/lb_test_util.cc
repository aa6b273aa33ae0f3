#include "lb/lb_test_util.h"

#include <cassert>

#include "http2/service_registry.h"

namespace uxds::lb_testing {

Backend::Backend(Loop& loop)
    : loop_(loop), probe_(loop), registry_(http2::testing::MakeTestService(probe_)) {}

Backend::~Backend() { assert(server_ == nullptr && "Stop() the backend first"); }

Status Backend::Start() {
  auto server = http2::Server::Listen(loop_, SocketAddress::Loopback4(port_), registry_);
  if (!server.ok()) return server.status();
  server_ = std::move(*server);
  port_ = server_->port();
  serving_ = std::make_unique<TaskGroup>(loop_);
  serving_->Spawn(server_->Serve());
  return Status();
}

Task<void> Backend::Stop(std::chrono::milliseconds grace) {
  if (server_ == nullptr) co_return;
  co_await server_->Shutdown(grace);
  co_await serving_->Join();
  server_.reset();
  serving_.reset();
}

SubchannelOptions FastSubchannelOptions() {
  SubchannelOptions options;
  options.initial_backoff = std::chrono::milliseconds(100);
  options.backoff_multiplier = 1.6;
  options.backoff_jitter = 0;
  options.max_backoff = std::chrono::milliseconds(300);
  options.min_connect_timeout = std::chrono::milliseconds(20000);
  return options;
}

Task<bool> WaitForState(Loop& loop, Subchannel* s, ConnectivityState state,
                        std::chrono::milliseconds limit) {
  co_return co_await WaitUntil(
      loop, [s, state] { return s->state() == state; }, limit);
}

LocalityList OneLocality(const std::vector<SocketAddress>& addresses, uint32_t locality_weight,
                         const std::string& name) {
  WeightedLocality locality;
  locality.name = name;
  locality.weight = locality_weight;
  for (const SocketAddress& a : addresses) locality.endpoints.push_back({a, "", 1});
  return LocalityList{locality};
}

}  // namespace uxds::lb_testing
