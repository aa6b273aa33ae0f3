// Options of load reporting (LRS, A27/A42): when a Cluster names an
// lrs_server, a channel reports its calls per locality and its drops to
// that server at the interval the server sets.
#pragma once

#include <chrono>
#include <cstddef>

#include "uxds/xds_client.h"

namespace uxds {

struct LoadReportingOptions {
  // Connection settings (connect timeout, keepalive), the reconnection
  // backoff (A57's, as for ADS) and the node's user agent.
  XdsClientOptions connection;
  // gRPC's bounds on LoadStatsResponse.load_reporting_interval: at least
  // 1 s (tests lower it); at most an hour, so that a stray value cannot
  // silence reports for years.
  std::chrono::milliseconds min_report_interval{1000};
  std::chrono::milliseconds max_report_interval{3600 * 1000};
  // Largest LoadStatsResponse accepted; a larger one ends the stream.
  size_t max_response_size = 1 << 20;
};

}  // namespace uxds
