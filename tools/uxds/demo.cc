// `uxds demo`: the xDS demo on loopback. A control plane (`uxds
// control-plane`) serves a config (built in, or --config DIR), xDS-enabled
// TestService servers (`uxds serve`) come up on the endpoints it names, and
// a client on the public Channel API shows ring hash over priority 0, one
// header value sticking to one server (A42), failover to priority 1 and
// back, and the CSDS tables. Each step prints what it checked and PASS or
// FAIL; the exit status is 1 when one failed. With --mtls every call is
// mutual TLS configured only by xDS (A29), with certificates the demo makes,
// a seventh step shows clients without a certificate refused and an eighth a
// call the servers' RBAC policy refuses.
//
// However it ends (its steps, a failure, SIGINT, SIGTERM, its stdout closing)
// it leaves nothing behind: its children are stopped and its temporary
// directory removed (a failure prints the end of the children's logs first).
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "csds_table.h"
#include "demo_cleanup.h"
#include "demo_config.h"
#include "demo_processes.h"
#include "demo_steps.h"
#include "uxds/bootstrap.h"
#include "uxds/client_channel.h"
#include "uxds/runtime.h"
#include "uxds/xds_client_pool.h"

namespace uxds::tool {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr size_t kBuiltInServers = 6;
constexpr int kStickyCallsPerValue = 20;
constexpr std::chrono::seconds kRecoveryTimeout{20};
constexpr size_t kLogLines = 10;  // per child log, after a failure

struct DemoArgs {
  std::string config_dir;
  std::string write_config_dir;
  std::string target_name = kDemoTargetName;
  int calls = 200;
  bool mtls = false;
};

// A temporary directory, removed with what it holds.
class ScratchDir {
 public:
  ScratchDir() {
    // mkdtemp replaces the template's last six characters, all 'X'.
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("uxds-demo-" + std::string(6, 'X'))).string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
    DemoCleanup::Get().SetScratchDir(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
    DemoCleanup::Get().SetScratchDir("");
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Loopback ports the kernel hands out, all held at once (so they differ),
// then released for the servers: A36 servers listen on a port of their own.
std::vector<uint16_t> PickPorts(size_t count) {
  std::vector<int> sockets;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      if (fd >= 0) ::close(fd);
      break;
    }
    sockets.push_back(fd);
    ports.push_back(ntohs(address.sin_port));
  }
  for (int fd : sockets) ::close(fd);
  return ports;
}

class Demo {
 public:
  Demo(Loop& loop, const DemoArgs& args)
      : loop_(loop), args_(args), processes_(loop, scratch_.path()) {}

  Task<int> Run();

 private:
  // Prints one step's outcome; counts failures.
  void Step(int number, bool pass, const std::string& what) {
    DemoCleanup::Get().PauseIfStopping();
    std::printf("[%d/%d] %s  %s\n", number, steps(), pass ? "PASS" : "FAIL", what.c_str());
    // Nobody reads the steps any more: the demo ends (and its children).
    if (StdoutFailed("uxds demo")) DemoCleanup::Get().StopAllAndExit(kExitRuntimeError);
    failures_ += pass ? 0 : 1;
  }
  int steps() const { return args_.mtls ? 8 : 6; }
  Task<Status> Prepare();
  // After a failure: the end of each child's stderr, before the directory
  // that holds them goes.
  void ShowLogs() {
    std::error_code error;
    std::vector<std::filesystem::path> logs;
    for (const auto& entry : std::filesystem::directory_iterator(scratch_.path(), error)) {
      if (entry.path().extension() == ".log" && entry.file_size(error) > 0) {
        logs.push_back(entry.path());
      }
    }
    std::sort(logs.begin(), logs.end());
    for (const std::filesystem::path& log : logs) {
      std::ifstream in(log);
      std::vector<std::string> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      const size_t first = lines.size() > kLogLines ? lines.size() - kLogLines : 0;
      std::fprintf(stderr, "uxds demo: %s%s:\n", log.filename().c_str(),
                   first > 0 ? " (its last lines)" : "");
      for (size_t i = first; i < lines.size(); ++i) {
        std::fprintf(stderr, "  %s\n", Printable(lines[i]).c_str());
      }
    }
  }
  Task<void> SpreadAndStickiness(DemoClient& client);
  Task<void> FailoverAndRecovery(DemoClient& client);
  Task<void> ShowCsds();
  Task<void> RefuseClientsWithoutCertificates();
  Task<void> RefuseCallByRbac(Channel& channel);
  // --mtls: TLS to a server's own port (CSDS), with or without the demo's
  // client certificate.
  ChannelCredentials TlsToServers(bool with_certificate) const {
    TlsClientFiles files{.ca_certificate_file = certificates_.ca_cert};
    if (with_certificate) {
      files.certificate_file = certificates_.client_cert;
      files.private_key_file = certificates_.client_key;
    }
    return ChannelCredentials::Tls(files);
  }

