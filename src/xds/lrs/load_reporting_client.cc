#include "xds/lrs/load_reporting_client.h"

#include "uxds/log.h"
#include "xds/bootstrap.h"
#include "xds/client/xds_server_connect.h"
#include "xds/lrs/lrs_protocol.h"

namespace uxds {

using xds_internal::kClientFeatureLrsSendAllClusters;

struct LoadReportingClient::Server {
  Server(Loop& loop, XdsServerConfig config, const XdsClientOptions& options)
      : config(std::move(config)),
        wake(loop),
        resolver(loop),
        backoff({options.backoff_initial, options.backoff_multiplier, options.backoff_jitter,
                 options.backoff_max}),
        first_response(loop) {}

  // Forgets stats nobody holds and no call counts in; true if any is left.
  bool NeedsStream() {
    std::erase_if(clusters, [](const auto& entry) {
      return entry.second.use_count() == 1 && !entry.second->HasCallsInProgress();
    });
    return !clusters.empty();
  }

  const XdsServerConfig config;
  // By (cluster name, EDS service name).
  std::map<std::pair<std::string, std::string>, std::shared_ptr<ClusterLoadStats>> clusters;
  AsyncQueue<bool> wake;  // a cluster was added while idle
  HostResolver resolver;
  xds_internal::ExponentialBackoff backoff;
  std::unique_ptr<http2::ClientConnection> connection;
  xds_internal::XdsServerTls tls;

