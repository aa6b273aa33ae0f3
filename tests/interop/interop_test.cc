// uxds against real gRPC implementations over loopback:
//  (a) the uxds client calling grpcio 1.51 and gRPC C++ 1.51 servers,
//  (b) a grpcio 1.51 client calling the uxds server,
//  (c) deadlines, cancellation, oversize messages, GOAWAY mid-stream and a
//      peer killed mid-stream, each ending in the right status,
// plaintext and TLS, plus h2load loading the uxds server.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "grpc/testing/empty.pb.h"
#include "grpc/testing/messages.pb.h"
#include "http2/client_call.h"
#include "http2/client_connection.h"
#include "http2/server.h"
#include "http2_test_util.h"
#include "support/test_support.h"
#include "test_service/test_service.h"
#include "tls/tls.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;
using http2::testing::WaitUntil;
using testing::MakeTestCertificates;
using testing::Python;
using testing::SourceRoot;
using testing::TempDir;

std::string PeerScript(const char* name) { return SourceRoot() + "/tests/peers/" + name; }

// A peer server process that prints "PORT <n>".
struct PeerServer {
  std::optional<Subprocess> process;
  uint16_t port = 0;

  static PeerServer Start(std::vector<std::string> argv) {
    PeerServer s;
    s.process.emplace(Subprocess::Start(argv));
    auto line = s.process->WaitForLine("PORT ", 60s);
    EXPECT_TRUE(line.has_value()) << "peer did not start: " << argv[0];
    if (line) s.port = static_cast<uint16_t>(std::stoi(*line));
    return s;
  }
  SocketAddress address() const { return SocketAddress::Loopback4(port); }
};

std::string SimpleRequestBytes(int response_size) {
  grpc::testing::SimpleRequest request;
  request.set_response_size(response_size);
  request.mutable_payload()->set_body(std::string(100, 'q'));
  return request.SerializeAsString();
}

std::string StreamingRequestBytes(int response_size) {
  grpc::testing::StreamingOutputCallRequest request;
  request.add_response_parameters()->set_size(response_size);
  return request.SerializeAsString();
}

class InteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
  }

  const testing::TestCertificates& certs() {
    if (!certs_) certs_ = MakeTestCertificates(temp_.path());
    return *certs_;
  }

  PeerServer StartGrpcioServer(bool tls) {
    std::vector<std::string> argv = {Python(), PeerScript("grpc_test_server.py"), "--server-id",
                                     "grpcio-peer"};
    if (tls) {
      argv.insert(argv.end(), {"--tls-cert", certs().server_cert, "--tls-key", certs().server_key});
    }
    return PeerServer::Start(argv);
  }

  http2::ClientConnectionOptions ClientOptions(bool tls) {
    http2::ClientConnectionOptions options;
    if (tls) {
      TlsClientConfig config;
      config.ca_certificate_file = certs().ca_cert;
      auto ctx = TlsClientContext::Create(config);
      EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
      if (ctx.ok()) options.tls = *ctx;
      options.tls_server_name = "localhost";
    }
    return options;
  }

  // Unary and bidi calls from the uxds client to a TestService server.
  void CallsSucceed(const SocketAddress& address, bool tls, const std::string& server_id) {
    auto options = ClientOptions(tls);
    loop_->BlockOn([](Loop& loop, SocketAddress a, http2::ClientConnectionOptions o,
                      std::string id) -> Task<void> {
      auto conn = co_await http2::ClientConnection::Connect(loop, a, std::move(o));
      CO_ASSERT_OK(conn);
      auto empty = co_await http2::UnaryCall(**conn, test_service::kEmptyCall,
                                             grpc::testing::Empty().SerializeAsString());
      CO_ASSERT_OK(empty);

      grpc::testing::SimpleRequest request;
      request.set_response_size(3000);
      request.set_fill_server_id(true);
      std::string request_bytes = request.SerializeAsString();
      auto unary = co_await http2::UnaryCall(**conn, test_service::kUnaryCall, request_bytes);
      CO_ASSERT_OK(unary);
      grpc::testing::SimpleResponse response;
      EXPECT_TRUE(response.ParseFromString(*unary));
      EXPECT_EQ(response.payload().body().size(), 3000u);
      if (!id.empty()) {
        EXPECT_EQ(response.server_id(), id);
      }

      // Bidi ping-pong: every response arrives before the next request.
      auto call = (*conn)->StartCall(test_service::kFullDuplexCall);
      for (int i = 1; i <= 5; ++i) {
        EXPECT_TRUE((co_await call->Write(StreamingRequestBytes(i * 1000))).ok());
        auto message = co_await call->Read();
        CO_ASSERT_TRUE(message.has_value());
        grpc::testing::StreamingOutputCallResponse streamed;
        EXPECT_TRUE(streamed.ParseFromString(*message));
        EXPECT_EQ(streamed.payload().body().size(), static_cast<size_t>(i * 1000));
      }
      EXPECT_TRUE((co_await call->WritesDone()).ok());
      EXPECT_FALSE((co_await call->Read()).has_value());
      Status finished = co_await call->Finish();
      EXPECT_TRUE(finished.ok()) << finished.ToString();
      co_await (*conn)->Close();
    }(*loop_, address, std::move(options), server_id));
  }

  // A uxds server with TestService on a loop thread of its own.
  struct OurServer {
    std::unique_ptr<LoopThread> thread;
    std::unique_ptr<http2::Server> server;
    ~OurServer() {
      if (!server) return;
      std::atomic<bool> done{false};
      thread->RunSync([&] {
        thread->loop().Spawn([](http2::Server& s, std::atomic<bool>& d) -> Task<void> {
          co_await s.Shutdown(200ms);
          d = true;
        }(*server, done));
      });
      while (!done) std::this_thread::sleep_for(1ms);
      thread->RunSync([&] { server.reset(); });
    }
  };
  std::unique_ptr<OurServer> StartOurServer(bool tls) {
    auto s = std::make_unique<OurServer>();
    s->thread = std::move(*LoopThread::Start());
    http2::ServerOptions options;
    if (tls) {
      TlsServerConfig config;
      config.certificate_chain_file = certs().server_cert;
      config.private_key_file = certs().server_key;
      auto ctx = TlsServerContext::Create(config);
      EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
      if (ctx.ok()) options.tls = *ctx;
    }
    auto registry = std::make_shared<http2::ServiceRegistry>();
    test_service::RegisterTestService(*registry, "uxds-server");
    s->thread->RunSync([&] {
      auto server =
          http2::Server::Listen(s->thread->loop(), SocketAddress::Loopback4(0), registry, options);
      EXPECT_TRUE(server.ok()) << server.status().ToString();
      if (!server.ok()) return;
      s->server = std::move(*server);
      s->thread->loop().Spawn(s->server->Serve());
    });
    return s;
  }

  // Runs the grpcio client; returns its exit code and JSON result lines.
  std::pair<int, std::vector<nlohmann::json>> RunGrpcioClient(uint16_t port, bool tls,
                                                              std::vector<std::string> args) {
    std::vector<std::string> argv = {Python(), PeerScript("grpc_test_client.py"), "--target",
                                     "127.0.0.1:" + std::to_string(port)};
    if (tls) {
      argv.insert(argv.end(), {"--tls-ca", certs().ca_cert, "--server-name-override", "localhost"});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess client = Subprocess::Start(argv);
    std::vector<nlohmann::json> results;
    while (auto line = client.ReadLine(60s)) {
      auto j = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded()) results.push_back(j);
    }
    return {client.Wait(60s), results};
  }

  TempDir temp_;
  std::optional<testing::TestCertificates> certs_;
  std::unique_ptr<Loop> loop_;
};

// --- (a) uxds client -> gRPC servers ----------------------------------------

TEST_F(InteropTest, OurClientCallsGrpcioServerPlaintext) {
  PeerServer peer = StartGrpcioServer(false);
  CallsSucceed(peer.address(), false, "grpcio-peer");
}

TEST_F(InteropTest, OurClientCallsGrpcioServerOverTls) {
  PeerServer peer = StartGrpcioServer(true);
  CallsSucceed(peer.address(), true, "grpcio-peer");
}

TEST_F(InteropTest, OurClientCallsGrpcCppServer) {
  std::string binary = testing::BuildRoot() + "/tests/peers/grpc_cpp_test_server";
  if (access(binary.c_str(), X_OK) != 0) GTEST_SKIP() << "built with -Dpeers=false";
  PeerServer peer = PeerServer::Start({binary});
  CallsSucceed(peer.address(), false, "");
}

