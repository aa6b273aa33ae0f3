// The setting of the load reporting (LRS, A27/A42) tests: a Channel calls
// uxds TestService backends through Clusters whose lrs_server is `self`;
// the fake control plane is also the LRS server, and the test reads the
// LoadStatsRequests the channel sends it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "envoy/service/load_stats/v3/lrs.pb.h"
#include "grpc/testing/messages.pb.h"
#include "http2/server.h"
#include "support/fake_control_plane.h"
#include "support/test_support.h"
#include "support/xds_test_resources.h"
#include "test_service/test_service.h"
#include "uxds/client_channel.h"
#include "uxds/runtime.h"

namespace uxds::testing {

using envoy::service::load_stats::v3::LoadStatsRequest;
using envoy::service::load_stats::v3::LoadStatsResponse;
using std::chrono::milliseconds;
inline constexpr char kNodeId[] = "lrs-node";
inline constexpr milliseconds kWait{30000};  // generous: sanitizer builds on a busy machine
inline constexpr int kReportIntervalMs = 200;

// An EDS cluster that reports load to the control plane; with
// `max_requests`, its DEFAULT circuit-breaking threshold (A32).
inline ResponseResource ReportingCluster(const std::string& name, const std::string& service_name,
                                         std::optional<uint32_t> max_requests = std::nullopt) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name(name);
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  cluster.mutable_eds_cluster_config()->set_service_name(service_name);
  cluster.mutable_lrs_server()->mutable_self();
  if (max_requests.has_value()) {
    auto* threshold = cluster.mutable_circuit_breakers()->add_thresholds();
    threshold->set_priority(envoy::config::core::v3::DEFAULT);
    threshold->mutable_max_requests()->set_value(*max_requests);
  }
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

// One locality per address (zones z0, z1, ...), and optionally a drop
// category that drops every call.
inline ResponseResource EndpointsByZone(const std::string& service_name,
                                        const std::vector<std::string>& addresses,
                                        const std::string& drop_all_category = "") {
  envoy::config::endpoint::v3::ClusterLoadAssignment assignment;
  assignment.set_cluster_name(service_name);
  for (size_t i = 0; i < addresses.size(); ++i) {
    auto* locality = assignment.add_endpoints();
    locality->mutable_locality()->set_region("r");
    locality->mutable_locality()->set_zone("z" + std::to_string(i));
    locality->mutable_load_balancing_weight()->set_value(1);
    const size_t colon = addresses[i].rfind(':');
    auto* address = locality->add_lb_endpoints()
                        ->mutable_endpoint()
                        ->mutable_address()
                        ->mutable_socket_address();
    address->set_address(addresses[i].substr(0, colon));
    address->set_port_value(static_cast<uint32_t>(std::stoul(addresses[i].substr(colon + 1))));
  }
  if (!drop_all_category.empty()) {
    auto* drop = assignment.mutable_policy()->add_drop_overloads();
    drop->set_category(drop_all_category);
    drop->mutable_drop_percentage()->set_numerator(100);
  }
  return ResponseResource(kEdsType, assignment.SerializeAsString());
}

// send_all_clusters unless `clusters` names some.
inline std::string LrsResponse(milliseconds interval,
                               const std::vector<std::string>& clusters = {}) {
  LoadStatsResponse response;
  response.set_send_all_clusters(clusters.empty());
  for (const std::string& c : clusters) response.add_clusters(c);
  response.mutable_load_reporting_interval()->set_nanos(
      static_cast<int32_t>(interval.count() * 1000000));
  return response.SerializeAsString();
}

// Counts of one locality summed over reports.
struct LocalityTotals {
  uint64_t issued = 0;
  uint64_t succeeded = 0;
  uint64_t failed = 0;
  uint64_t in_progress = 0;  // of the latest report
};

class LoadReportingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cp_ = FakeControlPlane::Start(cp_options_);
    ASSERT_NE(cp_, nullptr);
    backends_ = *LoopThread::Start();
    backends_->RunSync([&] {
      for (int i = 0; i < 2; ++i) {
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
      server.channel_credentials = credentials_;
      bootstrap.xds_servers.push_back(server);
      bootstrap.node.id = kNodeId;
      pool_ = *XdsClientPool::Create(control_->loop(), bootstrap);
    });
  }

