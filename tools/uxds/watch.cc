// `uxds watch`: watches xDS resources with an XdsClient and prints every
// watcher callback as one JSON line, until --for expires or SIGINT/SIGTERM.
// An error that repeats the last one of its name (the same stream failure on
// every retry) is printed once.
//
//   uxds watch --bootstrap bootstrap.json --type cluster c1 c2 --for 30 --csds
//
// Threads: the XdsClient and its watchers run on a LoopThread (the control
// thread; every line is printed there). The main thread blocks SIGINT and
// SIGTERM before any thread starts and waits for them (a signalfd), for --for
// to expire and for stdout to fail or lose its reader; then it hops to the
// loop to dump, cancel and shut down.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"
#include "uxds/xds_resource_type.h"
#include "uxds/xds_resources.h"

namespace uxds::tool {
namespace {

using EventJson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kWatchSummary =
    "Watches xDS resources and prints every watcher callback as one JSON line.";
constexpr const char* kWatchDetails =
    "Output lines:\n"
    "  "
    "{\"t_ms\":12,\"type\":\"cluster\",\"name\":\"c1\",\"event\":\"resource\",\"version\":\"1\",\n"
    "   \"resource\":{...}}\n"
    "event is \"resource\", \"error\" (the resource cannot be used) or \"ambient_error\"\n"
    "(the last resource stays in use; code OK: the error cleared), with\n"
    "\"status\":{\"code\":\"NOT_FOUND\",\"message\":\"...\"} for errors. \"server\" is the\n"
    "xDS server the resource or error came from (a fallback server, A71).\n"
    "An error the same as the name's last one (a retry failing alike) is not repeated.\n"
    "\n"
    "Exit status: 0 when stopped by --for or a signal, 1 on a runtime error\n"
    "(e.g. an invalid bootstrap, or a stdout that fails or that nothing reads\n"
    "any more), 2 on a usage error.\n";

struct WatchType {
  const char* name;
  const XdsResourceType& (*get)();
};

const WatchType kWatchTypes[] = {
    {"listener", []() -> const XdsResourceType& { return ListenerResourceType::Get(); }},
    {"route", []() -> const XdsResourceType& { return RouteConfigResourceType::Get(); }},
    {"cluster", []() -> const XdsResourceType& { return ClusterResourceType::Get(); }},
    {"endpoint", []() -> const XdsResourceType& { return EndpointResourceType::Get(); }},
};

struct WatchArgs {
  std::string bootstrap_file;  // empty: from the environment
  const WatchType* type = nullptr;
  std::vector<std::string> names;
  std::optional<std::chrono::milliseconds> duration;  // --for
  bool csds = false;
  // Test hook, left out of the usage text: the resource timers (xDS "does
  // not exist" and A88's transient-error timer), so tests need not wait 15 s.
  std::optional<std::chrono::milliseconds> resource_timeout;
};

// Parses the arguments into *out; nullopt when they are fine, else the exit
// code (usage error, or 0 after --help).
std::optional<int> ParseArgs(const std::vector<std::string>& args, WatchArgs* out) {
  CLI::App app{kWatchSummary, "uxds watch"};
  app.footer(kWatchDetails);
  app.add_option("--bootstrap", out->bootstrap_file,
                 "xDS bootstrap (gRPC format); default: $GRPC_XDS_BOOTSTRAP, else the JSON in "
                 "$GRPC_XDS_BOOTSTRAP_CONFIG")
      ->type_name("FILE")
      ->check(NonEmpty("a file name"));
  std::vector<std::string> type_names;
  for (const WatchType& type : kWatchTypes) type_names.push_back(type.name);
  std::string type_name;
  app.add_option("--type", type_name,
                 "listener (LDS), route (RDS), cluster (CDS) or endpoint (EDS)")
      ->required()
      ->type_name("TYPE")
      ->check(CLI::IsMember(type_names));
  double seconds = 0;
  // At most a year: the milliseconds must fit comfortably.
  CLI::Option* duration =
      app.add_option("--for", seconds, "stop after this long (default: until SIGINT or SIGTERM)")
          ->type_name("SECONDS")
          ->check(CLI::Range(0.001, 365.0 * 24 * 3600));
  app.add_flag("--csds", out->csds, "on exit, print the client's cache as CSDS reports it (A40)");
  int64_t resource_timeout_ms = 0;
  // A test hook, not shown in --help (group ""): the resource timers (xDS
  // "does not exist" and A88's transient-error timer), so tests need not
  // wait 15 s.
  CLI::Option* resource_timeout = app.add_option("--resource-timeout-ms", resource_timeout_ms)
                                      ->check(CLI::PositiveNumber)
                                      ->group("");
  app.add_option("NAME", out->names, "the resource names to watch")->required();
  if (auto exit_code = ParseCommandLine(app, args)) return exit_code;
  for (const WatchType& type : kWatchTypes) {
    if (type_name == type.name) out->type = &type;
  }
  if (duration->count() > 0) {
    out->duration = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
  }
  if (resource_timeout->count() > 0) {
    out->resource_timeout = std::chrono::milliseconds(resource_timeout_ms);
  }
  return std::nullopt;
}

// {"code":"NOT_FOUND","message":"..."}; no message for OK.
EventJson StatusJson(const Status& status) {
  EventJson json;
  json["code"] = std::string(StatusCodeName(status.code()));
  if (!status.message().empty()) json["message"] = status.message();
  return json;
}

// A resource's JSON summary as a JSON value (as a string if it is not JSON).
EventJson ResourceJson(const std::string& text) {
  EventJson parsed = EventJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return EventJson(text);
  return parsed;
}

// Why the watch ends early, shared by the loop thread (which prints) and the
// main thread (which waits): printing stops at once when either is set, so
// callbacks still queued cost nothing and the exit is prompt.
std::atomic<bool> g_stopping{false};
std::atomic<int> g_stdout_errno{0};  // the first failed write's errno

// The main thread waits for this one too: a failed write wakes it.
constexpr int kStdoutFailedSignal = SIGUSR1;

// False once stdout failed (the line is then dropped).
bool PrintLine(const EventJson& line) {
  if (g_stdout_errno.load() != 0) return false;
  const std::string text = line.dump(-1, ' ', false, EventJson::error_handler_t::replace) + "\n";
  errno = 0;
  const bool written =
      std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
  if (written) return true;
  int expected = 0;
  if (g_stdout_errno.compare_exchange_strong(expected, errno != 0 ? errno : EIO)) {
    kill(getpid(), kStdoutFailedSignal);
  }
  return false;
}

// Prints the callbacks of one watched name (on the client's loop thread).
class PrintingWatcher final : public XdsUntypedResourceWatcher {
 public:
  PrintingWatcher(XdsClient& client, const WatchType& type, std::string name,
                  Clock::time_point start)
      : client_(client), type_(type), name_(std::move(name)), start_(start) {}