// --- (b) gRPC client -> uxds server ------------------------------------------

TEST_F(InteropTest, GrpcioClientCallsOurServerPlaintext) {
  auto server = StartOurServer(false);
  ASSERT_TRUE(server->server);
  for (const char* call : {"EmptyCall", "UnaryCall", "FullDuplexCall"}) {
    auto [rc, results] = RunGrpcioClient(
        server->server->port(), false,
        {"--call", call, "--count", "3", "--response-size", "2000", "--fill-server-id"});
    EXPECT_EQ(rc, 0) << call;
    ASSERT_EQ(results.size(), 3u) << call;
    for (const auto& r : results) EXPECT_EQ(r["code"], "OK") << r.dump();
  }
}

TEST_F(InteropTest, GrpcioClientCallsOurServerOverTls) {
  auto server = StartOurServer(true);
  ASSERT_TRUE(server->server);
  for (const char* call : {"EmptyCall", "UnaryCall"}) {
    auto [rc, results] = RunGrpcioClient(server->server->port(), true, {"--call", call});
    EXPECT_EQ(rc, 0) << call;
    ASSERT_EQ(results.size(), 1u) << call;
    EXPECT_EQ(results[0]["code"], "OK") << results[0].dump();
  }
}

TEST_F(InteropTest, GrpcioClientSeesOurStatusesAndMessages) {
  auto server = StartOurServer(false);
  ASSERT_TRUE(server->server);
  // A status and a non-ASCII message chosen by the client come back intact
  // through our trailers (percent-encoded on the wire).
  auto [rc, results] =
      RunGrpcioClient(server->server->port(), false,
                      {"--call", "UnaryCall", "--echo-status", "5:caf\xc3\xa9 100% \xe2\x9c\x93",
                       "--expect-code", "NOT_FOUND"});
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["code"], "NOT_FOUND");
  EXPECT_EQ(results[0]["message"], "caf\xc3\xa9 100% \xe2\x9c\x93");
}

// --- (c) failures end in the right status ------------------------------------

TEST_F(InteropTest, DeadlineCancellationAndOversizeAgainstGrpcio) {
  PeerServer peer = StartGrpcioServer(false);
  loop_->BlockOn([](Loop& loop, SocketAddress a) -> Task<void> {
    auto conn = co_await http2::ClientConnection::Connect(loop, a, {});
    CO_ASSERT_OK(conn);
    std::string request = SimpleRequestBytes(10);

    // The peer sleeps 2 s; our 200 ms deadline ends the call.
    http2::Metadata slow = {{"x-uxds-behavior", "delay-ms=2000"}};
    auto late = co_await http2::UnaryCall(**conn, test_service::kUnaryCall, request, slow,
                                          Loop::Clock::now() + 200ms);
    EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().ToString();

    // A client cancel mid-stream ends the call CANCELLED.
    auto call = (*conn)->StartCall(test_service::kFullDuplexCall);
    EXPECT_TRUE((co_await call->Write(StreamingRequestBytes(10))).ok());
    EXPECT_TRUE((co_await call->Read()).has_value());
    call->Cancel();
    Status cancelled = co_await call->Finish();
    EXPECT_EQ(cancelled.code(), StatusCode::kCancelled) << cancelled.ToString();

    // A response over the default 4 MiB receive limit fails that call only.
    http2::Metadata large = {{"x-uxds-behavior", "large-response=5000000"}};
    auto oversize = co_await http2::UnaryCall(**conn, test_service::kUnaryCall, request, large);
    EXPECT_EQ(oversize.status().code(), StatusCode::kResourceExhausted)
        << oversize.status().ToString();

    // The connection survived all three.
    EXPECT_TRUE((*conn)->usable());
    auto after = co_await http2::UnaryCall(**conn, test_service::kUnaryCall, request);
    EXPECT_TRUE(after.ok()) << after.status().ToString();
    co_await (*conn)->Close();
  }(*loop_, peer.address()));
}

