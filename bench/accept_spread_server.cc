// Not a benchmark: the gRPC TestService on N loops, its connections spread
// over them one of two ways, for tools/dev/accept_spread_compare.py to put
// under the same h2load load (docs/performance.md, "One listening socket per
// loop, or one acceptor").
//
//   accept_spread_server --loops N --mode reuseport|acceptor
//
// reuseport: a listening socket per loop on one port (SO_REUSEPORT), the
//   kernel choosing a socket for each connection by a hash of its
//   addresses: what uxds::Server and XdsServer do.
// acceptor: one listening socket on loop 0, which hands connections to the
//   loops in turn (round robin); loop 0 serves its share too. A connection
//   for another loop crosses as a descriptor through Loop::Post.
//
// Prints "PORT n" once serving; runs until killed.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "http2/server.h"
#include "runtime/tcp_socket.h"
#include "test_service/test_service.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

// A descriptor between two loops: closed if the closure carrying it is
// destroyed without running (its loop ended first).
class HandedFd {
 public:
  explicit HandedFd(int fd) : fd_(fd) {}
  ~HandedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  HandedFd(const HandedFd&) = delete;
  HandedFd& operator=(const HandedFd&) = delete;
  int Take() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

Task<void> AcceptAndHandOut(TcpListener& listener, std::vector<Loop*> loops,
                            std::vector<http2::Server*> servers) {
  size_t next = 0;
  while (true) {
    StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener.Accept();
    if (!socket.ok()) {
      if (socket.status().code() == StatusCode::kCancelled) co_return;
      continue;
    }
    const size_t k = next++ % servers.size();
    if (k == 0) {
      servers[0]->ServeAccepted(std::move(*socket));
      continue;
    }
    auto fd = std::make_shared<HandedFd>((*socket)->ReleaseFd());
    loops[k]->Post([fd, loop = loops[k], server = servers[k]] {
      server->ServeAccepted(std::make_unique<TcpSocket>(*loop, fd->Take()));
    });
  }
}

int Main(int argc, char** argv) {
  size_t loop_count = 2;
  std::string mode = "reuseport";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--loops") == 0) loop_count = std::stoul(argv[i + 1]);
    if (std::strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
  }
  if (loop_count == 0 || (mode != "reuseport" && mode != "acceptor")) {
    std::fprintf(stderr, "usage: accept_spread_server --loops N --mode reuseport|acceptor\n");
    return 2;
  }
  auto registry = std::make_shared<http2::ServiceRegistry>();
  test_service::RegisterTestService(*registry, "accept-spread");
  std::vector<std::unique_ptr<LoopThread>> threads;
  std::vector<Loop*> loops;
  for (size_t i = 0; i < loop_count; ++i) {
    threads.push_back(std::move(*LoopThread::Start()));
    loops.push_back(&threads.back()->loop());
  }
  // Everything below lives until the process is killed.
  std::vector<std::unique_ptr<http2::Server>> servers(loop_count);
  std::unique_ptr<TcpListener> listener;
  uint16_t port = 0;
  for (size_t i = 0; i < loop_count; ++i) {
    threads[i]->RunSync([&] {
      if (mode == "acceptor") {
        servers[i] = http2::Server::WithoutListener(*loops[i], registry);
        return;
      }
      StatusOr<std::unique_ptr<http2::Server>> server = http2::Server::Listen(
          *loops[i], SocketAddress::Loopback4(port), registry, {}, /*share_port=*/true);
      if (!server.ok()) {
        std::fprintf(stderr, "listen: %s\n", std::string(server.status().message()).c_str());
        std::exit(1);
      }
      servers[i] = std::move(*server);
      port = servers[i]->port();
      loops[i]->Spawn(servers[i]->Serve());
    });
  }
  if (mode == "acceptor") {
    threads[0]->RunSync([&] {
      listener = std::move(*TcpListener::Bind(*loops[0], SocketAddress::Loopback4(0)));
      port = listener->port();
      std::vector<http2::Server*> raw;
      for (auto& server : servers) raw.push_back(server.get());
      loops[0]->Spawn(AcceptAndHandOut(*listener, loops, raw));
    });
  }
  std::printf("PORT %u\n", port);
  std::fflush(stdout);
  while (true) ::pause();
}

}  // namespace
}  // namespace uxds

int main(int argc, char** argv) { return uxds::Main(argc, argv); }