  void OnResourceChanged(StatusOr<XdsResourceData> resource) override {
    if (g_stopping.load(std::memory_order_relaxed)) return;
    const std::optional<XdsResourceSnapshot> entry = CacheEntry();
    if (!resource.ok()) {
      EventJson line = Header("error");
      if (entry.has_value() && !entry->failed_version.empty())
        line["version"] = entry->failed_version;
      AddServer(entry, line);
      line["status"] = StatusJson(resource.status());
      PrintIfChanged(line);
      return;
    }
    last_error_.clear();
    EventJson line = Header("resource");
    // The version the cache holds as the callback runs: the one this resource
    // came with, unless a newer one is already queued behind it.
    if (entry.has_value()) line["version"] = entry->version;
    AddServer(entry, line);
    line["resource"] = ResourceJson(type_.get().ResourceToJson(*resource));
    PrintLine(line);
  }

  void OnAmbientError(Status status) override {
    if (g_stopping.load(std::memory_order_relaxed)) return;
    EventJson line = Header("ambient_error");
    const std::optional<XdsResourceSnapshot> entry = CacheEntry();
    if (!status.ok() && entry.has_value() && !entry->failed_version.empty()) {
      line["version"] = entry->failed_version;
    }
    line["status"] = StatusJson(status);
    if (status.ok()) {
      last_error_.clear();
      PrintLine(line);
      return;
    }
    PrintIfChanged(line);
  }

