// Load reporting (LRS, A27/A42) end to end on loopback: a Channel calls
// uxds TestService backends through a Cluster whose lrs_server is `self`;
// the fake control plane is also the LRS server, and the test reads the
// LoadStatsRequests the channel sends it.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <memory>
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
namespace {

using envoy::service::load_stats::v3::LoadStatsRequest;
using envoy::service::load_stats::v3::LoadStatsResponse;
using std::chrono::milliseconds;
constexpr char kNodeId[] = "lrs-node";
constexpr milliseconds kWait{30000};  // generous: sanitizer builds on a busy machine
constexpr int kReportIntervalMs = 200;

ResponseResource ReportingCluster(const std::string& name, const std::string& service_name) {
  envoy::config::cluster::v3::Cluster cluster;
  cluster.set_name(name);
  cluster.set_type(envoy::config::cluster::v3::Cluster::EDS);
  cluster.mutable_eds_cluster_config()->mutable_eds_config()->mutable_ads();
  cluster.mutable_eds_cluster_config()->set_service_name(service_name);
  cluster.mutable_lrs_server()->mutable_self();
  return ResponseResource(kCdsType, cluster.SerializeAsString());
}

// One locality per address (zones z0, z1, ...), and optionally a drop
// category that drops every call.
ResponseResource EndpointsByZone(const std::string& service_name,
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
std::string LrsResponse(milliseconds interval, const std::vector<std::string>& clusters = {}) {
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
    cp_ = FakeControlPlane::Start();
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
      bootstrap.xds_servers.push_back(server);
      bootstrap.node.id = kNodeId;
      pool_ = *XdsClientPool::Create(control_->loop(), bootstrap);
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

  void CreateChannel() {
    control_->RunSync([&] {
      ChannelOptions options;
      options.xds_client_pool = pool_;
      options.initial_backoff = milliseconds(100);
      options.max_backoff = milliseconds(500);
      options.load_reporting.min_report_interval = milliseconds(50);
      options.load_reporting.connection.backoff_initial = milliseconds(100);
      options.load_reporting.connection.backoff_max = milliseconds(500);
      auto channel = Channel::Create(control_->loop(), "xds:///svc", options);
      ASSERT_TRUE(channel.ok()) << channel.status().ToString();
      channel_ = *std::move(channel);
    });
  }

  // One UnaryCall; `fail_with` non-zero asks the backend for that status.
  StatusOr<UnaryResponse> Call(int fail_with = 0,
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
          call(channel_.get(), method,
               method == test_service::kUnaryCall ? request.SerializeAsString() : std::string(),
               &result));
    });
    return result.get_future().get();
  }

  // The LRS stream's first request: the node, with the client feature.
  int64_t AcceptLrsStream(const std::vector<std::string>& clusters = {}) {
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
    EXPECT_TRUE(
        cp_->SendLrsResponse(LrsResponse(milliseconds(kReportIntervalMs), clusters), *stream));
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
      LoadStatsRequest request;
      ASSERT_TRUE(request.ParseFromString(report->bytes));
      EXPECT_FALSE(request.has_node()) << "only a stream's first request carries the node";
      for (const auto& cluster : request.cluster_stats()) {
        reported_clusters_.insert(cluster.cluster_name());
        EXPECT_EQ(cluster.cluster_service_name(), "s-" + cluster.cluster_name());
        // The interval the client measured: at least the one it was told.
        const auto& interval = cluster.load_report_interval();
        EXPECT_GE(interval.seconds() * 1000 + interval.nanos() / 1000000, kReportIntervalMs);
        for (const auto& l : cluster.upstream_locality_stats()) {
          LocalityTotals& totals = localities_[l.locality().zone()];
          EXPECT_EQ(l.locality().region(), "r");
          totals.issued += l.total_issued_requests();
          totals.succeeded += l.total_successful_requests();
          totals.failed += l.total_error_requests();
          totals.in_progress = l.total_requests_in_progress();
        }
        for (const auto& dropped : cluster.dropped_requests()) {
          dropped_[dropped.category()] += dropped.dropped_count();
        }
        total_dropped_ += cluster.total_dropped_requests();
      }
    }
  }

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> backends_;
  std::vector<std::unique_ptr<http2::Server>> servers_;
  std::vector<std::string> addresses_;
  std::unique_ptr<LoopThread> control_;
  std::shared_ptr<XdsClientPool> pool_;
  std::unique_ptr<Channel> channel_;
  std::map<std::string, LocalityTotals> localities_;  // by zone
  std::map<std::string, uint64_t> dropped_;
  uint64_t total_dropped_ = 0;
  std::set<std::string> reported_clusters_;
};

