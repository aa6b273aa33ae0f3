// LoadReportingClient: the LRS streams of a channel (A27 load reporting,
// counted in cluster_impl since A42).
//
// A Cluster whose lrs_server is set (`self`: the xDS server it came from)
// gets a ClusterLoadStats here; while any is held, one
// envoy.service.load_stats.v3.LoadReportingService/StreamLoadStats stream
// runs to that server on a connection of its own, opened with the server's
// URI and credentials. The client sends the node first, then, at the
// interval the server's LoadStatsResponse sets, one ClusterStats per
// cluster the server asked for (or all, with send_all_clusters). A failed
// stream is retried with exponential backoff; once no cluster needs the
// server any more (its stats were released and reported a last time), the
// stream and the connection close.
//
// Control thread only.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "envoy/config/core/v3/base.pb.h"
#include "http2/client_call.h"
#include "http2/client_connection.h"
#include "runtime/host_resolver.h"
#include "runtime/shutdown_once.h"
#include "tls/tls_context.h"
#include "uxds/bootstrap.h"
#include "uxds/load_reporting.h"
#include "uxds/loop.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"
#include "xds/client/exponential_backoff.h"
#include "xds/lrs/load_stats.h"

namespace uxds {

class LoadReportingClient {
 public:
  LoadReportingClient(Loop& loop, const XdsNode& node, LoadReportingOptions options = {});
  // After Shutdown().
  ~LoadReportingClient();
  LoadReportingClient(const LoadReportingClient&) = delete;
  LoadReportingClient& operator=(const LoadReportingClient&) = delete;

  // The load of `cluster_name` / `eds_service_name` reported to `server`
  // (the same object while it is held). Starts the server's stream.
  std::shared_ptr<ClusterLoadStats> AddCluster(const XdsServerConfig& server,
                                               const std::string& cluster_name,
                                               const std::string& eds_service_name);
  // Ends every stream and closes the connections. Any number of callers:
  // one teardown, each returns once it has ended (at once after that), and
  // the first to return may destroy the client.
  Task<void> Shutdown();

 private:
  struct Server;
  Task<void> TearDown();
  Task<void> RunServer(Server& server);
  Task<bool> RunStream(Server& server, CancelState* cancel);
  Task<void> ReadResponses(Server& server, TaskGroup& tasks);
  Task<void> WriteReports(Server& server);
  // The reports of the clusters the server asked for; forgets the stats
  // nobody holds any more once they are in a report.
  std::vector<ClusterLoadReport> TakeReports(Server& server);

  Loop& loop_;
  LoadReportingOptions options_;
  envoy::config::core::v3::Node node_;
  std::vector<std::unique_ptr<Server>> servers_;
  TaskGroup tasks_;
  ShutdownOnce shutdown_;
};

}  // namespace uxds
