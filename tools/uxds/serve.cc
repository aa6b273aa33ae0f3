// `uxds serve --bootstrap F --listen ADDR [--hostname NAME]`: an xDS-enabled
// server (A36) with grpc.testing.TestService (UnaryCall fills `hostname`),
// grpc.health.v1.Health and the CSDS service (so `uxds csds` can read its
// XdsClient). Prints one JSON line per serving-status change:
//   {"address":"0.0.0.0:8080","serving":true}
//   {"address":"0.0.0.0:8080","serving":false,"code":"UNAVAILABLE","error":"..."}
// Runs until SIGINT or SIGTERM, then drains for --drain-grace-ms (1000).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "address_check.h"
#include "cli.h"
#include "commands.h"
#include "test_service/test_service.h"
#include "uxds/bootstrap.h"
#include "uxds/runtime.h"
#include "uxds/server.h"
#include "uxds/service_registry.h"
#include "uxds/xds_client_pool.h"

namespace uxds::tool {

namespace {

constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kHealthWatch[] = "/grpc.health.v1.Health/Watch";

// grpc.health.v1.HealthCheckResponse{status: SERVING}: field 1 (varint) = 1.
// Two bytes, written out rather than generated, so that the library's protos
// stay the xDS ones.
std::string ServingHealth() { return std::string("\x08\x01", 2); }

// HealthCheckRequest has one field, `service` (1, a string): anything else
// is not one.
bool IsHealthCheckRequest(std::string_view bytes) {
  if (bytes.empty()) return true;
  if (bytes[0] != 0x0a || bytes.size() < 2) return false;
  const auto length = static_cast<unsigned char>(bytes[1]);
  return length < 0x80 && bytes.size() == 2u + length;
}

// grpc.health.v1.Health: the server answers SERVING whenever an RPC reaches
// it (while not serving, connections never get this far).
void RegisterHealthService(ServiceRegistry& registry) {
  registry.Register(
      kHealthCheck,
      MakeUnaryHandler([](ServerCall&, std::string request) -> Task<StatusOr<std::string>> {
        if (!IsHealthCheckRequest(request)) {
          co_return InvalidArgumentError("HealthCheckRequest does not parse");
        }
        co_return ServingHealth();
      }));
  registry.Register(kHealthWatch, [](ServerCall& call) -> Task<Status> {
    auto request = co_await call.Read();
    if (!request.has_value()) co_return InvalidArgumentError("no HealthCheckRequest");
    const Status written = co_await call.Write(ServingHealth());
    if (!written.ok()) co_return written;
    // The status never changes while the call lasts: wait for its end.
    Event never(call.loop());
    const Status ended = co_await never.Wait();
    co_return ended;
  });
}

std::string StatusLine(std::string_view address, const Status& status) {
  nlohmann::json line = {{"address", std::string(address)}, {"serving", status.ok()}};
  if (!status.ok()) {
    line["code"] = std::string(StatusCodeName(status.code()));
    line["error"] = status.message();
  }
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string LocalHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "uxds";
  return name;
}

}  // namespace

int RunServe(const std::vector<std::string>& args) {
  std::string bootstrap_file;
  std::string listen;
  std::string hostname;
  int64_t drain_grace_ms = 1000;
  // gRFC A9 connection management; 0 means never (no limit for the grace).
  int64_t max_connection_idle_ms = kDefaultMaxConnectionIdle.count();
  int64_t max_connection_age_ms = 0;
  int64_t max_connection_age_grace_ms = 0;
  int64_t max_connections = static_cast<int64_t>(XdsServerOptions{}.max_connections);
  int64_t request_memory_mib = static_cast<int64_t>(kDefaultRequestMemoryBudget >> 20);
  int64_t loops = 0;
  bool xds_creds = false;
  CLI::App app{
      "An xDS-enabled server (A36): grpc.testing.TestService, grpc.health.v1.Health and\n"
      "CSDS; one JSON line per serving-status change on stdout. Runs until SIGINT or\n"
      "SIGTERM, then drains.",
      "uxds serve"};
  app.add_option("--bootstrap", bootstrap_file, "xDS bootstrap (gRPC format)")
      ->required()
      ->type_name("FILE");
  app.add_option("--listen", listen, "the listening address, e.g. 0.0.0.0:8080")
      ->required()
      ->check(ListenAddress());
  app.add_option("--hostname", hostname,
                 "the hostname UnaryCall answers with (default: this machine's)")
      ->type_name("NAME");
  app.add_option("--drain-grace-ms", drain_grace_ms,
                 "how long calls may still run while the server drains on exit")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}))
      ->capture_default_str();
  constexpr int64_t kWeekMs = int64_t{7} * 24 * 3'600'000;
  app.add_option("--max-connection-idle-ms", max_connection_idle_ms,
                 "drain a connection with no call open for this long (0: never)")
      ->check(CLI::Range(int64_t{0}, kWeekMs))
      ->capture_default_str();
  app.add_option("--max-connection-age-ms", max_connection_age_ms,
                 "drain every connection this old, +-10% jitter (0: never)")
      ->check(CLI::Range(int64_t{0}, kWeekMs))
      ->capture_default_str();
  app.add_option("--max-connection-age-grace-ms", max_connection_age_grace_ms,
                 "how long calls may still run on a connection drained for its age or\n"
                 "idleness (0: until they end)")
      ->check(CLI::Range(int64_t{0}, kWeekMs))
      ->capture_default_str();
  app.add_option("--max-connections", max_connections,
                 "connections served at once; more are closed at accept")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--request-memory-mib", request_memory_mib,
                 "request bytes all connections may hold, with their peers' credit;\n"
                 "past it peers wait for handlers to read (0: no server-wide bound)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--loops", loops,
                 "loops serving connections, each on its own thread and socket (0: one per CPU)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}))
      ->capture_default_str();
  app.add_flag("--xds-creds", xds_creds,
               "xDS credentials (A29): a filter chain's DownstreamTlsContext makes the\n"
               "connections it accepts TLS; chains without one are plaintext");
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  if (hostname.empty()) hostname = LocalHostname();
  StatusOr<Bootstrap> bootstrap = Bootstrap::FromFile(bootstrap_file);
  if (!bootstrap.ok()) {
    std::fprintf(stderr, "uxds serve: %s\n", bootstrap.status().ToString().c_str());
    return kExitRuntimeError;
  }
  // Signals are taken by sigwait below, not by a handler on some thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto control = LoopThread::Start();
  if (!control.ok()) {
    std::fprintf(stderr, "uxds serve: %s\n", control.status().ToString().c_str());
    return kExitRuntimeError;
  }
  Loop& loop = (*control)->loop();
  std::shared_ptr<XdsClientPool> pool;
  std::unique_ptr<XdsServer> server;
  Status started;
  (*control)->RunSync([&] {
    auto created_pool = XdsClientPool::Create(loop, *std::move(bootstrap));
    if (!created_pool.ok()) {
      started = created_pool.status();
      return;
    }
    pool = *std::move(created_pool);
    auto registry = std::make_shared<ServiceRegistry>();
    test_service::RegisterTestService(*registry, hostname, hostname);
    RegisterHealthService(*registry);
    pool->RegisterCsdsService(*registry);
    XdsServerOptions options;
    options.xds_client_pool = pool;
    if (xds_creds) options.credentials = ServerCredentials::Xds(ServerCredentials::Insecure());
    options.max_connection_idle = std::chrono::milliseconds(max_connection_idle_ms);
    options.max_connection_age = std::chrono::milliseconds(max_connection_age_ms);
    options.max_connection_age_grace = max_connection_age_grace_ms == 0
                                           ? kNoTimeLimit
                                           : std::chrono::milliseconds(max_connection_age_grace_ms);
    options.max_connections = static_cast<size_t>(max_connections);
    options.request_memory_budget = static_cast<size_t>(request_memory_mib) << 20;
    options.serving_loops = static_cast<size_t>(loops);
    options.serving_status = [](std::string_view address, const Status& status) {
      std::printf("%s\n", StatusLine(address, status).c_str());
      std::fflush(stdout);
    };
    auto created = XdsServer::Create(listen, std::move(registry), std::move(options));
    if (!created.ok()) {
      started = created.status();
      return;
    }
    server = *std::move(created);
    server->Start();
  });
  if (!started.ok()) {
    std::fprintf(stderr, "uxds serve: %s\n", started.ToString().c_str());
    (*control)->RunSync([&] { pool.reset(); });
    return kExitRuntimeError;
  }
  std::fprintf(stderr, "uxds serve: watching Listener %s\n",
               server->listener_resource_name().c_str());

  int sig = 0;
  sigwait(&signals, &sig);
  std::promise<void> drained;
  (*control)->RunSync([&] {
    loop.Spawn(
        [](XdsServer& s, std::chrono::milliseconds grace, std::promise<void>& done) -> Task<void> {
          co_await s.Shutdown(grace);
          done.set_value();
        }(*server, std::chrono::milliseconds(drain_grace_ms), drained));
  });
  drained.get_future().wait();
  (*control)->RunSync([&] {
    server.reset();
    pool.reset();
  });
  return kExitOk;
}

}  // namespace uxds::tool
