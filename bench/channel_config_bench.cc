// What one config costs a channel's control loop when it changes one
// cluster of many: the control plane pushes new endpoints for cluster 0
// (alternating two sets), the channel's XdsClient decodes them, the
// dependency manager makes a new XdsConfig and the channel applies it.
// Measured: the control thread's CPU time per push (and the wall time from
// the push to the client's ACK).
//
// Clusters: RING_HASH (no connection is made before a pick; none is made
// here), 10 endpoints each on TEST-NET-1 addresses. The ADS server is
// in-process, on uxds's own HTTP/2 server on another loop thread: it
// answers each type's first request with every resource and then only
// reads ACKs, apart from the pushes.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ads_response_server.h"
#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "http2/server.h"
#include "uxds/client_channel.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

constexpr char kLdsType[] = "type.googleapis.com/envoy.config.listener.v3.Listener";
constexpr char kCdsType[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr char kEdsType[] = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
constexpr int kEndpointsPerCluster = 10;

std::string Pack(google::protobuf::Any& any, const std::string& type,
                 const google::protobuf::MessageLite& message) {
  any.set_type_url(type);
  any.set_value(message.SerializeAsString());
  return any.value();
}

std::string ListenerBytes(int clusters) {
  using envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
  HttpConnectionManager hcm;
  auto* config = hcm.mutable_route_config();
  config->set_name("routes");
  auto* vhost = config->add_virtual_hosts();
  vhost->set_name("vhost");
  vhost->add_domains("*");
  for (int i = 0; i < clusters; ++i) {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix("/svc" + std::to_string(i) + "/");
    route->mutable_route()->set_cluster("c" + std::to_string(i));
    route->mutable_route()->add_hash_policy()->mutable_header()->set_header_name("x-user");
  }
  auto* router = hcm.add_http_filters();
  router->set_name("router");
  Pack(*router->mutable_typed_config(),
       "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
       envoy::extensions::filters::http::router::v3::Router());
  envoy::config::listener::v3::Listener listener;
  listener.set_name("svc");
  Pack(*listener.mutable_api_listener()->mutable_api_listener(),
       "type.googleapis.com/"
       "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
       hcm);
  return listener.SerializeAsString();
}

std::string ClusterBytes(int i) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name("c" + std::to_string(i));
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  cluster.mutable_eds_cluster_config()->set_service_name("s" + std::to_string(i));
  cluster.set_lb_policy(envoy::config::cluster::v3::Cluster::RING_HASH);
  cluster.mutable_ring_hash_lb_config()->mutable_minimum_ring_size()->set_value(1024);
  cluster.mutable_ring_hash_lb_config()->mutable_maximum_ring_size()->set_value(1024);
  return cluster.SerializeAsString();
}

// Cluster i's endpoints; `variant` moves them to other ports.
std::string EndpointsBytes(int i, int variant) {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name("s" + std::to_string(i));
  auto* locality = assignment.add_endpoints();
  locality->mutable_locality()->set_zone("z1");
  locality->mutable_load_balancing_weight()->set_value(1);
  for (int e = 0; e < kEndpointsPerCluster; ++e) {
    auto* address = locality->add_lb_endpoints()
                        ->mutable_endpoint()
                        ->mutable_address()
                        ->mutable_socket_address();
    address->set_address("192.0.2." + std::to_string(1 + e));
    address->set_port_value(static_cast<uint32_t>(10000 + i * 2 + variant));
  }
  return assignment.SerializeAsString();
}

std::string Response(const std::string& type, const std::vector<std::string>& resources,
                     const std::string& version) {
  envoy::service::discovery::v3::DiscoveryResponse response;
  response.set_version_info(version);
  response.set_type_url(type);
  response.set_nonce(type + "/" + version);
  for (const std::string& bytes : resources) {
    auto* any = response.add_resources();
    any->set_type_url(type);
    any->set_value(bytes);
  }
  return response.SerializeAsString();
}