  void TearDown() override {
    ShutDown(channel_);
    ShutDown(second_channel_);
    if (control_ != nullptr) control_->RunSync([&] { pool_.reset(); });
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

  void ShutDown(std::unique_ptr<Channel>& channel) {
    if (channel == nullptr) return;
    std::promise<void> done;
    control_->RunSync([&] {
      auto shutdown = [](Channel* channel, std::promise<void>* done) -> Task<void> {
        co_await channel->Shutdown();
        done->set_value();
      };
      control_->loop().Spawn(shutdown(channel.get(), &done));
    });
    done.get_future().wait();
    control_->RunSync([&] { channel.reset(); });
  }

  // An xds:///svc channel whose routes send everything to `cluster`.
  void SetUpService(const std::string& cluster, const std::string& drop_all_category = "") {
    ASSERT_TRUE(cp_->SetResources(
        kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", cluster}})}}, "1"));
    ASSERT_TRUE(
        cp_->SetResources(kCdsType, {{cluster, ReportingCluster(cluster, "s-" + cluster)}}, "1"));
    ASSERT_TRUE(cp_->SetResources(
        kEdsType,
        {{"s-" + cluster, EndpointsByZone("s-" + cluster, addresses_, drop_all_category)}}, "1"));
    CreateChannel();
  }

  void CreateChannel() { channel_ = MakeChannel(); }

  // A37: CDS "agg", the aggregate of leaves "a" then "b" (these Clusters).
  void ServeAggregateOf(const ResponseResource& a, const ResponseResource& b) {
    ASSERT_TRUE(cp_->SetResources(
        kCdsType, {{"agg", AggregateCluster("agg", {"a", "b"})}, {"a", a}, {"b", b}}, "1"));
  }
  // EDS of the leaves' services "s-a" and "s-b", at `version`.
  void ServeLeafEndpoints(const ResponseResource& endpoints_a, const ResponseResource& endpoints_b,
                          const std::string& version) {
    ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-a", endpoints_a}, {"s-b", endpoints_b}}, version));
  }

  std::unique_ptr<Channel> MakeChannel() {
    std::unique_ptr<Channel> made;
    control_->RunSync([&] {
      ChannelOptions options;
      options.xds_client_pool = pool_;
      options.initial_backoff = milliseconds(100);
      options.max_backoff = milliseconds(500);
      options.load_reporting.min_report_interval = milliseconds(50);
      options.load_reporting.connection.backoff_initial = milliseconds(100);
      options.load_reporting.connection.backoff_max = milliseconds(500);
      options.load_reporting.max_report_interval = max_report_interval_;
      auto channel = Channel::Create(control_->loop(), "xds:///svc", options);
      ASSERT_TRUE(channel.ok()) << channel.status().ToString();
      made = *std::move(channel);
    });
    return made;
  }

  // One UnaryCall; `fail_with` non-zero asks the backend for that status.
  StatusOr<UnaryResponse> Call(int fail_with = 0,
                               const std::string& method = test_service::kUnaryCall) {
    return CallOn(*channel_, fail_with, method);
  }
  StatusOr<UnaryResponse> CallOn(Channel& channel, int fail_with = 0,
                                 const std::string& method = test_service::kUnaryCall) {
    grpc::testing::SimpleRequest request;
    if (fail_with != 0) request.mutable_response_status()->set_code(fail_with);
    std::promise<StatusOr<UnaryResponse>> result;
    control_->RunSync([&] {
      auto call = [](Channel* channel, std::string method, std::string request,
                     std::promise<StatusOr<UnaryResponse>>* out) -> Task<void> {
        CallOptions options;
        options.timeout = std::chrono::seconds(10);
        options.wait_for_ready = true;
        out->set_value(co_await channel->UnaryCall(std::move(method), std::move(request), options));
      };
      // EmptyCall takes an Empty message: no bytes.
      control_->loop().Spawn(
          call(&channel, method,
               method == test_service::kUnaryCall ? request.SerializeAsString() : std::string(),
               &result));
    });
    return result.get_future().get();
  }

  // The LRS stream's first request: the node, with the client feature.
  int64_t AcceptLrsStream(const std::vector<std::string>& clusters = {}) {
    return AcceptLrsStreamWith(LrsResponse(milliseconds(kReportIntervalMs), clusters));
  }
  // The same, answered with `response` (any bytes).
  int64_t AcceptLrsStreamWith(const std::string& response) {
    std::optional<int64_t> stream = cp_->WaitForLrsStreamOpened(kWait);
    EXPECT_TRUE(stream.has_value());
    if (!stream.has_value()) return 0;
    std::optional<ObservedLrsRequest> first = cp_->NextLrsRequest(kWait, *stream);
    EXPECT_TRUE(first.has_value());
    if (!first.has_value()) return *stream;
    LoadStatsRequest request;
    EXPECT_TRUE(request.ParseFromString(first->bytes));
    EXPECT_EQ(request.node().id(), kNodeId);
    bool feature = false;
    for (const auto& f : request.node().client_features()) {
      feature = feature || f == "envoy.lrs.supports_send_all_clusters";
    }
    EXPECT_TRUE(feature) << "client features lack envoy.lrs.supports_send_all_clusters";
    EXPECT_EQ(request.cluster_stats_size(), 0);
    EXPECT_TRUE(cp_->SendLrsResponse(response, *stream));
    return *stream;
  }

  // Reads reports of `stream` until `done` holds for what they add up to.
  template <typename Done>
  void ReadReportsUntil(int64_t stream, Done done) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!done()) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      ASSERT_GT(left.count(), 0) << "the reports never added up";
      std::optional<ObservedLrsRequest> report = cp_->NextLrsRequest(left, stream);
      ASSERT_TRUE(report.has_value()) << "no load report within " << kWait.count() << " ms";
      RecordReport(*report);
      if (HasFatalFailure()) return;
    }
  }

