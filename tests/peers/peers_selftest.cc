// Proves the gRPC peers the suite and the benches rely on work against each
// other: the grpcio server (plaintext, TLS, mutual TLS, every behavior),
// the grpcio client, the gRPC C++ server and the h2load driver. When a peer
// breaks (a Debian upgrade, a stub generation change), this fails first and
// names the peer, instead of an unrelated uxds test failing obscurely.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace uxds::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr auto kPeerStartTimeout = seconds(60);
constexpr auto kPeerRunTimeout = seconds(90);

std::string PeerScript(const std::string& name) { return SourceRoot() + "/tests/peers/" + name; }

// A peer server process and the port it printed.
struct PeerServer {
  Subprocess process;
  int port = 0;
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
};

std::optional<PeerServer> StartServer(std::vector<std::string> argv) {
  PeerServer server{Subprocess::Start(argv)};
  std::optional<std::string> port = server.process.WaitForLine("PORT ", kPeerStartTimeout);
  if (!port) {
    ADD_FAILURE() << argv[0] << " " << (argv.size() > 1 ? argv[1] : "") << ": no PORT line";
    return std::nullopt;
  }
  server.port = std::stoi(*port);
  return server;
}

std::optional<PeerServer> StartPythonServer(const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {Python(), PeerScript("grpc_test_server.py")};
  argv.insert(argv.end(), args.begin(), args.end());
  return StartServer(argv);
}

struct ClientRun {
  int exit_code = -1;
  std::vector<json> results;  // one per call
};

ClientRun RunClient(const std::string& target, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {Python(), PeerScript("grpc_test_client.py"), "--target", target};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess client = Subprocess::Start(argv);
  ClientRun run;
  while (std::optional<std::string> line = client.ReadLine(kPeerRunTimeout)) {
    json result = json::parse(*line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(result.is_discarded()) << "client printed a line that is not JSON: " << *line;
    run.results.push_back(std::move(result));
  }
  run.exit_code = client.Wait(kPeerRunTimeout);
  return run;
}

// Runs one call and returns its JSON result (empty object if none).
json CallOnce(const std::string& target, const std::vector<std::string>& args,
              int expected_exit = 0) {
  ClientRun run = RunClient(target, args);
  EXPECT_EQ(run.exit_code, expected_exit);
  EXPECT_EQ(run.results.size(), 1u);
  return run.results.empty() ? json::object() : run.results[0];
}

TEST(PythonPeers, EmptyCall) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  json r = CallOnce(server->target(), {"--call", "EmptyCall"});
  EXPECT_EQ(r["call"], "EmptyCall");
  EXPECT_EQ(r["code"], "OK");
  EXPECT_EQ(r["message"], "");
  EXPECT_EQ(r["responses"], 1);
}

TEST(PythonPeers, UnaryCallSizesAndCount) {
  auto server = StartPythonServer({"--server-id", "backend-a"});
  ASSERT_TRUE(server);
  ClientRun run =
      RunClient(server->target(), {"--call", "UnaryCall", "--count", "3", "--request-size", "1000",
                                   "--response-size", "4321", "--fill-server-id"});
  EXPECT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.results.size(), 3u);
  for (const json& r : run.results) {
    EXPECT_EQ(r["code"], "OK");
    EXPECT_EQ(r["response_size"], 4321);
    EXPECT_EQ(r["server_id"], "backend-a");
  }
}

TEST(PythonPeers, StreamingCalls) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  json duplex = CallOnce(server->target(),
                         {"--call", "FullDuplexCall", "--messages", "5", "--response-size", "17"});
  EXPECT_EQ(duplex["code"], "OK");
  EXPECT_EQ(duplex["responses"], 5);
  EXPECT_EQ(duplex["response_size"], 5 * 17);
  json output = CallOnce(server->target(), {"--call", "StreamingOutputCall", "--messages", "4",
                                            "--response-size", "10"});
  EXPECT_EQ(output["code"], "OK");
  EXPECT_EQ(output["responses"], 4);
  EXPECT_EQ(output["response_size"], 40);
}