class ConfigServer {
 public:
  explicit ConfigServer(int clusters) {
    std::vector<std::string> cds;
    std::vector<std::string> eds;
    for (int i = 0; i < clusters; ++i) {
      cds.push_back(ClusterBytes(i));
      eds.push_back(EndpointsBytes(i, 0));
    }
    first_[kLdsType] = Response(kLdsType, {ListenerBytes(clusters)}, "1");
    first_[kCdsType] = Response(kCdsType, cds, "1");
    first_[kEdsType] = Response(kEdsType, eds, "1");
    // Serving starts once the first responses are ready.
    server_.emplace([this](http2::ServerCall& call) { return Serve(call); });
  }
  std::string target() const { return server_->target(); }

  // Sends EDS version `version` (> 1) for cluster 0 alone; Acked(version)
  // tells when the client has ACKed it.
  void PushEndpoints(int version) {
    const std::string response =
        Response(kEdsType, {EndpointsBytes(0, version % 2)}, std::to_string(version));
    LoopThread& thread = server_->thread();
    thread.RunSync([&] {
      auto write = [](http2::ServerCall* call, std::string bytes) -> Task<void> {
        (void)co_await call->Write(bytes);
      };
      thread.loop().Spawn(write(call_, response));
    });
  }
  int acked_eds_version() const { return acked_eds_.load(); }

 private:
  Task<Status> Serve(http2::ServerCall& call) {
    call_ = &call;
    while (true) {
      std::optional<std::string> bytes = co_await call.Read();
      if (!bytes.has_value()) break;
      envoy::service::discovery::v3::DiscoveryRequest request;
      if (!request.ParseFromString(*bytes)) break;
      if (request.response_nonce().empty()) {
        auto it = first_.find(request.type_url());
        if (it == first_.end()) continue;
        const Status written = co_await call.Write(it->second);
        if (!written.ok()) break;
        continue;
      }
      if (request.type_url() == kEdsType && !request.has_error_detail()) {
        acked_eds_.store(std::stoi(request.version_info()));
      }
    }
    call_ = nullptr;
    co_return OkStatus();
  }

  std::map<std::string, std::string> first_;
  http2::ServerCall* call_ = nullptr;  // server thread
  std::atomic<int> acked_eds_{0};
  std::optional<bench::AdsServerThread> server_;  // last: stopped before the rest goes
};

double CpuSeconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

bool WaitForAck(const ConfigServer& server, int version) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server.acked_eds_version() < version) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

void BM_ConfigChangingOneCluster(benchmark::State& state) {
  const int clusters = static_cast<int>(state.range(0));
  ConfigServer server(clusters);
  std::unique_ptr<LoopThread> control = std::move(*LoopThread::Start());
  std::shared_ptr<XdsClientPool> pool;
  std::unique_ptr<Channel> channel;
  clockid_t control_clock{};
  control->RunSync([&] {
    pthread_getcpuclockid(pthread_self(), &control_clock);
    Bootstrap bootstrap;
    XdsServerConfig xds_server;
    xds_server.server_uri = server.target();
    bootstrap.xds_servers.push_back(xds_server);
    bootstrap.node.id = "config-bench";
    pool = *XdsClientPool::Create(control->loop(), bootstrap);
    ChannelOptions options;
    options.xds_client_pool = pool;
    channel = std::move(*Channel::Create(control->loop(), "xds:///svc", options));
  });
  if (!WaitForAck(server, 1)) {
    state.SkipWithError("no EDS ACK");
  } else {
    // Every cluster's tree is built once the first config is in.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    control->RunSync([] {});
    int version = 1;
    const double cpu_before = CpuSeconds(control_clock);
    for (auto _ : state) {
      server.PushEndpoints(++version);
      if (!WaitForAck(server, version)) {
        state.SkipWithError("no EDS ACK");
        break;
      }
      control->RunSync([] {});
    }
    state.counters["control_cpu_us"] =
        (CpuSeconds(control_clock) - cpu_before) * 1e6 / static_cast<double>(state.iterations());
  }
  std::promise<void> shut;
  control->RunSync([&] {
    auto stop = [](Channel* channel, std::promise<void>* done) -> Task<void> {
      co_await channel->Shutdown();
      done->set_value();
    };
    control->loop().Spawn(stop(channel.get(), &shut));
  });
  shut.get_future().wait();
  control->RunSync([&] {
    channel.reset();
    pool.reset();
  });
}
BENCHMARK(BM_ConfigChangingOneCluster)
    ->ArgName("clusters")
    ->Arg(1)
    ->Arg(100)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