  Loop& loop_;
  const DemoArgs& args_;
  ScratchDir scratch_;
  DemoProcesses processes_;
  DemoConfig config_;
  std::string bootstrap_file_;
  DemoCertificateFiles certificates_;  // --mtls
  std::shared_ptr<XdsClientPool> pool_;
  ProgressLine progress_;
  // Step 2's answers: which server each header value reached.
  std::map<std::string, std::set<std::string>> spread_servers_;
  int failures_ = 0;
};

// The config (written or read), the control plane, the servers.
Task<Status> Demo::Prepare() {
  if (scratch_.path().empty()) co_return InternalError("cannot create a temporary directory");
  std::string config_dir = args_.config_dir;
  if (config_dir.empty()) {
    config_dir = scratch_.path() + "/config";
    std::filesystem::create_directory(config_dir);
    const std::vector<uint16_t> ports = PickPorts(kBuiltInServers);
    if (ports.size() != kBuiltInServers) co_return InternalError("no free loopback ports");
    const Status written = WriteBuiltInConfig(config_dir, ports, args_.mtls);
    if (!written.ok()) co_return written;
  }
  if (args_.mtls) {
    StatusOr<DemoCertificateFiles> made = WriteDemoCertificates(scratch_.path());
    if (!made.ok()) co_return made.status();
    certificates_ = *std::move(made);
    processes_.AddServerFlag("--xds-creds");
    std::printf("uxds demo: mutual TLS from xDS (A29): certificates in %s, client %s, server %s\n",
                scratch_.path().c_str(), kDemoClientSan, kDemoServerSan);
  }
  StatusOr<DemoConfig> config = ReadDemoConfig(config_dir, args_.target_name);
  if (!config.ok()) co_return config.status();
  config_ = *std::move(config);

  StatusOr<std::string> control_plane = co_await processes_.StartControlPlane(config_dir);
  if (!control_plane.ok()) co_return control_plane.status();
  std::printf("uxds demo: control plane %s serving %s\n", control_plane->c_str(),
              config_dir.c_str());
  for (const std::string& error : processes_.file_errors()) std::printf("  %s\n", error.c_str());
  bootstrap_file_ = scratch_.path() + "/bootstrap.json";
  const std::string bootstrap_json =
      DemoBootstrapJson(*control_plane, args_.mtls ? &certificates_ : nullptr);
  std::ofstream(bootstrap_file_) << bootstrap_json;
  StatusOr<Bootstrap> bootstrap = Bootstrap::FromJson(bootstrap_json);
  if (!bootstrap.ok()) co_return bootstrap.status();
  StatusOr<std::shared_ptr<XdsClientPool>> pool = XdsClientPool::Create(loop_, *bootstrap);
  if (!pool.ok()) co_return pool.status();
  pool_ = *std::move(pool);

  for (uint32_t priority : {0u, 1u}) {
    std::string names;
    for (const DemoEndpoint& endpoint : config_.endpoints) {
      if (endpoint.priority == priority) names += "  " + endpoint.name + " " + endpoint.address;
    }
    std::printf("  priority %u:%s\n", priority, names.c_str());
  }
  progress_.Show("starting " + std::to_string(config_.endpoints.size()) + " servers");
  const Status started = co_await processes_.StartServers(config_.endpoints, bootstrap_file_);
  progress_.Clear();
  Step(1, started.ok(),
       std::to_string(config_.endpoints.size()) +
           " xDS-enabled TestService servers (uxds serve) got their Listeners and serve" +
           (started.ok() ? "" : ": " + started.message()));
  co_return started;
}

Task<void> Demo::SpreadAndStickiness(DemoClient& client) {
  const std::vector<DemoEndpoint> primary = client.Priority(0);
  const std::vector<DemoEndpoint> backup = client.Priority(1);
  CallTally spread = co_await client.Send(HeaderValues(0, args_.calls), "spread over priority 0");
  bool every_primary_used = true;
  for (const DemoEndpoint& endpoint : primary)
    every_primary_used &= spread.per_server.count(endpoint.name) > 0;
  spread_servers_ = spread.servers_of_value;
  Step(2, spread.failed == 0 && every_primary_used && spread.AnsweredBy(primary) == spread.calls,
       std::to_string(spread.calls) + " calls, each its own " + config_.hash_header +
           " value, spread over priority 0: " + spread.Spread(primary) +
           "; priority 1: " + std::to_string(spread.AnsweredBy(backup)) +
           (spread.failed ? "; " + std::to_string(spread.failed) + " failed: " + spread.first_error
                          : ""));

  std::vector<std::string> values;
  const std::vector<std::string> names = {"alice", "bob", "carol", "dave", "erin"};
  for (int i = 0; i < kStickyCallsPerValue; ++i)
    values.insert(values.end(), names.begin(), names.end());
  CallTally sticky = co_await client.Send(values, "same value, same server");
  bool one_server_each = true;
  std::string mapping;
  for (const std::string& name : names) {
    const std::set<std::string>& servers = sticky.servers_of_value[name];
    one_server_each &= servers.size() == 1;
    mapping += (mapping.empty() ? "" : ", ") + name + " ->";
    for (const std::string& server : servers) mapping += " " + server;
  }
  Step(3, sticky.failed == 0 && one_server_each,
       std::to_string(sticky.calls) + " calls, " + std::to_string(kStickyCallsPerValue) + " per " +
           config_.hash_header + " value, each value always on one server: " + mapping);
}

Task<void> Demo::FailoverAndRecovery(DemoClient& client) {
  const std::vector<DemoEndpoint> primary = client.Priority(0);
  const std::vector<DemoEndpoint> backup = client.Priority(1);
  progress_.Show("stopping the priority-0 servers");
  const Status stopped = co_await processes_.StopServers(primary);
  progress_.Clear();
  CallTally failover =
      co_await client.Send(HeaderValues(10'000, args_.calls / 2), "failover to priority 1");
  bool every_backup_used = true;
  for (const DemoEndpoint& endpoint : backup)
    every_backup_used &= failover.per_server.count(endpoint.name) > 0;
  Step(4,
       stopped.ok() && failover.failed == 0 && every_backup_used &&
           failover.AnsweredBy(backup) == failover.calls,
       "priority-0 servers stopped; " + std::to_string(failover.calls) +
           " calls failed over to priority 1: " + failover.Spread(backup) +
           "; priority 0: " + std::to_string(failover.AnsweredBy(primary)) +
           (stopped.ok() ? "" : "; " + stopped.message()) +
           (failover.failed
                ? "; " + std::to_string(failover.failed) + " failed: " + failover.first_error
                : ""));

  const Clock::time_point restart = Clock::now();
  progress_.Show("restarting the priority-0 servers");
  const Status restarted = co_await processes_.StartServers(primary, bootstrap_file_);
  progress_.Clear();
  // The channel reconnects on its own (backoff) and goes back to priority 0
  // once it is READY again (A56). Step 2's header values again, until each
  // reaches the server it reached then (the ring is the same).
  const std::vector<std::string> values = HeaderValues(0, std::min(args_.calls, 100));
  CallTally batch;
  bool recovered = false;
  while (restarted.ok() && !recovered && Clock::now() - restart < kRecoveryTimeout) {
    batch = co_await client.Send(values, "recovery");
    recovered = batch.failed == 0;
    for (const std::string& value : values) {
      recovered &= batch.servers_of_value[value] == spread_servers_[value];
    }
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - restart);
  Step(5, recovered,
       "priority-0 servers restarted; after " + std::to_string(took.count()) + " ms " +
           std::to_string(batch.calls) + " calls with step 2's " + config_.hash_header +
           " values reach the same servers as in step 2: " + batch.Spread(primary) +
           "; priority 1: " + std::to_string(batch.AnsweredBy(backup)) +
           (restarted.ok() ? "" : "; " + restarted.message()));
}

// A40: the client's cache (in process) and a server's, read over CSDS.
Task<void> Demo::ShowCsds() {
  StatusOr<std::shared_ptr<XdsClient>> xds_client = pool_->Get(config_.target);
  std::vector<CsdsClientStatus> clients;
  if (xds_client.ok()) clients.push_back(CsdsStatusOf(**xds_client, config_.target));
  std::string client_missing = "no XdsClient";
  const bool client_acked =
      !clients.empty() &&
      AllAcked(clients[0], {"Listener", "RouteConfiguration", "Cluster", "ClusterLoadAssignment"},
               client_missing);
  const DemoEndpoint& server = config_.endpoints.front();
  ChannelOptions to_server_options;
  if (args_.mtls) to_server_options.credentials = TlsToServers(true);
  StatusOr<std::unique_ptr<Channel>> to_server =
      Channel::Create(loop_, server.address, to_server_options);
  StatusOr<std::vector<CsdsClientStatus>> server_clients =
      to_server.ok() ? StatusOr<std::vector<CsdsClientStatus>>(UnavailableError(""))
                     : to_server.status();
  if (to_server.ok()) {
    CallOptions options;
    options.timeout = 10s;
    options.wait_for_ready = true;  // a new channel: its connection is not up yet
    server_clients = co_await FetchClientStatus(**to_server, options);
    co_await (*to_server)->Shutdown();
  }
  std::string server_missing =
      server_clients.ok() ? "no XdsClient" : server_clients.status().ToString();
  const bool server_acked = server_clients.ok() && !server_clients->empty() &&
                            AllAcked(server_clients->front(), {"Listener"}, server_missing);
  Step(6, client_acked && server_acked,
       "CSDS: the client's resources (" + config_.target + ") and server " + server.name +
           "'s Listener (FetchClientStatus on " + server.address + ") are ACKED" +
           (client_acked ? "" : "; client: " + client_missing) +
           (server_acked ? "" : "; server: " + server_missing));
  if (server_clients.ok())
    clients.insert(clients.end(), server_clients->begin(), server_clients->end());
  std::printf("\n%s", CsdsTable(clients).c_str());
}

// A29: the servers take only clients the demo CA vouches for: a plaintext
// client and a TLS client without a certificate are both refused.
Task<void> Demo::RefuseClientsWithoutCertificates() {
  const DemoEndpoint& server = config_.endpoints.front();
  std::string outcomes;
  bool refused = true;
  for (const bool tls : {false, true}) {
    ChannelOptions options;
    if (tls) options.credentials = TlsToServers(false);
    StatusOr<std::unique_ptr<Channel>> channel = Channel::Create(loop_, server.address, options);
    StatusOr<UnaryResponse> reply = UnavailableError("no channel");
    if (!channel.ok()) reply = channel.status();
    if (channel.ok()) {
      CallOptions call;
      call.timeout = 5s;
      reply = co_await (*channel)->UnaryCall("/grpc.testing.TestService/EmptyCall", "", call);
      co_await (*channel)->Shutdown();
    }
    refused = refused && !reply.ok();
    outcomes += tls ? "; TLS without a certificate: " : ": plaintext: ";
    outcomes += reply.ok() ? "answered" : std::string(StatusCodeName(reply.status().code()));
  }
  Step(7, refused,
       "server " + server.name + " refuses clients without a certificate from the demo CA" +
           outcomes);
}

// A41: the servers' RBAC policy admits the demo client's identity to every
// test service method but one; that one is refused before any handler runs.
Task<void> Demo::RefuseCallByRbac(Channel& channel) {
  CallOptions call;
  call.timeout = 5s;
  StatusOr<UnaryResponse> reply = co_await channel.UnaryCall(kRbacRefusedMethod, "", call);
  const bool refused = !reply.ok() && reply.status().code() == StatusCode::kPermissionDenied;
  Step(8, refused,
       std::string("RBAC on the servers refuses ") + kRbacRefusedMethod + " to " + kDemoClientSan +
           " (the other steps' calls were admitted): " +
           (reply.ok() ? std::string("answered")
                       : std::string(StatusCodeName(reply.status().code())) + " \"" +
                             reply.status().message() + "\""));
}

Task<int> Demo::Run() {
  const Clock::time_point start = Clock::now();
  const Status prepared = co_await Prepare();
  if (!prepared.ok()) {
    std::fprintf(stderr, "uxds demo: %s\n", prepared.message().c_str());
    ShowLogs();
    co_return kExitRuntimeError;
  }
  ChannelOptions options;
  options.xds_client_pool = pool_;
  // Quick reconnects, so that recovery shows within seconds (gRPC's
  // defaults back off up to 120 s).
  options.initial_backoff = 100ms;
  options.max_backoff = 500ms;
  // A29: the Cluster's UpstreamTlsContext decides (--mtls).
  options.credentials = ChannelCredentials::Xds(ChannelCredentials::Insecure());
  StatusOr<std::unique_ptr<Channel>> channel = Channel::Create(loop_, config_.target, options);
  if (!channel.ok()) {
    std::fprintf(stderr, "uxds demo: channel %s: %s\n", config_.target.c_str(),
                 channel.status().ToString().c_str());
    co_return kExitRuntimeError;
  }
  DemoClient client(**channel, config_, progress_);
  co_await SpreadAndStickiness(client);
  co_await FailoverAndRecovery(client);
  co_await ShowCsds();
  if (args_.mtls) {
    co_await RefuseClientsWithoutCertificates();
    co_await RefuseCallByRbac(**channel);
  }
  co_await (*channel)->Shutdown();
  pool_.reset();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  std::printf("\nuxds demo: %s in %.1f s (%d of %d steps failed)\n",
              failures_ == 0 ? "PASS" : "FAIL", took.count() / 1000.0, failures_, steps());
  if (failures_ > 0) ShowLogs();
  co_return failures_ == 0 ? kExitOk : kExitRuntimeError;
}

int WriteConfigAndExit(const std::string& dir) {
  const std::vector<uint16_t> ports = PickPorts(kBuiltInServers);
  const Status written = ports.size() == kBuiltInServers ? WriteBuiltInConfig(dir, ports)
                                                         : InternalError("no free loopback ports");
  if (!written.ok()) {
    std::fprintf(stderr, "uxds demo: %s\n", written.message().c_str());
    return kExitRuntimeError;
  }
  std::printf("uxds demo: wrote the built-in config to %s\n", dir.c_str());
  return kExitOk;
}

}  // namespace

int RunDemo(const std::vector<std::string>& args) {
  CLI::App app{
      "The xDS demo on loopback: a control plane, six xDS-enabled TestService servers\n"
      "(ring hash over two priorities) and a client; each step prints PASS or FAIL.",
      "uxds demo"};
  DemoArgs parsed;
  app.add_option("--config", parsed.config_dir,
                 "serve this directory of resources instead of the built-in config; the demo "
                 "starts a server on each endpoint of its ClusterLoadAssignment")
      ->check(CLI::ExistingDirectory);
  app.add_option("--write-config", parsed.write_config_dir,
                 "write the built-in config (with free ports chosen now) into this existing "
                 "directory and exit: a start for --config")
      ->check(CLI::ExistingDirectory)
      ->excludes("--config");
  app.add_option("--target", parsed.target_name,
                 "the client's target is xds:///NAME (the Listener NAME)");
  app.add_option("--calls", parsed.calls, "calls in the spread step")->check(CLI::Range(8, 100000));
  app.add_flag("--mtls", parsed.mtls,
               "every call over mutual TLS configured only by xDS (A29), with certificates the\n"
               "demo makes; later steps show clients without a certificate refused, and a call\n"
               "the servers' RBAC policy (A41) denies")
      ->excludes("--config")
      ->excludes("--write-config");
  if (auto rc = ParseCommandLine(app, args)) return *rc;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!parsed.write_config_dir.empty()) return WriteConfigAndExit(parsed.write_config_dir);
  if (!parsed.config_dir.empty()) parsed.config_dir = std::filesystem::absolute(parsed.config_dir);

  // SIGINT and SIGTERM go to the stop watcher's signalfd, on every thread
  // (the loop's threads inherit the mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  DemoStopWatcher stop_watcher(signals);
  auto loop = Loop::Create();
  if (!loop.ok()) {
    std::fprintf(stderr, "uxds demo: %s\n", loop.status().ToString().c_str());
    return kExitRuntimeError;
  }
  Demo demo(**loop, parsed);
  return (*loop)->BlockOn(demo.Run());
}

}  // namespace uxds::tool