 private:
  // An error line unless it repeats the last one of this name: a stream the
  // server keeps ending (e.g. over its 10 000-name limit) fails every watch
  // on each retry with the same error, and 10 000 names made 10 000 lines a
  // retry. One line per name per change.
  void PrintIfChanged(EventJson& line) {
    EventJson key = line;
    key.erase("t_ms");
    std::string text = key.dump(-1, ' ', false, EventJson::error_handler_t::replace);
    if (text == last_error_) return;
    last_error_ = std::move(text);
    PrintLine(line);
  }

  EventJson Header(const char* event) const {
    EventJson line;
    line["t_ms"] =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count();
    line["type"] = type_.name;
    line["name"] = name_;
    line["event"] = event;
    return line;
  }

  // A71: which of the authority's servers the data came from (the primary,
  // or a fallback server).
  static void AddServer(const std::optional<XdsResourceSnapshot>& entry, EventJson& line) {
    if (entry.has_value() && !entry->server_uri.empty()) line["server"] = entry->server_uri;
  }

  // One entry, looked up by the name as typed (the client normalizes it):
  // a Snapshot() of the whole cache per callback made 10 000 watches
  // quadratic.
  std::optional<XdsResourceSnapshot> CacheEntry() const {
    return client_.Lookup(type_.get(), name_);
  }

  XdsClient& client_;
  const WatchType& type_;
  const std::string name_;
  const Clock::time_point start_;
  std::string last_error_;  // the last error line printed, without its time
};

// A40, as `uxds watch --csds` prints it: every cache entry with its
// ClientResourceStatus name, version and last error.
EventJson CsdsJson(const XdsClient& client, Clock::time_point start) {
  EventJson resources = EventJson::array();
  for (const XdsResourceSnapshot& entry : client.Snapshot()) {
    EventJson resource;
    resource["type_url"] = entry.type_url;
    resource["name"] = entry.name;
    resource["client_status"] = std::string(XdsCacheStateName(entry.state));
    if (entry.has_resource) resource["version"] = entry.version;
    if (!entry.server_uri.empty()) resource["server"] = entry.server_uri;
    if (!entry.error.ok()) {
      EventJson error = StatusJson(entry.error);
      if (!entry.failed_version.empty()) error["version"] = entry.failed_version;
      resource["error"] = std::move(error);
    }
    resources.push_back(std::move(resource));
  }
  EventJson line;
  line["t_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  line["event"] = "csds";
  line["node_id"] = client.bootstrap().node.id;
  line["resources"] = std::move(resources);
  return line;
}

enum class StopReason { kSignalOrDuration, kStdoutFailed, kStdoutClosed };

// Waits for SIGINT / SIGTERM (blocked in every thread, read from
// `signal_fd`), until `duration`, for a write to stdout to fail, or for the
// reader of stdout to go away (a pipe reports POLLERR on its write end then;
// `uxds watch | head -1` must not wait for the next event to notice).
StopReason WaitForStop(int signal_fd, std::optional<std::chrono::milliseconds> duration) {
  const Clock::time_point deadline =
      duration.has_value() ? Clock::now() + *duration : Clock::time_point::max();
  while (true) {
    int timeout_ms = -1;
    if (duration.has_value()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return StopReason::kSignalOrDuration;
      timeout_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    // events 0: only POLLERR / POLLHUP, which poll() always reports.
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {STDOUT_FILENO, 0, 0}};
    if (poll(fds, 2, timeout_ms) < 0) {
      if (errno == EINTR) continue;
      return StopReason::kSignalOrDuration;
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      if (read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        return static_cast<int>(info.ssi_signo) == kStdoutFailedSignal
                   ? StopReason::kStdoutFailed
                   : StopReason::kSignalOrDuration;
      }
    }
    if (fds[1].revents & (POLLERR | POLLHUP)) return StopReason::kStdoutClosed;
  }
}

Task<void> ShutdownClient(XdsClient& client, std::promise<void>& done) {
  co_await client.Shutdown();
  done.set_value();
}

}  // namespace

int RunWatch(const std::vector<std::string>& args) {
  WatchArgs watch;
  if (std::optional<int> exit_code = ParseArgs(args, &watch)) return *exit_code;

  StatusOr<Bootstrap> bootstrap = watch.bootstrap_file.empty()
                                      ? Bootstrap::FromEnvironment()
                                      : Bootstrap::FromFile(watch.bootstrap_file);
  if (!bootstrap.ok()) {
    std::fprintf(stderr, "uxds watch: %s\n", bootstrap.status().ToString().c_str());
    return kExitRuntimeError;
  }
  XdsClientOptions options;
  options.user_agent_name = "uxds watch";
  if (watch.resource_timeout.has_value()) {
    options.resource_does_not_exist_timeout = *watch.resource_timeout;
    options.resource_transient_error_timeout = *watch.resource_timeout;
  }

  // Blocked before any thread starts, so that every thread inherits the mask
  // and only WaitForStop takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, kStdoutFailedSignal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A closed stdout is an EPIPE to report, not a silent death.
  signal(SIGPIPE, SIG_IGN);
  const int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::fprintf(stderr, "uxds watch: signalfd: %s\n", std::strerror(errno));
    return kExitRuntimeError;
  }