  // Adds what one report says to the totals below.
  void RecordReport(const ObservedLrsRequest& report) {
    LoadStatsRequest request;
    ASSERT_TRUE(request.ParseFromString(report.bytes));
    EXPECT_FALSE(request.has_node()) << "only a stream's first request carries the node";
    for (const auto& cluster : request.cluster_stats()) {
      reported_clusters_.insert(cluster.cluster_name());
      EXPECT_EQ(cluster.cluster_service_name(), "s-" + cluster.cluster_name());
      // The interval the client measured: at least the one it was told.
      const auto& interval = cluster.load_report_interval();
      EXPECT_GE(interval.seconds() * 1000 + interval.nanos() / 1000000, min_interval_ms_);
      EXPECT_EQ(
          std::count_if(request.cluster_stats().begin(), request.cluster_stats().end(),
                        [&](const auto& c) { return c.cluster_name() == cluster.cluster_name(); }),
          1)
          << "one ClusterStats per cluster and report";
      for (const auto& l : cluster.upstream_locality_stats()) {
        EXPECT_EQ(l.locality().region(), "r");
        for (LocalityTotals* totals : {&localities_[l.locality().zone()],
                                       &by_cluster_[cluster.cluster_name()][l.locality().zone()]}) {
          totals->issued += l.total_issued_requests();
          totals->succeeded += l.total_successful_requests();
          totals->failed += l.total_error_requests();
          totals->in_progress = l.total_requests_in_progress();
        }
      }
      for (const auto& dropped : cluster.dropped_requests()) {
        dropped_[dropped.category()] += dropped.dropped_count();
        dropped_by_cluster_[cluster.cluster_name()][dropped.category()] += dropped.dropped_count();
      }
      total_dropped_ += cluster.total_dropped_requests();
      total_dropped_by_cluster_[cluster.cluster_name()] += cluster.total_dropped_requests();
    }
  }

  // What SetUp() starts the control plane with and the bootstrap names
  // (a TLS test sets both first).
  FakeControlPlaneOptions cp_options_;
  XdsChannelCredentials credentials_;
  // LoadReportingOptions::max_report_interval of the channels.
  milliseconds max_report_interval_{3600 * 1000};
  // The shortest load_report_interval a report may carry.
  int64_t min_interval_ms_ = kReportIntervalMs;
  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> backends_;
  std::vector<std::unique_ptr<http2::Server>> servers_;
  std::vector<std::string> addresses_;
  std::unique_ptr<LoopThread> control_;
  std::shared_ptr<XdsClientPool> pool_;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<Channel> second_channel_;
  std::map<std::string, LocalityTotals> localities_;  // by zone
  // By cluster, then zone.
  std::map<std::string, std::map<std::string, LocalityTotals>> by_cluster_;
  std::map<std::string, uint64_t> dropped_;
  uint64_t total_dropped_ = 0;
  // By cluster (then category).
  std::map<std::string, std::map<std::string, uint64_t>> dropped_by_cluster_;
  std::map<std::string, uint64_t> total_dropped_by_cluster_;
  std::set<std::string> reported_clusters_;
};

}  // namespace uxds::testing
