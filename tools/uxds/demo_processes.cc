#include "demo_processes.h"

#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "demo_cleanup.h"

#include "uxds/runtime.h"

namespace uxds::tool {
namespace {

using namespace std::chrono_literals;
using DemoJson = nlohmann::json;

constexpr std::chrono::milliseconds kPollInterval = 20ms;
constexpr char kDrainGraceMs[] = "100";

std::string SelfPath() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "/proc/self/exe";
}

DemoJson ParseLine(const std::string& line) {
  return DemoJson::parse(line, nullptr, /*allow_exceptions=*/false);
}

}  // namespace

DemoProcesses::DemoProcesses(Loop& loop, std::string log_dir)
    : loop_(loop), self_(SelfPath()), log_dir_(std::move(log_dir)) {}

DemoProcesses::~DemoProcesses() {
  for (auto& [name, server] : servers_) server.Signal(SIGTERM);
  if (control_plane_) control_plane_->Signal(SIGTERM);
  // The Subprocess destructors kill and reap whatever has not exited by then.
  for (auto& [name, server] : servers_) {
    server.Wait(DemoCleanup::kStopGrace);
    DemoCleanup::Get().RemoveChild(server.pid());
  }
  if (control_plane_) {
    control_plane_->Wait(DemoCleanup::kStopGrace);
    DemoCleanup::Get().RemoveChild(control_plane_->pid());
  }
}

template <typename Done>
Task<bool> DemoProcesses::PollUntil(Done done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    DemoCleanup::Get().PauseIfStopping();
    DrainControlPlane();
    const bool is_done = done();
    // A child that went because the demo is stopping is no news.
    DemoCleanup::Get().PauseIfStopping();
    if (is_done) co_return true;
    if (std::chrono::steady_clock::now() >= deadline) co_return false;
    const Status slept = co_await SleepFor(loop_, kPollInterval);
    if (!slept.ok()) co_return false;
  }
}

void DemoProcesses::DrainControlPlane() {
  if (!control_plane_) return;
  while (std::optional<std::string> line = control_plane_->ReadLine(0ms)) {
    const DemoJson event = ParseLine(*line);
    const std::string kind = event.is_object() ? event.value("event", "") : "";
    if (kind == "file_error") file_errors_.push_back(*line);
    if (kind == "listening") address_ = event.value("address", "");
  }
  control_plane_->ClearLines();  // request lines add up over a long run
}

Task<StatusOr<std::string>> DemoProcesses::StartControlPlane(const std::string& dir) {
  control_plane_.emplace(
      Subprocess::Start({self_, "control-plane", "--dir", dir, "--listen", "127.0.0.1:0"}, {},
                        /*pipe_stdin=*/false, log_dir_ + "/control-plane.log"));
  DemoCleanup::Get().AddChild(control_plane_->pid());
  // File errors may come before the "listening" line.
  auto listening = [&] { return !address_.empty() || !control_plane_->running(); };
  (void)co_await PollUntil(listening, kStartTimeout);
  if (!address_.empty()) co_return address_;
  std::string why = control_plane_->running()
                        ? "no \"listening\" line after 20 s"
                        : "it exited with status " + std::to_string(control_plane_->Wait(1s));
  for (const std::string& error : file_errors_) why += "\n  " + error;
  co_return UnavailableError("uxds control-plane --dir " + dir + ": " + why);
}

Task<Status> DemoProcesses::StartServers(const std::vector<DemoEndpoint>& endpoints,
                                         const std::string& bootstrap_file) {
  for (const DemoEndpoint& endpoint : endpoints) {
    if (auto old = servers_.find(endpoint.name); old != servers_.end()) {
      DemoCleanup::Get().RemoveChild(old->second.pid());
      servers_.erase(old);
    }
    std::vector<std::string> argv = {self_,          "serve",       "--bootstrap",
                                     bootstrap_file, "--listen",    endpoint.address,
                                     "--hostname",   endpoint.name, "--drain-grace-ms",
                                     kDrainGraceMs};
    argv.insert(argv.end(), server_flags_.begin(), server_flags_.end());
    const auto [server, added] = servers_.emplace(
        endpoint.name,
        Subprocess::Start(argv, {}, /*pipe_stdin=*/false, log_dir_ + "/" + endpoint.name + ".log"));
    DemoCleanup::Get().AddChild(server->second.pid());
  }
  // serving[name]: the server's last serving-status line said serving.
  // A server that exited or said it is not serving (its port is taken, its
  // Listener does not exist: the control plane has the whole config by now)
  // fails the start at once.
  std::map<std::string, std::string> last_line;
  std::map<std::string, bool> serving;
  bool failed = false;
  auto all_serving_or_failed = [&] {
    bool all = true;
    for (const DemoEndpoint& endpoint : endpoints) {
      Subprocess& server = servers_.at(endpoint.name);
      while (std::optional<std::string> line = server.ReadLine(0ms)) {
        last_line[endpoint.name] = *line;
        const DemoJson status = ParseLine(*line);
        serving[endpoint.name] = status.is_object() && status.value("serving", false);
        failed = failed || !serving[endpoint.name];
      }
      failed = failed || !server.running();
      all = all && serving[endpoint.name];
    }
    return all || failed;
  };
  const bool ended = co_await PollUntil(all_serving_or_failed, kStartTimeout);
  if (ended && !failed) co_return OkStatus();
  std::string why;
  for (const DemoEndpoint& endpoint : endpoints) {
    if (serving[endpoint.name]) continue;
    Subprocess& server = servers_.at(endpoint.name);
    const bool said = last_line.count(endpoint.name) > 0;
    if (failed && server.running() && !said) continue;  // still starting when another failed
    why += "\n  " + endpoint.name + " (" + endpoint.address + "): " +
           (!server.running() ? "exited"
            : said            ? "not serving"
                              : "not serving after 20 s") +
           (said ? ", last said " + last_line[endpoint.name] : "");
  }
  co_return UnavailableError("uxds serve did not start serving:" + why);
}

Task<Status> DemoProcesses::StopServers(const std::vector<DemoEndpoint>& endpoints) {
  for (const DemoEndpoint& endpoint : endpoints) servers_.at(endpoint.name).Signal(SIGTERM);
  auto all_exited = [&] {
    for (const DemoEndpoint& endpoint : endpoints) {
      if (servers_.at(endpoint.name).running()) return false;
    }
    return true;
  };
  if (co_await PollUntil(all_exited, kStartTimeout)) co_return OkStatus();
  co_return UnavailableError("uxds serve did not exit within 20 s of SIGTERM");
}

}  // namespace uxds::tool