  const Clock::time_point start = Clock::now();
  StatusOr<std::unique_ptr<LoopThread>> loop_thread = LoopThread::Start();
  if (!loop_thread.ok()) {
    std::fprintf(stderr, "uxds watch: %s\n", loop_thread.status().ToString().c_str());
    return kExitRuntimeError;
  }
  LoopThread& control = **loop_thread;
  std::unique_ptr<XdsClient> client;
  Status created;
  std::vector<std::shared_ptr<PrintingWatcher>> watchers;
  control.RunSync([&] {
    StatusOr<std::unique_ptr<XdsClient>> made =
        XdsClient::Create(control.loop(), *std::move(bootstrap), options);
    if (!made.ok()) {
      created = made.status();
      return;
    }
    client = *std::move(made);
    for (const std::string& name : watch.names) {
      auto watcher = std::make_shared<PrintingWatcher>(*client, *watch.type, name, start);
      client->WatchUntypedResource(watch.type->get(), name, watcher);
      watchers.push_back(std::move(watcher));
    }
  });
  if (!created.ok()) {
    std::fprintf(stderr, "uxds watch: %s\n", created.ToString().c_str());
    return kExitRuntimeError;
  }

  const StopReason stop = WaitForStop(signal_fd, watch.duration);
  close(signal_fd);
  const bool stdout_ok = stop == StopReason::kSignalOrDuration;
  if (!stdout_ok) g_stopping.store(true);

  // The dump first: cancelling the last watch of a name drops its entry.
  control.RunSync([&] {
    if (watch.csds && stdout_ok) PrintLine(CsdsJson(*client, start));
    g_stopping.store(true);
    for (size_t i = 0; i < watch.names.size(); ++i) {
      client->CancelWatch(watch.type->get(), watch.names[i], watchers[i].get());
    }
  });
  std::promise<void> shut_down;
  control.RunSync([&] { control.loop().Spawn(ShutdownClient(*client, shut_down)); });
  shut_down.get_future().wait();
  control.RunSync([&] {
    client.reset();
    watchers.clear();
  });
  if (const int error = g_stdout_errno.load(); error != 0) {
    std::fprintf(stderr, "uxds watch: cannot write to stdout: %s\n", std::strerror(error));
    return kExitRuntimeError;
  }
  if (stop == StopReason::kStdoutClosed) {
    std::fprintf(stderr, "uxds watch: stdout was closed (nothing reads the output any more)\n");
    return kExitRuntimeError;
  }
  return kExitOk;
}

}  // namespace uxds::tool
