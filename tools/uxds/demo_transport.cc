// `uxds demo`: the transport demo. A uxds gRPC server and client on
// loopback, calling each other and real gRPC peers (Debian's grpcio 1.51),
// printing what happened. It grows into the full xDS demo (control plane,
// xDS-enabled servers, routing, ring hash, failover) as those land.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "common/subprocess.h"
#include "grpc/testing/empty.pb.h"
#include "grpc/testing/messages.pb.h"
#include "http2/client_call.h"
#include "http2/client_connection.h"
#include "http2/server.h"
#include "test_service/test_service.h"
#include "tool_config.h"
#include "uxds/runtime.h"

namespace uxds::tool {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kPython = "/usr/bin/python3";  // Debian's grpcio lives here only

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void Report(const char* what, const Status& status, const std::string& detail, double ms) {
  std::printf("    %-28s %-18s %8.2f ms  %s\n", what,
              std::string(StatusCodeName(status.code())).c_str(), ms,
              status.ok() ? detail.c_str() : status.message().c_str());
}

// The calls the demo makes against any TestService server.
Task<int> CallTestService(Loop& loop, const SocketAddress& address, bool peer_has_behaviors) {
  int failures = 0;
  auto connection = co_await http2::ClientConnection::Connect(loop, address, {});
  if (!connection.ok()) {
    std::printf("    connect: %s\n", connection.status().ToString().c_str());
    co_return 1;
  }
  http2::ClientConnection& conn = **connection;

  auto start = Clock::now();
  auto empty = co_await http2::UnaryCall(conn, test_service::kEmptyCall,
                                         grpc::testing::Empty().SerializeAsString());
  Report("EmptyCall", empty.status(), "", MillisSince(start));
  failures += !empty.ok();

  grpc::testing::SimpleRequest request;
  request.set_response_size(1024);
  request.set_fill_server_id(true);
  request.mutable_payload()->set_body(std::string(512, 'x'));
  start = Clock::now();
  auto unary =
      co_await http2::UnaryCall(conn, test_service::kUnaryCall, request.SerializeAsString());
  std::string detail;
  if (unary.ok()) {
    grpc::testing::SimpleResponse response;
    response.ParseFromString(*unary);
    detail = "payload " + std::to_string(response.payload().body().size()) + " B, server_id \"" +
             response.server_id() + "\"";
  }
  Report("UnaryCall 512 B -> 1 KiB", unary.status(), detail, MillisSince(start));
  failures += !unary.ok();

  start = Clock::now();
  auto call = conn.StartCall(test_service::kFullDuplexCall);
  int responses = 0;
  Status stream_status;
  for (int i = 0; i < 3 && stream_status.ok(); ++i) {
    grpc::testing::StreamingOutputCallRequest message;
    message.add_response_parameters()->set_size(100 * (i + 1));
    stream_status = co_await call->Write(message.SerializeAsString());
    if (stream_status.ok() && co_await call->Read()) ++responses;
  }
  (void)co_await call->WritesDone();
  while (co_await call->Read()) ++responses;
  stream_status = co_await call->Finish();
  Report("FullDuplexCall x3 (bidi)", stream_status, std::to_string(responses) + " responses",
         MillisSince(start));
  failures += !stream_status.ok() || responses != 3;

  // A status travels in the trailers, message percent-encoded on the wire.
  grpc::testing::SimpleRequest failing;
  failing.mutable_response_status()->set_code(static_cast<int>(StatusCode::kNotFound));
  failing.mutable_response_status()->set_message("no such thing: caf\xc3\xa9 100%");
  start = Clock::now();
  auto failed =
      co_await http2::UnaryCall(conn, test_service::kUnaryCall, failing.SerializeAsString());
  Report("UnaryCall asking NOT_FOUND", failed.status(), "", MillisSince(start));
  failures += failed.status().code() != StatusCode::kNotFound;

  if (peer_has_behaviors) {
    // The peer sleeps 500 ms; our 100 ms deadline ends the call first.
    // (A named local: g++ 12 cannot take a braced temporary in a co_await.)
    http2::Metadata slow_metadata = {{"x-uxds-behavior", "delay-ms=500"}};
    std::string slow_request = grpc::testing::SimpleRequest().SerializeAsString();
    start = Clock::now();
    auto slow = co_await http2::UnaryCall(conn, test_service::kUnaryCall, slow_request,
                                          slow_metadata, Loop::Clock::now() + 100ms);
    Report("UnaryCall, 100 ms deadline", slow.status(), "", MillisSince(start));
    failures += slow.status().code() != StatusCode::kDeadlineExceeded;
  }
  co_await conn.Close();
  co_return failures;
}

// Runs the grpcio test client against our server; prints its JSON lines.
int RunPeerClient(uint16_t port, const std::string& call, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {kPython,    UXDS_SOURCE_ROOT "/tests/peers/grpc_test_client.py",
                                   "--target", "127.0.0.1:" + std::to_string(port),
                                   "--call",   call};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Subprocess client = Subprocess::Start(argv);
  while (auto line = client.ReadLine(30s)) std::printf("    grpcio: %s\n", line->c_str());
  int rc = client.Wait(30s);
  return rc == 0 ? 0 : 1;
}

}  // namespace

