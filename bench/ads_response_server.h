// An in-process ADS server that answers with one prebuilt CDS response of N
// Clusters, on uxds's own HTTP/2 server and its own loop thread: for
// xds_scale_bench and cds_response_server (a control plane that costs next
// to nothing, so what is measured is the client). AdsByTypeServer answers
// several types' first requests (xds_memory_bench).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "http2/server.h"
#include "uxds/resources/cluster.h"
#include "uxds/runtime.h"

namespace uxds::bench {

using Clock = std::chrono::steady_clock;
constexpr char kCdsType[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr char kEdsType[] = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
constexpr char kAdsMethod[] =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

inline std::string ClusterName(int i) { return "cluster-" + std::to_string(i); }

// Cluster i's EDS service name in CdsResponse().
inline std::string ServiceName(int i) { return "service-" + std::to_string(i); }

// With `invalid` > 0, every `invalid`-th Cluster fails validation (a
// negative connect_timeout), so the response is NACKed. With `ring_hash`,
// the Clusters ask for RING_HASH (A42 default sizes), which connects to an
// endpoint only when a pick needs it; the default, ROUND_ROBIN, connects to
// every endpoint at once.
inline std::string CdsResponse(int n, int invalid = 0, bool ring_hash = false) {
  envoy::service::discovery::v3::DiscoveryResponse response;
  response.set_version_info("1");
  response.set_type_url(kCdsType);
  response.set_nonce("1");
  for (int i = 0; i < n; ++i) {
    envoy::config::cluster::v3::Cluster cluster;
    cluster.set_name(ClusterName(i));
    cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
    cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
    cluster.mutable_eds_cluster_config()->set_service_name(ServiceName(i));
    if (ring_hash) cluster.set_lb_policy(envoy::config::cluster::v3::Cluster::RING_HASH);
    cluster.mutable_connect_timeout()->set_seconds(invalid > 0 && i % invalid == 0 ? -1 : 1);
    auto* any = response.add_resources();
    any->set_type_url(kCdsType);
    any->set_value(cluster.SerializeAsString());
  }
  return response.SerializeAsString();
}

// One ClusterLoadAssignment named `service`: `endpoints` distinct endpoints
// in priority 0, `per_locality` to a locality (weight 1 each), on private
// addresses starting at 10.0.0.0 + `first` (never connected to: ring_hash
// connects on picks only).
inline std::string EndpointsBytes(const std::string& service, int endpoints, int per_locality,
                                  int first = 0) {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name(service);
  envoy::config::endpoint::v3::LocalityLbEndpoints* locality = nullptr;
  for (int i = 0; i < endpoints; ++i) {
    if (i % per_locality == 0) {
      locality = assignment.add_endpoints();
      locality->mutable_locality()->set_region("region");
      locality->mutable_locality()->set_zone("zone-" + std::to_string(i / per_locality));
      locality->mutable_load_balancing_weight()->set_value(1);
    }
    const int n = first + i;
    auto* address = locality->add_lb_endpoints()
                        ->mutable_endpoint()
                        ->mutable_address()
                        ->mutable_socket_address();
    address->set_address("10." + std::to_string((n >> 16) & 255) + "." +
                         std::to_string((n >> 8) & 255) + "." + std::to_string(n & 255));
    address->set_port_value(8080);
  }
  return assignment.SerializeAsString();
}

// A Cluster as the decoder makes it from a RING_HASH Cluster with A42's
// default sizes and EDS service ServiceName(0): for benchmarks that build a
// picker without watching the Cluster. ring_hash is the policy whose picker
// works as soon as it has endpoints (picks start connections); round_robin
// would connect to every endpoint at once and have nothing to pick from
// before one is READY.
inline ClusterResource RingHashClusterResource() {
  ClusterResource cluster;
  cluster.type = ClusterResource::Eds{ServiceName(0)};
  cluster.lb_policy.weighted_locality = false;
  cluster.lb_policy.endpoint_picking = ClusterResource::LbPolicy::EndpointPicking::kRingHash;
  return cluster;
}

// A DiscoveryResponse of `type` carrying `resources` (serialized).
inline std::string DiscoveryResponseBytes(const std::string& type,
                                          const std::vector<std::string>& resources) {
  envoy::service::discovery::v3::DiscoveryResponse response;
  response.set_version_info("1");
  response.set_type_url(type);
  response.set_nonce("1");
  for (const std::string& bytes : resources) {
    auto* any = response.add_resources();
    any->set_type_url(type);
    any->set_value(bytes);
  }
  return response.SerializeAsString();
}

// A uxds HTTP/2 server on 127.0.0.1 and a loop thread of its own, serving
// the ADS method with `serve`; stopped and joined by its destructor (declare
// it after whatever `serve` uses, so it goes first).
class AdsServerThread {
 public:
  explicit AdsServerThread(std::function<Task<Status>(http2::ServerCall&)> serve) {
    thread_ = std::move(*LoopThread::Start());
    auto registry = std::make_shared<http2::ServiceRegistry>();
    registry->Register(kAdsMethod, std::move(serve));
    http2::ServerOptions options;
    options.max_receive_message_size = 64 << 20;
    thread_->RunSync([&] {
      server_ = std::move(
          *http2::Server::Listen(thread_->loop(), SocketAddress::Loopback4(0), registry, options));
      thread_->loop().Spawn(server_->Serve());
    });
  }
  ~AdsServerThread() {
    std::promise<void> done;
    thread_->RunSync([&] {
      auto stop = [](http2::Server* server, std::promise<void>* done) -> Task<void> {
        co_await server->Shutdown(std::chrono::milliseconds(0));
        done->set_value();
      };
      thread_->loop().Spawn(stop(server_.get(), &done));
    });
    done.get_future().wait();
    thread_->RunSync([&] { server_.reset(); });
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  LoopThread& thread() { return *thread_; }

 private:
  std::unique_ptr<LoopThread> thread_;
  std::unique_ptr<http2::Server> server_;
};

// The server side: answers the first CDS request with `response`, and then
// each of the client's next `resends` requests (its ACKs or NACKs) with the
// same response again, at once, as go-control-plane's SotW server answers
// NACKs.
class AdsServer {
 public:
  explicit AdsServer(std::string response, int resends = 0)
      : response_(std::move(response)), resends_(resends) {}
  std::string target() const { return server_.target(); }
  // When the response write began (the first byte went to the socket).
  Clock::time_point written_at() const { return written_at_.load(); }

 private:
  Task<Status> Serve(http2::ServerCall& call) {
    std::optional<std::string> request = co_await call.Read();
    if (!request.has_value()) co_return OkStatus();
    written_at_.store(Clock::now());
    const Status written = co_await call.Write(response_);
    if (!written.ok()) co_return written;
    int answers = 0;
    while (true) {
      std::optional<std::string> next = co_await call.Read();
      if (!next.has_value()) break;
      answers_.store(++answers);
      if (answers <= resends_) {
        const Status rewritten = co_await call.Write(response_);
        if (!rewritten.ok()) co_return rewritten;
      }
    }
    co_return OkStatus();
  }

 public:
  // The client's requests after its first one: its ACKs and NACKs.
  int answers() const { return answers_.load(); }

 private:
  const std::string response_;
  const int resends_;
  std::atomic<int> answers_{0};
  std::atomic<Clock::time_point> written_at_{};
  AdsServerThread server_{[this](http2::ServerCall& call) { return Serve(call); }};
};

// Answers the first request of each type it has a response for (by the
// request's type_url) with that response, once; then only reads. `on_ack`
// runs (on the server's loop thread) for each later request that carries
// no error, i.e. an ACK.
class AdsByTypeServer {
 public:
  AdsByTypeServer(std::map<std::string, std::string> responses,
                  std::function<void(const std::string& type)> on_ack)
      : responses_(std::move(responses)), on_ack_(std::move(on_ack)) {
    server_.emplace([this](http2::ServerCall& call) { return Serve(call); });
  }
  std::string target() const { return server_->target(); }

 private:
  Task<Status> Serve(http2::ServerCall& call) {
    while (true) {
      std::optional<std::string> bytes = co_await call.Read();
      if (!bytes.has_value()) break;
      envoy::service::discovery::v3::DiscoveryRequest request;
      if (!request.ParseFromString(*bytes)) break;
      if (!request.response_nonce().empty()) {
        if (!request.has_error_detail() && on_ack_) on_ack_(request.type_url());
        continue;
      }
      auto it = responses_.find(request.type_url());
      if (it == responses_.end()) continue;
      const Status written = co_await call.Write(it->second);
      if (!written.ok()) co_return written;
    }
    co_return OkStatus();
  }

  const std::map<std::string, std::string> responses_;
  const std::function<void(const std::string& type)> on_ack_;
  std::optional<AdsServerThread> server_;  // last: stopped before the rest goes
};

}  // namespace uxds::bench
