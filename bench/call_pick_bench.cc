// What a call's route + hash + pick costs through the Channel's call path
// (the part of a call before its stream): 10 routes with header matchers
// (the call matches the last), a header hash policy, a ring of 4096 entries
// over 4 READY endpoints, 16 metadata entries per call. Beside it, in the
// same run, the path calls took before routes were compiled: the metadata
// copied into a vector, routing::SelectRoute and ComputeRequestHash over
// the parsed RouteConfiguration (header values joined into strings), the
// cluster's name copied and looked up in a std::map, the peer's address
// copied (what PickForCall did; its coroutine frame, one more allocation
// per call, is left out, so the baseline is a lower bound).
//
// Everything is real: an in-process ADS server sends the Listener, Cluster
// and endpoints; the channel connects to 4 uxds HTTP/2 servers through
// calls until each has answered. Each iteration picks for a new x-user
// value (a counter counted up in the call's metadata, so the ring is read
// at random places while the metadata is as hot as a call's own), on the
// channel's loop thread (where calls pick today), and ends the pick's A32
// count as a call that did not start.
// allocs_per_call counts operator new on that thread while the loop runs.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ads_response_server.h"
#include "client/channel_impl.h"
#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "http2/server.h"
#include "lb/cluster_impl.h"
#include "support/allocation_counter.h"
#include "test_service/test_service.h"
#include "uxds/client_channel.h"
#include "uxds/runtime.h"
#include "xds/routing/route_selection.h"

namespace uxds {

// The bench's window into the channel: both paths need its routes,
// clusters and picker slots.
struct client_internal::ChannelProbe {
  static Channel::Impl& Of(Channel& channel) { return *channel.impl_; }

  // Today's path: PickNow() on the compiled routes.
  static bool PickNow(Channel& channel, std::string_view method,
                      const std::vector<std::pair<std::string, std::string>>& metadata) {
    Channel::Impl& impl = Of(channel);
    CallRequest request(method, metadata);
    std::optional<Channel::Impl::CallRoute> route;
    Channel::Impl::PickedEndpoint picked;
    Channel::Impl::PickMiss miss;
    if (!impl.PickNow(request, route, picked, miss)) return false;
    benchmark::DoNotOptimize(picked.connection);
    CallNotStarted(picked.call_end);
    return true;
  }