int RunDemo(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "usage: uxds demo\n");
    return kExitUsage;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // Our server runs on its own loop thread, as a server would.
  auto server_thread = LoopThread::Start();
  if (!server_thread.ok()) {
    std::fprintf(stderr, "uxds demo: %s\n", server_thread.status().ToString().c_str());
    return kExitRuntimeError;
  }
  // The runtime backend: io_uring, or epoll where io_uring is unavailable
  // or UXDS_RUNTIME=epoll forces it.
  std::printf("uxds demo: gRPC over HTTP/2 on %s, on loopback\n\n",
              RuntimeBackendName((*server_thread)->loop().backend()));
  auto registry = std::make_shared<http2::ServiceRegistry>();
  test_service::RegisterTestService(*registry, "uxds-demo-server");
  std::unique_ptr<http2::Server> server;
  Status listen_status;
  Loop& server_loop = (*server_thread)->loop();
  (*server_thread)->RunSync([&] {
    auto s = http2::Server::Listen(server_loop, SocketAddress::Loopback4(0), registry);
    if (!s.ok()) {
      listen_status = s.status();
      return;
    }
    server = std::move(*s);
    server_loop.Spawn(server->Serve());
  });
  if (!listen_status.ok()) {
    std::fprintf(stderr, "uxds demo: %s\n", listen_status.ToString().c_str());
    return kExitRuntimeError;
  }
  uint16_t port = server->port();
  std::printf("[1] uxds server: grpc.testing.TestService on 127.0.0.1:%u\n", port);

  auto client_loop = Loop::Create();
  if (!client_loop.ok()) {
    std::fprintf(stderr, "uxds demo: %s\n", client_loop.status().ToString().c_str());
    return kExitRuntimeError;
  }
  Loop& loop = **client_loop;
  int failures = 0;

  std::printf("\n[2] uxds client -> uxds server\n");
  failures += loop.BlockOn(CallTestService(loop, SocketAddress::Loopback4(port), false));

  std::printf("\n[3] uxds client -> grpcio 1.51 server (peer process)\n");
  Subprocess peer = Subprocess::Start(
      {kPython, UXDS_SOURCE_ROOT "/tests/peers/grpc_test_server.py", "--server-id", "grpcio-peer"});
  auto peer_port = peer.WaitForLine("PORT ", 60s);
  if (!peer_port) {
    std::printf("    the grpcio peer did not start (is python3-grpcio installed?)\n");
    ++failures;
  } else {
    auto address = SocketAddress::Loopback4(static_cast<uint16_t>(std::stoi(*peer_port)));
    failures += loop.BlockOn(CallTestService(loop, address, true));
  }
  peer.Signal(SIGTERM);
  peer.Wait(10s);

  std::printf("\n[4] grpcio 1.51 client (peer process) -> uxds server\n");
  failures += RunPeerClient(port, "EmptyCall", {});
  failures += RunPeerClient(port, "UnaryCall", {"--response-size", "2048", "--fill-server-id"});
  failures += RunPeerClient(port, "FullDuplexCall", {"--messages", "3"});

  std::printf("\n[5] uxds server: graceful drain (GOAWAY, in-flight calls finish, close)\n");
  auto drain_start = Clock::now();
  std::atomic<bool> drained{false};
  (*server_thread)->RunSync([&] {
    server_loop.Spawn([](http2::Server& s, std::atomic<bool>& done) -> Task<void> {
      co_await s.Shutdown(2s);
      done = true;
    }(*server, drained));
  });
  while (!drained) std::this_thread::sleep_for(1ms);
  std::printf("    drained in %.2f ms\n", MillisSince(drain_start));
  // The server belongs to its loop: destroy it there, then stop the loop.
  (*server_thread)->RunSync([&] { server.reset(); });
  server_thread->reset();

  std::printf("\n%s (%d failure%s)\n", failures == 0 ? "demo OK" : "demo FAILED", failures,
              failures == 1 ? "" : "s");
  return failures == 0 ? kExitOk : kExitRuntimeError;
}

}  // namespace uxds::tool