TEST(PythonPeers, RequestedEchoStatus) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  json unary = CallOnce(server->target(), {"--call", "UnaryCall", "--echo-status", "NOT_FOUND:gone",
                                           "--expect-code", "NOT_FOUND"});
  EXPECT_EQ(unary["code"], "NOT_FOUND");
  EXPECT_EQ(unary["message"], "gone");
  // The status rides on the last of three requests: two answers come first.
  json duplex =
      CallOnce(server->target(), {"--call", "FullDuplexCall", "--messages", "3", "--echo-status",
                                  "ABORTED:stop", "--expect-code", "ABORTED"});
  EXPECT_EQ(duplex["code"], "ABORTED");
  EXPECT_EQ(duplex["responses"], 2);
}

TEST(PythonPeers, ClientExitCodeReflectsUnexpectedStatus) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  json r = CallOnce(server->target(), {"--call", "UnaryCall", "--echo-status", "INTERNAL:x"},
                    /*expected_exit=*/1);
  EXPECT_EQ(r["code"], "INTERNAL");
  r = CallOnce(server->target(), {"--call", "EmptyCall", "--expect-code", "INTERNAL"},
               /*expected_exit=*/1);
  EXPECT_EQ(r["code"], "OK");
}

TEST(PythonPeers, EchoMetadata) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  json r = CallOnce(server->target(),
                    {"--call", "UnaryCall", "--metadata", "x-uxds-behavior=echo-metadata",
                     "x-test=one", "x-test=two", "x-blob-bin=abc"});
  EXPECT_EQ(r["code"], "OK");
  for (const char* which : {"initial_metadata", "trailing_metadata"}) {
    SCOPED_TRACE(which);
    EXPECT_EQ(r[which]["x-test"], "one,two");
    EXPECT_EQ(r[which]["x-blob-bin"], "YWJj");  // base64("abc"), unpadded
    EXPECT_FALSE(r[which].contains("user-agent"));
  }
}

TEST(PythonPeers, StatusBehaviorCarriesNonAsciiMessage) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  // The header value is ASCII; the server percent-decodes the message, and
  // grpcio percent-encodes it again into grpc-message on the wire.
  json r = CallOnce(server->target(),
                    {"--call", "FullDuplexCall", "--metadata",
                     "x-uxds-behavior=status=PERMISSION_DENIED:caf%C3%A9 100%25 %E2%9C%93%0Aline2",
                     "--expect-code", "PERMISSION_DENIED"});
  EXPECT_EQ(r["code"], "PERMISSION_DENIED");
  EXPECT_EQ(r["message"], "caf\u00e9 100% \u2713\nline2");
  json bad = CallOnce(server->target(),
                      {"--call", "EmptyCall", "--metadata", "x-uxds-behavior=no-such-behavior",
                       "--expect-code", "INVALID_ARGUMENT"});
  EXPECT_EQ(bad["code"], "INVALID_ARGUMENT");
}

TEST(PythonPeers, DelayExceedsDeadline) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  json r = CallOnce(server->target(),
                    {"--call", "UnaryCall", "--metadata", "x-uxds-behavior=delay-ms=30000",
                     "--deadline-ms", "200", "--expect-code", "DEADLINE_EXCEEDED"});
  EXPECT_EQ(r["code"], "DEADLINE_EXCEEDED");
}

TEST(PythonPeers, LargeResponse) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  const std::vector<std::string> large = {"--call", "UnaryCall", "--metadata",
                                          "x-uxds-behavior=large-response=5000000"};
  std::vector<std::string> args = large;
  args.insert(args.end(), {"--expect-code", "RESOURCE_EXHAUSTED"});
  json refused = CallOnce(server->target(), args);  // grpcio's default limit is 4 MiB
  EXPECT_EQ(refused["code"], "RESOURCE_EXHAUSTED");
  args = large;
  args.insert(args.end(), {"--max-receive-bytes", "8000000"});
  json accepted = CallOnce(server->target(), args);
  EXPECT_EQ(accepted["code"], "OK");
  EXPECT_EQ(accepted["response_size"], 5000000);
}

TEST(PythonPeers, GoawayLetsTheCallInFlightFinish) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  json r =
      CallOnce(server->target(), {"--call", "UnaryCall", "--response-size", "8", "--metadata",
                                  "x-uxds-behavior=goaway=30000", "x-uxds-behavior=delay-ms=300"});
  EXPECT_EQ(r["code"], "OK");
  EXPECT_EQ(r["response_size"], 8);
  EXPECT_TRUE(server->process.WaitForLine("GOAWAY", kPeerRunTimeout));
  EXPECT_TRUE(server->process.WaitForLine("STOPPED", kPeerRunTimeout));
  EXPECT_EQ(server->process.Wait(kPeerRunTimeout), 0);
}