TEST_F(InteropTest, ServerGoawayMidStreamLetsTheCallFinish) {
  PeerServer peer = StartGrpcioServer(false);
  loop_->BlockOn([](Loop& loop, SocketAddress a) -> Task<void> {
    auto conn = co_await http2::ClientConnection::Connect(loop, a, {});
    CO_ASSERT_OK(conn);
    // The peer starts a graceful stop (GOAWAY) while this stream is open.
    http2::Metadata goaway = {{"x-uxds-behavior", "goaway=3000"}};
    auto call = (*conn)->StartCall(test_service::kFullDuplexCall, goaway);
    EXPECT_TRUE((co_await call->Write(StreamingRequestBytes(10))).ok());
    EXPECT_TRUE((co_await call->Read()).has_value());
    // Once the GOAWAY arrived the connection takes no new calls ...
    bool refused = co_await WaitUntil(
        loop, [&] { return !(*conn)->usable(); }, 20s);
    EXPECT_TRUE(refused) << "no GOAWAY seen";
    auto late = (*conn)->StartCall(test_service::kEmptyCall);
    Status late_status = co_await late->Finish();
    EXPECT_EQ(late_status.code(), StatusCode::kUnavailable) << late_status.ToString();
    // ... but the stream in flight finishes normally.
    EXPECT_TRUE((co_await call->Write(StreamingRequestBytes(20))).ok());
    EXPECT_TRUE((co_await call->Read()).has_value());
    EXPECT_TRUE((co_await call->WritesDone()).ok());
    while (co_await call->Read()) {
    }
    Status finished = co_await call->Finish();
    EXPECT_TRUE(finished.ok()) << finished.ToString();
    co_await (*conn)->Close();
  }(*loop_, peer.address()));
  EXPECT_EQ(peer.process->Wait(30s), 0);
}

TEST_F(InteropTest, PeerKilledMidStreamEndsTheCallUnavailable) {
  PeerServer peer = StartGrpcioServer(false);
  loop_->BlockOn([](Loop& loop, SocketAddress a) -> Task<void> {
    auto conn = co_await http2::ClientConnection::Connect(loop, a, {});
    CO_ASSERT_OK(conn);
    http2::Metadata die = {{"x-uxds-behavior", "die"}};
    auto call = (*conn)->StartCall(test_service::kFullDuplexCall, die);
    EXPECT_TRUE((co_await call->Write(StreamingRequestBytes(10))).ok());
    EXPECT_TRUE((co_await call->Read()).has_value());
    // The peer process exits without a word when the next message arrives
    // (the write itself may or may not see the connection go).
    (void)co_await call->Write(StreamingRequestBytes(10));
    while (co_await call->Read()) {
    }
    Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    bool closed = co_await WaitUntil(
        loop, [&] { return (*conn)->closed(); }, 20s);
    EXPECT_TRUE(closed);
    co_await (*conn)->Close();
  }(*loop_, peer.address()));
  EXPECT_EQ(peer.process->Wait(30s), 3);  // the peer's exit code for "die"
}

// --- load ----------------------------------------------------------------------

TEST_F(InteropTest, H2loadDrivesOurServerForTenSecondsWithoutErrors) {
  auto server = StartOurServer(false);
  ASSERT_TRUE(server->server);
  Subprocess h2load =
      Subprocess::Start({Python(), PeerScript("h2load_grpc.py"), "--target",
                         "127.0.0.1:" + std::to_string(server->server->port()), "--seconds", "10",
                         "--warm-up-seconds", "0", "--connections", "4", "--streams", "16",
                         "--response-size", "256"});
  auto line = h2load.ReadLine(120s);
  ASSERT_TRUE(line.has_value());
  ASSERT_EQ(h2load.Wait(60s), 0);
  auto r = nlohmann::json::parse(*line);
  EXPECT_GT(r["succeeded"].get<int64_t>(), 0) << *line;
  EXPECT_EQ(r["failed"].get<int64_t>(), 0) << *line;
  EXPECT_EQ(r["errored"].get<int64_t>(), 0) << *line;
  EXPECT_EQ(r["timeout"].get<int64_t>(), 0) << *line;
  EXPECT_EQ(r["status_non_2xx"].get<int64_t>(), 0) << *line;
  EXPECT_EQ(r["requests"], r["succeeded"]) << *line;
  EXPECT_EQ(r["grpc_status_probe"], 0) << *line;
}

}  // namespace
}  // namespace uxds
