// Unary round trip over loopback: the uxds client calling the uxds server
// (grpc.testing.TestService/UnaryCall), one call in flight at a time, so the
// figure is the latency of one call through both HTTP/2 stacks and the
// runtime backend (second argument: 0 io_uring, 1 epoll; both loops use it).
#include <benchmark/benchmark.h>

#include "grpc/testing/messages.pb.h"
#include "http2/client_connection.h"
#include "http2/server.h"
#include "test_service/test_service.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

// Server on its own loop thread (as deployed); client on the benchmark thread.
class ServerFixture {
 public:
  explicit ServerFixture(const LoopOptions& options, http2::ServerOptions server_options = {}) {
    thread_ = std::move(*LoopThread::Start(options));
    auto registry = std::make_shared<http2::ServiceRegistry>();
    test_service::RegisterTestService(*registry, "bench");
    thread_->RunSync([&] {
      server_ = std::move(*http2::Server::Listen(thread_->loop(), SocketAddress::Loopback4(0),
                                                 registry, std::move(server_options)));
      thread_->loop().Spawn(server_->Serve());
    });
  }
  ~ServerFixture() {
    bool done = false;
    thread_->RunSync([&] {
      thread_->loop().Spawn([](http2::Server& s, bool& d) -> Task<void> {
        co_await s.Shutdown(std::chrono::milliseconds(100));
        d = true;
      }(*server_, done));
    });
    while (true) {
      bool finished = false;
      thread_->RunSync([&] { finished = done; });
      if (finished) break;
    }
    thread_->RunSync([&] { server_.reset(); });
  }
  uint16_t port() const { return server_->port(); }

 private:
  std::unique_ptr<LoopThread> thread_;
  std::unique_ptr<http2::Server> server_;
};

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
