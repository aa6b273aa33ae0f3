// `uxds test-server`: grpc.testing.TestService on a uxds server until SIGINT
// or SIGTERM. What benches load with h2load, side by side with the gRPC C++
// peer serving the same methods.
#include <signal.h>

#include <cstdio>
#include <future>
#include <string>

#include "cli.h"
#include "commands.h"
#include "test_service/test_service.h"
#include "uxds/runtime.h"
#include "uxds/server.h"

namespace uxds::tool {

int RunTestServer(const std::vector<std::string>& args) {
  uint16_t port = 0;
  CLI::App app{
      "Serves grpc.testing.TestService on 127.0.0.1 until SIGINT or SIGTERM; prints\n"
      "\"PORT N\" once it listens.",
      "uxds test-server"};
  app.add_option("--port", port, "the port to listen on (0: a free one)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  int64_t loops = 0;
  app.add_option("--loops", loops,
                 "loops serving connections, each on its own thread and socket (0: one per CPU)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}))
      ->capture_default_str();
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  // Signals are taken by sigwait below, not by a handler on some thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto loop_thread = LoopThread::Start();
  if (!loop_thread.ok()) {
    std::fprintf(stderr, "uxds test-server: %s\n", loop_thread.status().ToString().c_str());
    return kExitRuntimeError;
  }
  Loop& loop = (*loop_thread)->loop();
  auto registry = std::make_shared<ServiceRegistry>();
  test_service::RegisterTestService(*registry, "uxds-test-server");
  std::unique_ptr<Server> server;
  Status status;
  (*loop_thread)->RunSync([&] {
    ServerOptions options;
    options.loops = static_cast<size_t>(loops);
    auto s = Server::Listen(loop, "127.0.0.1:" + std::to_string(port), registry, options);
    if (!s.ok()) {
      status = s.status();
      return;
    }
    server = std::move(*s);
    loop.Spawn(server->Serve());
  });
  if (!status.ok()) {
    std::fprintf(stderr, "uxds test-server: %s\n", status.ToString().c_str());
    return kExitRuntimeError;
  }
  std::printf("PORT %u\n", server->port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  std::promise<void> drained;
  (*loop_thread)->RunSync([&] {
    loop.Spawn([](Server& s, std::promise<void>& done) -> Task<void> {
      co_await s.Shutdown(std::chrono::seconds(1));
      done.set_value();
    }(*server, drained));
  });
  drained.get_future().wait();
  (*loop_thread)->RunSync([&] { server.reset(); });
  return kExitOk;
}

}  // namespace uxds::tool
