// `uxds control-plane --dir DIR --listen ADDR`: an ADS (State of the World)
// management server on the uxds HTTP/2 server, serving the resources in DIR
// (control_plane_snapshot.h) and reloading them when a file changes.
//
// stdout carries JSON lines, the contract scripts and the demo rely on:
//   {"event":"listening","address":"127.0.0.1:PORT"}    first, once serving
//   {"event":"snapshot","version":"N","resources":K}    per (re)load
//   {"event":"file_error","path":"...","line":L,"message":"..."}
//   {"event":"request","type":"...","names":[...],"version":"...","nonce":"...",
//    "nack":"..."}                                       per DiscoveryRequest
//   {"event":"stream_ended","peer":"...","code":"RESOURCE_EXHAUSTED","message":"..."}
//                                    when the control plane ends a stream itself
//                                    (a request naming more than 10 000 resources)
// Runs until SIGINT / SIGTERM.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "address_check.h"
#include "cli.h"
#include "commands.h"
#include "control_plane_ads.h"
#include "control_plane_snapshot.h"
#include "directory_changes.h"
#include "json_converter.h"
#include "json_line_printer.h"
#include "uxds/loop.h"
#include "uxds/server.h"

namespace uxds::tool {
namespace {

constexpr char kCommand[] = "uxds control-plane";
// How long Shutdown() lets open streams finish after SIGINT / SIGTERM.
constexpr auto kShutdownGrace = std::chrono::milliseconds(500);

void PrintFileErrors(JsonLinePrinter& printer, const DirectoryLoad& load) {
  for (const FileError& error : load.errors) {
    printer.Print({{"event", "file_error"},
                   {"path", error.path},
                   {"line", error.line},
                   {"message", error.message}});
  }
}

// Printed once the snapshot is served: a client that connects after seeing
// this line gets it.
void PrintSnapshot(JsonLinePrinter& printer, const Snapshot& snapshot) {
  printer.Print({{"event", "snapshot"},
                 {"version", snapshot.version},
                 {"resources", snapshot.resource_count()}});
}

// Reloads DIR off the loop (the converter blocks) whenever its fingerprint
// changes, and hands each good snapshot to the loop. DirectoryChanges says
// when to look: inotify, or every `poll_interval` where DIR cannot be
// watched.
class DirectoryWatcher {
 public:
  DirectoryWatcher(std::string dir, std::chrono::milliseconds poll_interval,
                   JsonConverter& converter, JsonLinePrinter& printer,
                   std::function<void(std::shared_ptr<const Snapshot>)> publish)
      : dir_(std::move(dir)),
        changes_(dir_, poll_interval),
        converter_(converter),
        printer_(printer),
        publish_(std::move(publish)) {}
  ~DirectoryWatcher() { Stop(); }

  // The first load, on the caller's thread. An error when DIR cannot be read
  // or the converter cannot run.
  StatusOr<DirectoryLoad> LoadFirst() {
    StatusOr<std::string> fingerprint = DirectoryFingerprint(dir_);
    if (!fingerprint.ok()) return fingerprint.status();
    fingerprint_ = *fingerprint;
    StatusOr<DirectoryLoad> load = LoadDirectory(dir_, converter_);
    if (load.ok() && load->snapshot != nullptr) load->snapshot->version = NextVersion();
    return load;
  }