// A42: calls count in the locality of the endpoint they were picked to;
// failed calls (status != OK) count as errors; the reports add up to
// exactly the calls made, with none left in progress.
TEST_F(LoadReportingTest, ReportsCallsPerLocality) {
  SetUpService("c");
  const int64_t stream = AcceptLrsStream();
  std::map<std::string, LocalityTotals> expected;  // by zone
  constexpr int kCalls = 30;
  for (int i = 0; i < kCalls; ++i) {
    const bool fail = i % 3 == 0;
    StatusOr<UnaryResponse> reply = Call(fail ? 13 : 0);
    std::string peer;
    if (fail) {
      ASSERT_FALSE(reply.ok());
      ASSERT_EQ(reply.status().code(), StatusCode::kInternal) << reply.status().ToString();
    } else {
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      peer = reply->peer;
    }
    if (fail) {
      // The failing backend is not named in the status: count failures per
      // cluster below, successes per zone here.
      expected["failed"].failed++;
      continue;
    }
    for (size_t b = 0; b < addresses_.size(); ++b) {
      if (addresses_[b] == peer) expected["z" + std::to_string(b)].succeeded++;
    }
  }
  ReadReportsUntil(stream, [&] {
    uint64_t issued = 0;
    uint64_t finished = 0;
    for (const auto& [zone, t] : localities_) {
      issued += t.issued;
      finished += t.succeeded + t.failed;
    }
    return issued == kCalls && finished == kCalls;
  });
  uint64_t failed = 0;
  for (const auto& [zone, t] : localities_) {
    EXPECT_EQ(t.succeeded, expected[zone].succeeded) << zone;
    EXPECT_EQ(t.in_progress, 0u) << zone;
    failed += t.failed;
  }
  EXPECT_EQ(failed, expected["failed"].failed);
  EXPECT_EQ(total_dropped_, 0u);
}

// A27: drop_overloads drops are reported per category and in the total.
TEST_F(LoadReportingTest, ReportsDropsPerCategory) {
  SetUpService("c", "throttle");
  const int64_t stream = AcceptLrsStream();
  constexpr int kCalls = 12;
  for (int i = 0; i < kCalls; ++i) {
    StatusOr<UnaryResponse> reply = Call();
    ASSERT_FALSE(reply.ok());
    ASSERT_EQ(reply.status().code(), StatusCode::kUnavailable);
    ASSERT_NE(reply.status().message().find("EDS-configured drop: throttle"), std::string::npos)
        << reply.status().ToString();
  }
  ReadReportsUntil(stream, [&] { return total_dropped_ >= kCalls; });
  EXPECT_EQ(total_dropped_, static_cast<uint64_t>(kCalls));
  EXPECT_EQ(dropped_["throttle"], static_cast<uint64_t>(kCalls));
  for (const auto& [zone, t] : localities_) EXPECT_EQ(t.issued, 0u) << zone;
}

// A server that names clusters gets reports of those alone.
TEST_F(LoadReportingTest, ReportsOnlyTheClustersTheServerAsksFor) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType,
      {{"svc", ApiListenerWithRoutes(
                   "svc", "*", {{"/grpc.testing.TestService/UnaryCall", "asked"}, {"", "other"}})}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType,
                                {{"asked", ReportingCluster("asked", "s-asked")},
                                 {"other", ReportingCluster("other", "s-other")}},
                                "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType,
                                {{"s-asked", EndpointsByZone("s-asked", {addresses_[0]})},
                                 {"s-other", EndpointsByZone("s-other", {addresses_[1]})}},
                                "1"));
  CreateChannel();
  const int64_t stream = AcceptLrsStream({"asked"});
  constexpr int kCalls = 5;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(Call().ok());
    ASSERT_TRUE(Call(0, test_service::kEmptyCall).ok());
  }
  ReadReportsUntil(stream, [&] { return localities_["z0"].succeeded == kCalls; });
  EXPECT_EQ(reported_clusters_, std::set<std::string>{"asked"});
}

// A failed LRS stream is opened again (with backoff); when the routes stop
// naming the reporting cluster the stream ends, and it opens again when the
// cluster comes back.
TEST_F(LoadReportingTest, StreamFollowsTheClustersThatReport) {
  SetUpService("c");
  const int64_t first = AcceptLrsStream();
  ASSERT_TRUE(cp_->CloseLrsStream(14, "LRS server restarting", first));
  const int64_t second = AcceptLrsStream();
  ASSERT_NE(second, first);
  ASSERT_TRUE(Call().ok());
  ReadReportsUntil(second,
                   [&] { return localities_["z0"].issued + localities_["z1"].issued == 1; });

  // The routes now name a cluster without lrs_server: the last report goes
  // out and the stream closes.
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c", ReportingCluster("c", "s-c")}, {"plain", ValidCluster("plain", "s-c")}},
      "2"));
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "plain"}})}}, "2"));
  ASSERT_TRUE(cp_->WaitForLrsStreamClosed(kWait, second).has_value());
  ASSERT_TRUE(Call().ok());

  // Back to the reporting cluster: a new stream.
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c"}})}}, "3"));
  const int64_t third = AcceptLrsStream();
  EXPECT_NE(third, second);
}

}  // namespace
}  // namespace uxds::testing
