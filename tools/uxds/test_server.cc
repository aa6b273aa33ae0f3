// `uxds test-server`: grpc.testing.TestService on a uxds server until SIGINT
// or SIGTERM. What benches load with h2load, side by side with the gRPC C++
// peer serving the same methods.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "commands.h"
#include "http2/server.h"
#include "test_service/test_service.h"
#include "uxds/runtime.h"

namespace uxds::tool {

int RunTestServer(const std::vector<std::string>& args) {
  int port = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--port" && i + 1 < args.size()) {
      port = std::atoi(args[++i].c_str());
    } else {
      std::fprintf(stderr, "usage: uxds test-server [--port N]\n");
      return kExitUsage;
    }
  }
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
  auto registry = std::make_shared<http2::ServiceRegistry>();
  test_service::RegisterTestService(*registry, "uxds-test-server");
  std::unique_ptr<http2::Server> server;
  Status status;
  (*loop_thread)->RunSync([&] {
    auto s = http2::Server::Listen(loop, SocketAddress::Loopback4(static_cast<uint16_t>(port)),
                                   registry);
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
  std::atomic<bool> drained{false};
  (*loop_thread)->RunSync([&] {
    loop.Spawn([](http2::Server& s, std::atomic<bool>& done) -> Task<void> {
      co_await s.Shutdown(std::chrono::seconds(1));
      done = true;
    }(*server, drained));
  });
  while (!drained) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  (*loop_thread)->RunSync([&] { server.reset(); });
  return kExitOk;
}

}  // namespace uxds::tool