TEST(PythonPeers, GoawayFrameArrivesBeforeTheStreamEnds) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  TempDir dir;
  WriteFile(dir.File("empty.grpc"), std::string(5, '\0'));  // gRPC frame of an empty message
  Subprocess nghttp = Subprocess::Start(
      {"nghttp", "-v", "-d", dir.File("empty.grpc"), "-H", "content-type: application/grpc", "-H",
       "te: trailers", "-H", "x-uxds-behavior: goaway=30000", "-H", "x-uxds-behavior: delay-ms=300",
       "http://" + server->target() + "/grpc.testing.TestService/EmptyCall"});
  std::optional<size_t> goaway_line, status_line;
  while (std::optional<std::string> line = nghttp.ReadLine(kPeerRunTimeout)) {
    size_t index = nghttp.lines().size() - 1;
    if (!goaway_line && line->find("recv GOAWAY frame") != std::string::npos) goaway_line = index;
    if (!status_line && line->find("grpc-status: 0") != std::string::npos) status_line = index;
  }
  EXPECT_EQ(nghttp.Wait(kPeerRunTimeout), 0);
  ASSERT_TRUE(goaway_line) << "no GOAWAY frame received";
  ASSERT_TRUE(status_line) << "the stream in flight did not end with grpc-status 0";
  EXPECT_LT(*goaway_line, *status_line);
}

TEST(PythonPeers, DieKillsTheServerMidCall) {
  {
    auto server = StartPythonServer();
    ASSERT_TRUE(server);
    json r = CallOnce(server->target(), {"--call", "UnaryCall", "--metadata", "x-uxds-behavior=die",
                                         "--expect-code", "UNAVAILABLE"});
    EXPECT_EQ(r["code"], "UNAVAILABLE");
    EXPECT_EQ(server->process.Wait(kPeerRunTimeout), 3);
  }
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  // Ping-pong: the first answer arrives, the second request kills the server.
  json r = CallOnce(server->target(), {"--call", "FullDuplexCall", "--messages", "3", "--metadata",
                                       "x-uxds-behavior=die", "--expect-code", "UNAVAILABLE"});
  EXPECT_EQ(r["code"], "UNAVAILABLE");
  EXPECT_EQ(r["responses"], 1);
  EXPECT_EQ(server->process.Wait(kPeerRunTimeout), 3);
}

TEST(PythonPeers, SigtermStopsTheServer) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  server->process.Signal(SIGTERM);
  EXPECT_EQ(server->process.Wait(kPeerRunTimeout), 0);
}

class PythonPeersTls : public ::testing::Test {
 protected:
  TempDir dir_;
  TestCertificates certs_ = MakeTestCertificates(dir_.path());
};

TEST_F(PythonPeersTls, ServerAuthentication) {
  auto server =
      StartPythonServer({"--tls-cert", certs_.server_cert, "--tls-key", certs_.server_key});
  ASSERT_TRUE(server);
  json r = CallOnce(server->target(),
                    {"--call", "UnaryCall", "--response-size", "64", "--tls-ca", certs_.ca_cert});
  EXPECT_EQ(r["code"], "OK");
  EXPECT_EQ(r["response_size"], 64);
  // The certificate names *.test.example.com as well.
  json named = CallOnce(server->target(), {"--call", "FullDuplexCall", "--tls-ca", certs_.ca_cert,
                                           "--server-name-override", "api.test.example.com"});
  EXPECT_EQ(named["code"], "OK");
  json wrong_ca =
      CallOnce(server->target(), {"--call", "EmptyCall", "--tls-ca", certs_.other_ca_cert,
                                  "--deadline-ms", "10000", "--expect-code", "UNAVAILABLE"});
  EXPECT_EQ(wrong_ca["code"], "UNAVAILABLE");
  json plaintext = CallOnce(server->target(), {"--call", "EmptyCall", "--deadline-ms", "10000",
                                               "--expect-code", "UNAVAILABLE"});
  EXPECT_EQ(plaintext["code"], "UNAVAILABLE");
}

