// An in-process ADS server that answers with one prebuilt CDS response of N
// Clusters, on uxds's own HTTP/2 server and its own loop thread: for
// xds_scale_bench and cds_response_server (a control plane that costs next
// to nothing, so what is measured is the client).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "http2/server.h"
#include "uxds/runtime.h"

namespace uxds::bench {

using Clock = std::chrono::steady_clock;
constexpr char kCdsType[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr char kAdsMethod[] =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

inline std::string ClusterName(int i) { return "cluster-" + std::to_string(i); }

// With `invalid` > 0, every `invalid`-th Cluster fails validation (a
// negative connect_timeout), so the response is NACKed.
inline std::string CdsResponse(int n, int invalid = 0) {
  envoy::service::discovery::v3::DiscoveryResponse response;
  response.set_version_info("1");
  response.set_type_url(kCdsType);
  response.set_nonce("1");
  for (int i = 0; i < n; ++i) {
    envoy::config::cluster::v3::Cluster cluster;
    cluster.set_name(ClusterName(i));
    cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
    cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
    cluster.mutable_eds_cluster_config()->set_service_name("service-" + std::to_string(i));
    cluster.mutable_connect_timeout()->set_seconds(invalid > 0 && i % invalid == 0 ? -1 : 1);
    auto* any = response.add_resources();
    any->set_type_url(kCdsType);
    any->set_value(cluster.SerializeAsString());
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

}  // namespace uxds::bench