  void Start() {
    thread_ = std::thread([this] {
      while (changes_.Wait()) ReloadIfChanged();
    });
  }
  void Stop() {
    changes_.Stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string NextVersion() { return std::to_string(++last_version_); }

  void ReloadIfChanged() {
    StatusOr<std::string> fingerprint = DirectoryFingerprint(dir_);
    if (!fingerprint.ok()) {
      if (fingerprint.status().message() != last_problem_) {
        last_problem_ = fingerprint.status().message();
        std::fprintf(stderr, "%s: %s\n", kCommand, last_problem_.c_str());
      }
      return;
    }
    if (*fingerprint == fingerprint_) return;
    StatusOr<DirectoryLoad> load = LoadDirectory(dir_, converter_);
    if (!load.ok()) {
      // The converter failed: try again on the next change (or poll).
      std::fprintf(stderr, "%s: reloading %s: %s\n", kCommand, dir_.c_str(),
                   load.status().ToString().c_str());
      return;
    }
    fingerprint_ = *fingerprint;
    last_problem_.clear();
    PrintFileErrors(printer_, *load);
    if (load->snapshot != nullptr) {
      load->snapshot->version = NextVersion();
      publish_(std::move(load->snapshot));
    }
  }

  const std::string dir_;
  // Made before the first load, so that no change after it is missed.
  DirectoryChanges changes_;
  JsonConverter& converter_;
  JsonLinePrinter& printer_;
  const std::function<void(std::shared_ptr<const Snapshot>)> publish_;
  std::string fingerprint_;
  std::string last_problem_;
  uint64_t last_version_ = 0;
  std::thread thread_;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kCommand, message.c_str());
  return kExitRuntimeError;
}

}  // namespace

int RunControlPlane(const std::vector<std::string>& args) {
  CLI::App app{
      "An ADS (State of the World) management server serving the xDS resources in DIR:\n"
      "one proto3 JSON resource per DIR/*.json file (with its \"@type\"), TP3 errors\n"
      "from DIR/errors.json; reloaded when a file changes. JSON lines on stdout\n"
      "(listening, snapshot, file_error, request). Runs until SIGINT/SIGTERM.",
      "uxds control-plane"};
  std::string dir;
  std::string listen;
  int poll_ms = 200;
  app.add_option("--dir", dir, "directory of resource files")->required();
  app.add_option("--listen", listen, "address to serve on: 127.0.0.1:0, [::1]:18000 (port 0: any)")
      ->required()
      ->check(ListenAddress());
  app.add_option("--poll-ms", poll_ms,
                 "how often DIR is checked for changes where inotify cannot watch it, in ms")
      ->check(CLI::Range(10, 60000));
  if (auto rc = ParseCommandLine(app, args)) return *rc;
  // A converter that died shows up as a failed write, not as SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  // Signals are taken by sigwait below, not by a handler on some thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  JsonLinePrinter printer;
  JsonConverter converter(ServedMessageTypes());
  std::unique_ptr<AggregatedDiscoveryService> ads;
  Loop* loop = nullptr;
  DirectoryWatcher watcher(dir, std::chrono::milliseconds(poll_ms), converter, printer,
                           [&ads, &loop, &printer](std::shared_ptr<const Snapshot> snapshot) {
                             loop->Post([&ads, &printer, snapshot = std::move(snapshot)] {
                               ads->Publish(snapshot);
                               PrintSnapshot(printer, *snapshot);
                             });
                           });
  StatusOr<DirectoryLoad> first = watcher.LoadFirst();
  if (!first.ok()) return Fail(first.status().message());

  auto control = LoopThread::Start();
  if (!control.ok()) return Fail(control.status().ToString());
  loop = &(*control)->loop();
  std::unique_ptr<Server> server;
  Status started;
  (*control)->RunSync([&] {
    ads = std::make_unique<AggregatedDiscoveryService>(printer);
    if (first->snapshot != nullptr) ads->Publish(first->snapshot);
    auto registry = std::make_shared<ServiceRegistry>();
    ads->Register(*registry);
    ServerOptions options;
    options.max_receive_message_size = kMaxRequestBytes;
    auto listening = Server::Listen(*loop, listen, std::move(registry), options);
    if (!listening.ok()) {
      started = listening.status();
      return;
    }
    server = *std::move(listening);
    loop->Spawn(server->Serve());
  });
  if (!started.ok()) {
    (*control)->RunSync([&] { ads.reset(); });
    if (started.code() == StatusCode::kInvalidArgument) {  // not an IP:port: a usage error
      std::fprintf(stderr, "%s: --listen: %s\nrun `%s --help` for usage\n", kCommand,
                   started.message().c_str(), kCommand);
      return kExitUsage;
    }
    return Fail("cannot listen on " + listen + ": " + started.message());
  }
  // The address as given, with the port picked for port 0.
  const std::string host = listen.substr(0, listen.rfind(':'));
  printer.Print({{"event", "listening"}, {"address", host + ":" + std::to_string(server->port())}});
  PrintFileErrors(printer, *first);
  if (first->snapshot != nullptr) PrintSnapshot(printer, *first->snapshot);
  watcher.Start();

  int sig = 0;
  sigwait(&signals, &sig);
  watcher.Stop();
  std::promise<void> stopped;
  (*control)->RunSync([&] {
    loop->Spawn([](Server& s, std::promise<void>& done) -> Task<void> {
      co_await s.Shutdown(kShutdownGrace);
      done.set_value();
    }(*server, stopped));
  });
  stopped.get_future().wait();
  (*control)->RunSync([&] {
    server.reset();
    ads.reset();
  });
  return kExitOk;
}

}  // namespace uxds::tool
