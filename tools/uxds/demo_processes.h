// The child processes of `uxds demo`: the control plane (`uxds
// control-plane`) and one xDS-enabled TestService server (`uxds serve`) per
// endpoint, all the running uxds binary itself. Waiting for them is a
// coroutine on the demo's loop, so the client's channel keeps running
// (reconnect timers, ADS) while the demo waits.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "demo_config.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::tool {

class DemoProcesses {
 public:
  // Each child's stderr goes to a file in `log_dir`: control-plane.log,
  // p0-1.log, ...
  DemoProcesses(Loop& loop, std::string log_dir);
  // Stops whatever still runs (SIGTERM, then SIGKILL after
  // DemoCleanup::kStopGrace).
  ~DemoProcesses();
  DemoProcesses(const DemoProcesses&) = delete;
  DemoProcesses& operator=(const DemoProcesses&) = delete;

  // `uxds control-plane --dir DIR --listen 127.0.0.1:0`; its address once it
  // listens with the first snapshot loaded.
  Task<StatusOr<std::string>> StartControlPlane(const std::string& dir);
  // `uxds serve` on each endpoint (hostname = the endpoint's name); returns
  // once every one reports serving, or at once when one exits or reports
  // it is not serving (e.g. its port is in use).
  Task<Status> StartServers(const std::vector<DemoEndpoint>& endpoints,
                            const std::string& bootstrap_file);
  // SIGTERM (a short drain) and wait for each to exit.
  Task<Status> StopServers(const std::vector<DemoEndpoint>& endpoints);

  // A flag every `uxds serve` started from now on gets ("--xds-creds").
  void AddServerFlag(std::string flag) { server_flags_.push_back(std::move(flag)); }

  // The file errors the control plane reported so far.
  const std::vector<std::string>& file_errors() const { return file_errors_; }

  static constexpr std::chrono::seconds kStartTimeout{20};

 private:
  // Reads the control plane's lines without waiting (its pipe must not fill).
  void DrainControlPlane();
  // Waits, on the loop, until `done` holds; false after `timeout`.
  template <typename Done>
  Task<bool> PollUntil(Done done, std::chrono::milliseconds timeout);

  Loop& loop_;
  const std::string self_;  // the running uxds binary
  const std::string log_dir_;
  std::optional<Subprocess> control_plane_;
  std::map<std::string, Subprocess> servers_;  // by endpoint name
  std::string address_;                        // the control plane's, from its "listening" line
  std::vector<std::string> file_errors_;
  std::vector<std::string> server_flags_;  // AddServerFlag()
};

}  // namespace uxds::tool