TEST_F(PythonPeersTls, MutualTls) {
  auto server = StartPythonServer({"--tls-cert", certs_.server_cert, "--tls-key", certs_.server_key,
                                   "--client-ca", certs_.ca_cert});
  ASSERT_TRUE(server);
  json r =
      CallOnce(server->target(), {"--call", "UnaryCall", "--tls-ca", certs_.ca_cert, "--tls-cert",
                                  certs_.client_cert, "--tls-key", certs_.client_key});
  EXPECT_EQ(r["code"], "OK");
  json anonymous =
      CallOnce(server->target(), {"--call", "UnaryCall", "--tls-ca", certs_.ca_cert,
                                  "--deadline-ms", "10000", "--expect-code", "UNAVAILABLE"});
  EXPECT_EQ(anonymous["code"], "UNAVAILABLE");
}

#ifdef UXDS_GRPC_CPP_TEST_SERVER
std::optional<PeerServer> StartCppServer() { return StartServer({UXDS_GRPC_CPP_TEST_SERVER}); }
#define SKIP_WITHOUT_CPP_PEER()
#else
std::optional<PeerServer> StartCppServer() { return std::nullopt; }
#define SKIP_WITHOUT_CPP_PEER() GTEST_SKIP() << "built with -Dpeers=false"
#endif

TEST(CppPeer, AnswersThePythonClient) {
  SKIP_WITHOUT_CPP_PEER();
  auto server = StartCppServer();
  ASSERT_TRUE(server);
  json empty = CallOnce(server->target(), {"--call", "EmptyCall"});
  EXPECT_EQ(empty["code"], "OK");
  ClientRun unary = RunClient(
      server->target(),
      {"--call", "UnaryCall", "--count", "2", "--request-size", "100", "--response-size", "300"});
  EXPECT_EQ(unary.exit_code, 0);
  ASSERT_EQ(unary.results.size(), 2u);
  EXPECT_EQ(unary.results[1]["response_size"], 300);
  json duplex = CallOnce(server->target(),
                         {"--call", "FullDuplexCall", "--messages", "4", "--response-size", "9"});
  EXPECT_EQ(duplex["code"], "OK");
  EXPECT_EQ(duplex["responses"], 4);
  EXPECT_EQ(duplex["response_size"], 36);
  json status =
      CallOnce(server->target(), {"--call", "UnaryCall", "--echo-status", "UNAUTHENTICATED:who",
                                  "--expect-code", "UNAUTHENTICATED"});
  EXPECT_EQ(status["message"], "who");
  server->process.Signal(SIGTERM);
  EXPECT_EQ(server->process.Wait(kPeerRunTimeout), 0);
}

std::optional<json> RunH2load(const std::string& target, const std::vector<std::string>& args,
                              int expected_exit) {
  std::vector<std::string> argv = {
      Python(), PeerScript("h2load_grpc.py"), "--target", target, "--seconds",
      "0.5",    "--warm-up-seconds",          "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess h2load = Subprocess::Start(argv);
  std::optional<std::string> line = h2load.ReadLine(kPeerRunTimeout);
  EXPECT_EQ(h2load.Wait(kPeerRunTimeout), expected_exit);
  if (!line) return std::nullopt;
  json result = json::parse(*line, nullptr, /*allow_exceptions=*/false);
  if (result.is_discarded()) return std::nullopt;
  return result;
}

TEST(CppPeer, H2loadDrivesUnaryCalls) {
  SKIP_WITHOUT_CPP_PEER();
  auto server = StartCppServer();
  ASSERT_TRUE(server);
  std::optional<json> r = RunH2load(
      server->target(), {"--streams", "4", "--request-size", "50", "--response-size", "60"}, 0);
  ASSERT_TRUE(r);
  EXPECT_GT((*r)["requests"], 0);
  EXPECT_EQ((*r)["succeeded"], (*r)["requests"]);
  EXPECT_GT((*r)["requests_per_second"], 0.0);
  EXPECT_EQ((*r)["grpc_status_probe"], 0);
}

TEST(PythonPeers, H2loadReportsGrpcErrorsOnlyThroughTheProbe) {
  auto server = StartPythonServer();
  ASSERT_TRUE(server);
  std::optional<json> r =
      RunH2load(server->target(), {"--header", "x-uxds-behavior: status=INTERNAL:no"}, 1);
  ASSERT_TRUE(r);
  // HTTP 200 with grpc-status 13 in the trailers: a success to h2load.
  EXPECT_EQ((*r)["status_non_2xx"], 0);
  EXPECT_EQ((*r)["grpc_status_probe"], 13);
}

}  // namespace
}  // namespace uxds::testing