  // The stream being run: what the server's latest response asked for.
  AsyncQueue<bool> first_response;
  http2::ClientCall* call = nullptr;
  bool responded = false;
  bool send_all_clusters = false;
  std::set<std::string> requested_clusters;
  std::chrono::nanoseconds interval{0};
  bool last_report_empty = false;
  bool closed_idle = false;  // the stream ended because no cluster needs it
};

LoadReportingClient::LoadReportingClient(Loop& loop, const XdsNode& node,
                                         LoadReportingOptions options)
    : loop_(loop), options_(std::move(options)), tasks_(loop), shutdown_(loop) {
  PopulateNodeProto(node, options_.connection.user_agent_name,
                    options_.connection.user_agent_version.empty()
                        ? UXDS_VERSION
                        : options_.connection.user_agent_version,
                    &node_);
  node_.add_client_features(std::string(kClientFeatureLrsSendAllClusters));
}

LoadReportingClient::~LoadReportingClient() = default;

std::shared_ptr<ClusterLoadStats> LoadReportingClient::AddCluster(
    const XdsServerConfig& server_config, const std::string& cluster_name,
    const std::string& eds_service_name) {
  Server* server = nullptr;
  for (const auto& s : servers_) {
    if (s->config == server_config) server = s.get();
  }
  if (server == nullptr) {
    servers_.push_back(std::make_unique<Server>(loop_, server_config, options_.connection));
    server = servers_.back().get();
    if (!shutdown_.started()) tasks_.Spawn(RunServer(*server));
  }
  std::shared_ptr<ClusterLoadStats>& stats = server->clusters[{cluster_name, eds_service_name}];
  if (stats == nullptr) {
    stats = std::make_shared<ClusterLoadStats>(cluster_name, eds_service_name);
    server->wake.Send(true);
  }
  return stats;
}

Task<void> LoadReportingClient::Shutdown() {
  co_await shutdown_.Run([this] { return TearDown(); });
}

Task<void> LoadReportingClient::TearDown() {
  co_await tasks_.CancelAndJoin();
  // Taken out first: each is closed from this frame, and nothing walks
  // servers_ across a suspension.
  std::vector<std::unique_ptr<http2::ClientConnection>> connections;
  for (const auto& server : servers_) {
    if (server->connection != nullptr) connections.push_back(std::move(server->connection));
  }
  for (const auto& connection : connections) co_await connection->Close();
}

Task<void> LoadReportingClient::RunServer(Server& server) {
  CancelState* cancel = co_await CurrentCancelState();
  while (cancel == nullptr || !cancel->cancelled()) {
    if (!server.NeedsStream()) {
      if (server.connection != nullptr) {
        co_await server.connection->Close();
        server.connection.reset();
      }
      server.backoff.Reset();
      while (server.wake.TryReceive().has_value()) {
      }
      if (server.NeedsStream()) continue;
      const std::optional<bool> woken = co_await server.wake.Receive();
      if (!woken.has_value()) co_return;
      continue;
    }
    const bool responded = co_await RunStream(server, cancel);
    if (cancel != nullptr && cancel->cancelled()) co_return;
    if (std::exchange(server.closed_idle, false)) continue;
    // A57's rule for ADS, which gRPC applies to LRS too: a stream that got
    // a response resets the backoff.
    if (responded) server.backoff.Reset();
    const Status slept = co_await SleepFor(loop_, server.backoff.NextDelay());
    if (!slept.ok()) co_return;
  }
}

Task<bool> LoadReportingClient::RunStream(Server& server, CancelState* cancel) {
  if (server.connection == nullptr || !server.connection->usable()) {
    if (server.connection != nullptr) {
      co_await server.connection->Close();
      server.connection.reset();
    }
    StatusOr<std::unique_ptr<http2::ClientConnection>> connection =
        co_await xds_internal::ConnectToXdsServer(loop_, server.resolver, server.config,
                                                  options_.connection, options_.max_response_size,
                                                  server.tls);
    if (cancel != nullptr && cancel->cancelled()) co_return false;
    if (!connection.ok()) {
      Log(LogSeverity::kWarning, "LRS server " + server.config.server_uri +
                                     ": connection failed: " + connection.status().message());
      co_return false;
    }
    server.connection = *std::move(connection);
  }
  std::unique_ptr<http2::ClientCall> call =
      server.connection->StartCall(std::string(xds_internal::kLrsMethod));
  server.call = call.get();
  server.responded = false;
  server.last_report_empty = false;
  while (server.first_response.TryReceive().has_value()) {
  }
  const Status written =
      co_await call->Write(xds_internal::SerializeInitialLoadStatsRequest(node_));
  if (written.ok()) {
    TaskGroup tasks(loop_, cancel);
    tasks.Spawn(ReadResponses(server, tasks));
    tasks.Spawn(WriteReports(server));
    co_await tasks.Join();
  }
  server.call = nullptr;
  if (!server.closed_idle && !(cancel != nullptr && cancel->cancelled())) {
    const Status status = co_await call->Finish();
    Log(LogSeverity::kWarning,
        "LRS stream to " + server.config.server_uri + " ended: " + status.ToString());
  }
  co_return server.responded;
}

Task<void> LoadReportingClient::ReadResponses(Server& server, TaskGroup& tasks) {
  for (;;) {
    std::optional<std::string> message = co_await server.call->Read();
    if (!message.has_value()) break;
    StatusOr<xds_internal::LoadStatsResponse> response = xds_internal::ParseLoadStatsResponse(
        *message, options_.min_report_interval, options_.max_report_interval);
    if (!response.ok()) {
      // gRPC ignores a response it cannot use and keeps the stream.
      Log(LogSeverity::kWarning, "LRS server " + server.config.server_uri + ": " +
                                     response.status().message() + "; ignored");
      continue;
    }
    server.send_all_clusters = response->send_all_clusters;
    server.requested_clusters = std::move(response->clusters);
    server.interval = response->interval;
    if (!std::exchange(server.responded, true)) server.first_response.Send(true);
  }
  tasks.Cancel();  // stops the writer
}

Task<void> LoadReportingClient::WriteReports(Server& server) {
  const std::optional<bool> started = co_await server.first_response.Receive();
  if (!started.has_value()) co_return;
  // The first report covers everything counted since the stats were made
  // or last reported (on an earlier stream), as in gRPC.
  for (;;) {
    // A changed interval applies from the next report on, as in gRPC.
    const Status slept = co_await SleepFor(loop_, server.interval);
    if (!slept.ok()) co_return;
    std::vector<ClusterLoadReport> reports = TakeReports(server);
    bool empty = true;
    for (const ClusterLoadReport& r : reports) empty = empty && r.empty();
    // gRPC sends one report with nothing in it after a busy one, then
    // stays quiet while nothing happens.
    if (!(empty && server.last_report_empty) && !reports.empty()) {
      const Status written =
          co_await server.call->Write(xds_internal::SerializeLoadStatsRequest(reports));
      if (!written.ok()) co_return;
    }
    server.last_report_empty = empty;
    if (!server.NeedsStream()) {
      server.closed_idle = true;
      server.call->Cancel();
      co_return;
    }
  }
}

std::vector<ClusterLoadReport> LoadReportingClient::TakeReports(Server& server) {
  std::vector<ClusterLoadReport> reports;
  const auto now = ClusterLoadStats::Clock::now();
  for (auto& [key, stats] : server.clusters) {
    // Every cluster's counts move on, reported or not, so a cluster the
    // server asks for later starts from then.
    ClusterLoadReport report = stats->TakeReport(now);
    if (server.send_all_clusters || server.requested_clusters.contains(key.first)) {
      reports.push_back(std::move(report));
    }
  }
  return reports;
}

}  // namespace uxds
