// Unary round trip over loopback: the uxds client calling the uxds server
// (grpc.testing.TestService/UnaryCall), one call in flight at a time, so the
// figure is the latency of one call through both HTTP/2 stacks and the
// runtime backend (second argument: 0 io_uring, 1 epoll; both loops use it).
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "grpc/testing/messages.pb.h"
#include "http2/client_connection.h"
#include "loopback_server.h"
#include "test_service/test_service.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

void BM_UnaryRoundTrip(benchmark::State& state) {
  LoopOptions options;
  options.backend = state.range(1) == 0 ? RuntimeBackend::kIoUring : RuntimeBackend::kEpoll;
  state.SetLabel(RuntimeBackendName(*options.backend));
  ServerFixture server(options);
  auto loop = std::move(*Loop::Create(options));
  grpc::testing::SimpleRequest request;
  request.set_response_size(static_cast<int>(state.range(0)));
  std::string request_bytes = request.SerializeAsString();
  auto run = [&](Loop& l) -> Task<void> {
    auto conn = co_await http2::ClientConnection::Connect(
        l, SocketAddress::Loopback4(server.port()), http2::ClientConnectionOptions());
    if (!conn.ok()) {
      state.SkipWithError(conn.status().ToString().c_str());
      co_return;
    }
    for (auto _ : state) {
      auto response = co_await http2::UnaryCall(**conn, test_service::kUnaryCall, request_bytes);
      if (!response.ok()) {
        state.SkipWithError(response.status().ToString().c_str());
        break;
      }
      benchmark::DoNotOptimize(response->data());
    }
    co_await (*conn)->Close();
  };
  loop->BlockOn(run(*loop));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UnaryRoundTrip)->ArgsProduct({{0, 1024}, {0, 1}})->UseRealTime();

// Blocking full-length write and read (false: the peer went away).
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t put = write(fd, data, size);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    data += put;
    size -= static_cast<size_t>(put);
  }
  return true;
}
bool ReadAll(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t got = read(fd, data, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    data += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

// The floor under BM_UnaryRoundTrip: the same topology (a server thread,
// the client on the benchmark thread, one exchange in flight) with nothing
// but the kernel's loopback TCP in between. An echo thread on a blocking
// socket sends back whatever it reads; each iteration writes N bytes and
// reads N bytes back (first argument as BM_UnaryRoundTrip's, where it is
// the response's payload; 0 is one byte, since an empty exchange moves
// nothing). No RPC stack over TCP can beat it: the difference is what
// HTTP/2, gRPC framing and the runtime cost a call.
class TcpEchoThread {
 public:
  // Listens on 127.0.0.1:0; the thread accepts one connection and echoes
  // until the peer closes it.
  TcpEchoThread() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) return;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        listen(listener_, 1) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      close(listener_);
      listener_ = -1;
      return;
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Echo(); });
  }
  // The client closes its socket first, so the echo loop sees EOF and ends;
  // shutting the listener down wakes an accept() no client came to (Linux
  // fails it with EINVAL), so the join returns either way.
  ~TcpEchoThread() {
    if (listener_ >= 0) shutdown(listener_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (listener_ >= 0) close(listener_);
  }
  bool ok() const { return listener_ >= 0; }
  uint16_t port() const { return port_; }

 private:
  void Echo() {
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<char> buffer(64 << 10);
    while (true) {
      const ssize_t got = read(fd, buffer.data(), buffer.size());
      if (got <= 0) break;
      if (!WriteAll(fd, buffer.data(), static_cast<size_t>(got))) break;
    }
    close(fd);
  }

  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

void BM_TcpPingPong(benchmark::State& state) {
  const size_t size = state.range(0) == 0 ? 1 : static_cast<size_t>(state.range(0));
  TcpEchoThread echo;
  if (!echo.ok()) {
    state.SkipWithError("echo listener failed");
    return;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(echo.port());
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    state.SkipWithError(std::strerror(errno));
    if (fd >= 0) close(fd);
    return;
  }
  // As the HTTP/2 stacks do: no Nagle delay on a small write.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string out(size, 'x');
  std::string in(size, '\0');
  for (auto _ : state) {
    if (!WriteAll(fd, out.data(), size) || !ReadAll(fd, in.data(), size)) {
      state.SkipWithError("echo failed");
      break;
    }
    benchmark::DoNotOptimize(in.data());
  }
  close(fd);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size) * 2);
}
// Same first argument and timing as BM_UnaryRoundTrip, so BM_TcpPingPong/N
// pairs with BM_UnaryRoundTrip/N/*.
BENCHMARK(BM_TcpPingPong)->Arg(0)->Arg(1024)->UseRealTime();

// A request of the first argument's bytes (100: what the budget costs a
// small call; 1 and 4 MiB: large ones), with the server's request memory
// budget (second argument 1: the default 256 MiB, whose connection window
// starts at 64 KiB and grows as it is filled) and without it (0: a 16 MiB
// window from the start). Calls in a fresh connection each (third argument
// 1) show what the window's growth costs a cold connection; on one
// connection (0) the window has grown.
void BM_LargeRequest(benchmark::State& state) {
  LoopOptions options;
  options.backend = RuntimeBackend::kIoUring;
  http2::ServerOptions server_options;
  if (state.range(1) == 0) server_options.request_memory_budget = 0;
  state.SetLabel(state.range(1) == 0 ? "no budget" : "budget");
  ServerFixture server(options, server_options);
  auto loop = std::move(*Loop::Create(options));
  grpc::testing::SimpleRequest request;
  request.mutable_payload()->mutable_body()->assign(static_cast<size_t>(state.range(0)), 'x');
  const std::string request_bytes = request.SerializeAsString();
  const bool fresh_connections = state.range(2) == 1;
  auto run = [&](Loop& l) -> Task<void> {
    std::unique_ptr<http2::ClientConnection> conn;
    for (auto _ : state) {
      if (conn == nullptr) {
        auto connected = co_await http2::ClientConnection::Connect(
            l, SocketAddress::Loopback4(server.port()), http2::ClientConnectionOptions());
        if (!connected.ok()) {
          state.SkipWithError(connected.status().ToString().c_str());
          break;
        }
        conn = std::move(*connected);
      }
      auto response = co_await http2::UnaryCall(*conn, test_service::kUnaryCall, request_bytes);
      if (!response.ok()) {
        state.SkipWithError(response.status().ToString().c_str());
        break;
      }
      benchmark::DoNotOptimize(response->data());
      if (fresh_connections) {
        co_await conn->Close();
        conn.reset();
      }
    }
    if (conn != nullptr) co_await conn->Close();
  };
  loop->BlockOn(run(*loop));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_LargeRequest)
    ->ArgsProduct({{100, 1 << 20, 4 << 20}, {0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