  // The path before: what PickForCall did for a READY pick.
  static bool PickAsBefore(Channel& channel, const std::string& method,
                           const std::vector<std::pair<std::string, std::string>>& metadata) {
    Channel::Impl& impl = Of(channel);
    std::vector<PickHeader> headers;
    for (const auto& [name, value] : metadata) headers.push_back({name, value});
    const routing::RpcView rpc{method, headers};
    struct OldRoute {
      std::shared_ptr<const XdsConfig> config;
      std::string cluster;
      uint64_t hash = 0;
    } route;
    route.config = impl.config;
    route.hash = ThreadRandom();
    const RouteConfigResource::Route* selected =
        routing::SelectRoute(*impl.config->virtual_host, rpc, [] { return ThreadRandom(); });
    if (selected == nullptr) return false;
    const auto* action = std::get_if<RouteConfigResource::Route::RouteAction>(&selected->action);
    if (action == nullptr) return false;
    route.cluster =
        std::get<RouteConfigResource::Route::RouteAction::ClusterName>(action->cluster).name;
    if (std::optional<uint64_t> computed =
            routing::ComputeRequestHash(action->hash_policies, rpc, impl.channel_id)) {
      route.hash = *computed;
    }
    auto cluster = impl.clusters.find(route.cluster);
    if (cluster == impl.clusters.end() || cluster->second.lb == nullptr) return false;
    PickArgs args;
    args.hash = route.hash;
    args.metadata = metadata;
    Subchannel* subchannel = nullptr;
    PickResult call_end;
    {
      PickScope scope(cluster->second.lb->picker_slot());
      const PickResult picked = scope.Pick(args);
      if (picked.kind != PickResult::Kind::kComplete) return false;
      subchannel = picked.endpoint->subchannel;
      call_end = picked;
    }
    if (subchannel == nullptr || subchannel->connection() == nullptr) return false;
    struct OldPicked {
      http2::ClientConnection* connection;
      std::string peer;
      std::shared_ptr<SubchannelPool> pool;
      SubchannelRef subchannel;
      // It held the A32 counter by a shared_ptr (counters have no
      // shared_from_this now): the cluster tree's, one reference count the
      // same.
      std::shared_ptr<void> counter;
    } picked{subchannel->connection(), subchannel->address(), impl.subchannels,
             SubchannelRef(subchannel), cluster->second.lb};
    benchmark::DoNotOptimize(picked.connection);
    CallNotStarted(call_end);
    return true;
  }
};

namespace {

using client_internal::ChannelProbe;

constexpr char kLdsType[] = "type.googleapis.com/envoy.config.listener.v3.Listener";
constexpr char kCdsType[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr char kEdsType[] = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
constexpr int kRoutes = 10;
constexpr int kServers = 4;

std::string Response(const std::string& type, const std::string& resource) {
  envoy::service::discovery::v3::DiscoveryResponse response;
  response.set_version_info("1");
  response.set_type_url(type);
  response.set_nonce("1");
  auto* any = response.add_resources();
  any->set_type_url(type);
  any->set_value(resource);
  return response.SerializeAsString();
}

// Route i: any path, x-tenant == "tenant-i" and an x-region containing
// "eu" (any case), to cluster "ring", hashing x-user.
std::string ListenerBytes() {
  using envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
  HttpConnectionManager hcm;
  auto* vhost = hcm.mutable_route_config()->add_virtual_hosts();
  vhost->add_domains("*");
  for (int i = 0; i < kRoutes; ++i) {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix("/grpc.testing.");
    auto* tenant = route->mutable_match()->add_headers();
    tenant->set_name("x-tenant");
    tenant->mutable_string_match()->set_exact("tenant-" + std::to_string(i));
    auto* region = route->mutable_match()->add_headers();
    region->set_name("x-region");
    region->mutable_string_match()->set_contains("eu");
    region->mutable_string_match()->set_ignore_case(true);
    route->mutable_route()->set_cluster("ring");
    route->mutable_route()->add_hash_policy()->mutable_header()->set_header_name("x-user");
  }
  auto* router = hcm.add_http_filters();
  router->set_name("router");
  router->mutable_typed_config()->set_type_url(
      "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router");
  envoy::config::listener::v3::Listener listener;
  listener.set_name("svc");
  auto* api = listener.mutable_api_listener()->mutable_api_listener();
  api->set_type_url(
      "type.googleapis.com/"
      "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager");
  api->set_value(hcm.SerializeAsString());
  return listener.SerializeAsString();
}

std::string ClusterBytes() {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name("ring");
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  cluster.set_lb_policy(envoy::config::cluster::v3::Cluster::RING_HASH);
  cluster.mutable_ring_hash_lb_config()->mutable_minimum_ring_size()->set_value(4096);
  cluster.mutable_ring_hash_lb_config()->mutable_maximum_ring_size()->set_value(4096);
  return cluster.SerializeAsString();
}

std::string EndpointsBytes(const std::vector<uint16_t>& ports) {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name("ring");
  auto* locality = assignment.add_endpoints();
  locality->mutable_locality()->set_zone("z1");
  locality->mutable_load_balancing_weight()->set_value(1);
  for (uint16_t port : ports) {
    auto* address = locality->add_lb_endpoints()
                        ->mutable_endpoint()
                        ->mutable_address()
                        ->mutable_socket_address();
    address->set_address("127.0.0.1");
    address->set_port_value(port);
  }
  return assignment.SerializeAsString();
}

// The next x-user value: its 12 digits counted up by one, in place (what
// the caller writes per call costs a digit or two, not a conversion).
void NextUser(std::string& value) {
  for (size_t i = value.size(); i-- > value.size() - 12;) {
    if (value[i] != '9') {
      ++value[i];
      return;
    }
    value[i] = '0';
  }
}

// `user` as the 12 digits of an x-user value "user-DDDDDDDDDDDD".
void WriteUser(std::string& value, uint64_t user) {
  for (size_t i = value.size(); i-- > value.size() - 12;) {
    value[i] = static_cast<char>('0' + user % 10);
    user /= 10;
  }
}

// 16 entries; the one hashed, x-user, differs per user.
std::vector<std::pair<std::string, std::string>> Metadata(uint64_t user) {
  std::vector<std::pair<std::string, std::string>> metadata;
  for (int i = 0; i < 13; ++i) {
    metadata.emplace_back("x-app-header-" + std::to_string(i), "a value of some length");
  }
  metadata.emplace_back("x-region", "west-EU-1");
  metadata.emplace_back("x-tenant", "tenant-" + std::to_string(kRoutes - 1));
  metadata.emplace_back("x-user", "user-000000000000");
  WriteUser(metadata.back().second, user);
  return metadata;
}

class Fixture {
 public:
  static Fixture& Get() {
    static Fixture* fixture = new Fixture();  // lives until exit
    return *fixture;
  }

  // Runs `fn` on the channel's loop thread.
  void OnChannelLoop(std::function<void()> fn) { control_->RunSync(std::move(fn)); }
  Channel& channel() { return *channel_; }

 private:
  Fixture() {
    servers_thread_ = std::move(*LoopThread::Start());
    auto registry = std::make_shared<http2::ServiceRegistry>();
    test_service::RegisterTestService(*registry, "pick-bench");
    std::vector<uint16_t> ports;
    servers_thread_->RunSync([&] {
      for (int i = 0; i < kServers; ++i) {
        servers_.push_back(std::move(*http2::Server::Listen(
            servers_thread_->loop(), SocketAddress::Loopback4(0), registry)));
        servers_thread_->loop().Spawn(servers_.back()->Serve());
        ports.push_back(servers_.back()->port());
      }
    });
    first_[kLdsType] = Response(kLdsType, ListenerBytes());
    first_[kCdsType] = Response(kCdsType, ClusterBytes());
    first_[kEdsType] = Response(kEdsType, EndpointsBytes(ports));
    ads_.emplace([this](http2::ServerCall& call) { return Serve(call); });
    control_ = std::move(*LoopThread::Start());
    control_->RunSync([&] {
      Bootstrap bootstrap;
      XdsServerConfig xds_server;
      xds_server.server_uri = ads_->target();
      bootstrap.xds_servers.push_back(xds_server);
      bootstrap.node.id = "pick-bench";
      pool_ = *XdsClientPool::Create(control_->loop(), bootstrap);
      ChannelOptions options;
      options.xds_client_pool = pool_;
      channel_ = std::move(*Channel::Create(control_->loop(), "xds:///svc", options));
    });
    ConnectEveryEndpoint();
  }

  // Calls with wait_for_ready until every server has answered: ring_hash
  // connects an endpoint when a pick lands on it.
  void ConnectEveryEndpoint() {
    std::promise<std::set<std::string>> answered;
    control_->RunSync([&] {
      auto calls = [](Fixture* self, std::promise<std::set<std::string>>* done) -> Task<void> {
        std::set<std::string> peers;
        for (int user = 0; user < 4096 && peers.size() < kServers; ++user) {
          CallOptions options;
          options.metadata = Metadata(user);
          options.wait_for_ready = true;
          options.timeout = std::chrono::seconds(10);
          StatusOr<UnaryResponse> reply = co_await self->channel_->UnaryCall(
              test_service::kEmptyCall, std::string(), std::move(options));
          if (reply.ok()) peers.insert(reply->peer);
        }
        done->set_value(std::move(peers));
      };
      control_->loop().Spawn(calls(this, &answered));
    });
    if (answered.get_future().get().size() != kServers) {
      std::fprintf(stderr, "call_pick_bench: not every endpoint answered\n");
      std::abort();
    }
  }

  Task<Status> Serve(http2::ServerCall& call) {
    while (true) {
      std::optional<std::string> bytes = co_await call.Read();
      if (!bytes.has_value()) break;
      envoy::service::discovery::v3::DiscoveryRequest request;
      if (!request.ParseFromString(*bytes)) break;
      if (!request.response_nonce().empty()) continue;  // an ACK
      auto it = first_.find(request.type_url());
      if (it == first_.end()) continue;
      if (!(co_await call.Write(it->second)).ok()) break;
    }
    co_return OkStatus();
  }

  std::unique_ptr<LoopThread> servers_thread_;
  std::vector<std::unique_ptr<http2::Server>> servers_;
  std::map<std::string, std::string> first_;
  std::optional<bench::AdsServerThread> ads_;
  std::unique_ptr<LoopThread> control_;
  std::shared_ptr<XdsClientPool> pool_;
  std::unique_ptr<Channel> channel_;
};

template <bool (*Pick)(Channel&, const std::string&,
                       const std::vector<std::pair<std::string, std::string>>&)>
void RunPicks(benchmark::State& state) {
  Fixture& fixture = Fixture::Get();
  const std::string method = test_service::kEmptyCall;
  uint64_t picks = 0;
  uint64_t allocated = 0;
  bool failed = false;
  fixture.OnChannelLoop([&] {
    // One call's metadata, its x-user value rewritten in place for each
    // pick: a new hash every time, in metadata the caller has just written.
    std::vector<std::pair<std::string, std::string>> metadata = Metadata(0);
    std::string& user = metadata.back().second;
    testing::StartCountingAllocations();
    for (auto _ : state) {
      NextUser(user);
      ++picks;
      if (!Pick(fixture.channel(), method, metadata)) {
        failed = true;
        break;
      }
    }
    allocated = testing::StopCountingAllocations();
  });
  if (failed) {
    state.SkipWithError("a pick was not READY");
    return;
  }
  state.counters["allocs_per_call"] =
      static_cast<double>(allocated) / static_cast<double>(std::max<uint64_t>(picks, 1));
}

bool PickNow(Channel& channel, const std::string& method,
             const std::vector<std::pair<std::string, std::string>>& metadata) {
  return ChannelProbe::PickNow(channel, method, metadata);
}
bool PickAsBefore(Channel& channel, const std::string& method,
                  const std::vector<std::pair<std::string, std::string>>& metadata) {
  return ChannelProbe::PickAsBefore(channel, method, metadata);
}

void BM_CallRouteHashPick(benchmark::State& state) { RunPicks<&PickNow>(state); }
void BM_CallRouteHashPickAsBefore(benchmark::State& state) { RunPicks<&PickAsBefore>(state); }

// Compare them in one run with --benchmark_repetitions=N
// --benchmark_enable_random_interleaving=true (docs/performance.md).
BENCHMARK(BM_CallRouteHashPick)->UseRealTime();
BENCHMARK(BM_CallRouteHashPickAsBefore)->UseRealTime();

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
