// TlsStream against a real, independent TLS peer: Debian's openssl command
// (OpenSSL 3), as s_server for our client and s_client for our server.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "runtime/tcp_socket.h"
#include "tls/tls.h"
#include "tls_test_util.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;
using testing::Certs;
using testing::RunTask;
using testing::Subprocess;

constexpr auto kGenerous = 10s;  // upper bounds only

std::unique_ptr<Loop> MakeLoop() {
  auto loop = Loop::Create();
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return loop.ok() ? std::move(*loop) : nullptr;
}

std::shared_ptr<TlsClientContext> ClientContext(bool with_certificate) {
  TlsClientConfig config;
  config.ca_certificate_file = Certs().ca_cert;
  if (with_certificate) {
    config.certificate_file = Certs().client_cert;
    config.private_key_file = Certs().client_key;
  }
  auto ctx = TlsClientContext::Create(config);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  return ctx.ok() ? *ctx : nullptr;
}

std::shared_ptr<TlsServerContext> ServerContext(bool require_client_certificate) {
  TlsServerConfig config;
  config.certificate_chain_file = Certs().server_cert;
  config.private_key_file = Certs().server_key;
  if (require_client_certificate) {
    config.ca_certificate_file = Certs().ca_cert;
    config.require_client_certificate = true;
  }
  auto ctx = TlsServerContext::Create(config);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  return ctx.ok() ? *ctx : nullptr;
}

// --- Our client against `openssl s_server -rev` ------------------------------

// Starts s_server on a free loopback port; it answers each line reversed and
// exits after one connection. Returns the port, or 0.
uint16_t StartReversingServer(std::optional<Subprocess>& server,
                              const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv = {
      "openssl", "s_server", "-accept",           "127.0.0.1:0", "-naccept",        "1",
      "-rev",    "-cert",    Certs().server_cert, "-key",        Certs().server_key};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  server = Subprocess::Start(argv);
  auto accept = server->WaitForLine("ACCEPT ", kGenerous);  // "127.0.0.1:PORT"
  if (!accept) return 0;
  return static_cast<uint16_t>(std::stoi(accept->substr(accept->rfind(':') + 1)));
}

struct ClientRun {
  Status status;
  std::string alpn, version, peer_subject, reply;
};

// Connects, sends one line, reads the reversed line, then close_notify and
// reads to the end.
Task<ClientRun> TalkToReversingServer(Loop& loop, uint16_t port,
                                      std::shared_ptr<TlsClientContext> ctx) {
  ClientRun run;
  auto tcp = co_await TcpSocket::Connect(loop, SocketAddress::Loopback4(port), kGenerous);
  if (!tcp.ok()) {
    run.status = tcp.status();
    co_return run;
  }
  auto tls = co_await TlsStream::Connect(std::move(*tcp), std::move(ctx), "localhost", kGenerous);
  if (!tls.ok()) {
    run.status = tls.status();
    co_return run;
  }
  TlsStream& stream = **tls;
  run.alpn = stream.negotiated_alpn();
  run.version = stream.protocol_version();
  run.peer_subject = stream.PeerCertificateSubject();
  std::string line = "hello uxds\n";
  run.status =
      co_await stream.Write(std::span(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
  std::vector<uint8_t> buf(4096);
  while (run.status.ok() && run.reply.find('\n') == std::string::npos) {
    auto n = co_await stream.Read(buf);
    if (!n.ok())
      run.status = n.status();
    else if (*n == 0)
      break;
    else
      run.reply.append(reinterpret_cast<const char*>(buf.data()), *n);
  }
  if (!run.status.ok()) co_return run;
  run.status = co_await stream.ShutdownWrite();
  while (run.status.ok()) {
    auto n = co_await stream.Read(buf);
    if (!n.ok())
      run.status = n.status();
    else if (*n == 0)
      break;
  }
  co_return run;
}

TEST(TlsInteropTest, OurClientAgainstOpensslServerTls13) {
  std::optional<Subprocess> server;
  uint16_t port = StartReversingServer(server, {"-alpn", "h2"});
  ASSERT_NE(port, 0);
  auto loop = MakeLoop();
  ClientRun run = RunTask(*loop, TalkToReversingServer(*loop, port, ClientContext(false)));
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_EQ(run.alpn, "h2");
  EXPECT_EQ(run.version, "TLSv1.3");
  EXPECT_EQ(run.peer_subject, "CN=server");
  EXPECT_EQ(run.reply, "sdxu olleh\n");
  EXPECT_EQ(server->Wait(kGenerous), 0);
  while (server->ReadLine(kGenerous)) {
  }
  auto selected =
      std::find(server->lines().begin(), server->lines().end(), "ALPN protocols selected: h2");
  EXPECT_NE(selected, server->lines().end());
}

TEST(TlsInteropTest, OurClientAgainstOpensslServerTls12) {
  std::optional<Subprocess> server;
  uint16_t port = StartReversingServer(server, {"-alpn", "h2", "-tls1_2"});
  ASSERT_NE(port, 0);
  auto loop = MakeLoop();
  ClientRun run = RunTask(*loop, TalkToReversingServer(*loop, port, ClientContext(false)));
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_EQ(run.version, "TLSv1.2");
  EXPECT_EQ(run.alpn, "h2");
  EXPECT_EQ(run.reply, "sdxu olleh\n");
}

TEST(TlsInteropTest, OurClientRefusesAServerWithoutAlpn) {
  std::optional<Subprocess> server;
  uint16_t port = StartReversingServer(server, {});
  ASSERT_NE(port, 0);
  auto loop = MakeLoop();
  ClientRun run = RunTask(*loop, TalkToReversingServer(*loop, port, ClientContext(false)));
  ASSERT_FALSE(run.status.ok());
  EXPECT_EQ(run.status.code(), StatusCode::kUnavailable);
  EXPECT_NE(run.status.message().find("server selected no ALPN protocol"), std::string::npos)
      << run.status.ToString();
}

TEST(TlsInteropTest, OurClientPresentsItsCertificateToOpenssl) {
  std::optional<Subprocess> server;
  uint16_t port =
      StartReversingServer(server, {"-alpn", "h2", "-Verify", "2", "-CAfile", Certs().ca_cert});
  ASSERT_NE(port, 0);
  auto loop = MakeLoop();
  ClientRun run = RunTask(*loop, TalkToReversingServer(*loop, port, ClientContext(true)));
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_EQ(run.reply, "sdxu olleh\n");
}

TEST(TlsInteropTest, OpensslServerRefusesOurClientWithoutCertificate) {
  std::optional<Subprocess> server;
  uint16_t port =
      StartReversingServer(server, {"-alpn", "h2", "-Verify", "2", "-CAfile", Certs().ca_cert});
  ASSERT_NE(port, 0);
  auto loop = MakeLoop();
  ClientRun run = RunTask(*loop, TalkToReversingServer(*loop, port, ClientContext(false)));
  ASSERT_FALSE(run.status.ok());
  EXPECT_EQ(run.status.code(), StatusCode::kUnavailable) << run.status.ToString();
}

// --- `openssl s_client` against our server -----------------------------------

// s_client reads what it sends from a FIFO the test writes to, so the test
// decides when it sees end of input (and sends close_notify).
class OpensslClient {
 public:
  OpensslClient(uint16_t port, const std::vector<std::string>& extra_args) {
    fifo_ = testing::CertificatesEnvironment::dir() + "/s_client_stdin_" + std::to_string(port);
    EXPECT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
    // O_RDWR: opening does not wait for a reader, and s_client sees EOF only
    // when we close it.
    fd_ = open(fifo_.c_str(), O_RDWR | O_CLOEXEC);
    EXPECT_GE(fd_, 0);
    // -brief: a short summary, written (to stderr, merged here) before any
    // received data, which goes out unbuffered.
    std::string command =
        "exec openssl s_client -brief -connect 127.0.0.1:" + std::to_string(port) +
        " -servername localhost -verify_hostname localhost -verify_return_error"
        " -CAfile " +
        Certs().ca_cert;
    for (const std::string& arg : extra_args) command += " " + arg;
    command += " < " + fifo_ + " 2>&1";
    process_ = Subprocess::Start({"sh", "-c", command});
  }
  ~OpensslClient() {
    CloseInput();
    unlink(fifo_.c_str());
  }
  void Send(const std::string& text) {
    EXPECT_EQ(write(fd_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  void CloseInput() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  Subprocess& process() { return *process_; }
  bool Printed(const std::string& line) const {
    const auto& lines = process_->lines();
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  }

 private:
  std::string fifo_;
  int fd_ = -1;
  std::optional<Subprocess> process_;
};

struct ServerRun {
  StatusOr<std::unique_ptr<TlsStream>> stream = UnknownError("not run");
  std::string received;
};

// Accepts one connection and reads until a full line arrived.
Task<void> AcceptAndReadLine(TcpListener& listener, std::shared_ptr<TlsServerContext> ctx,
                             ServerRun& run) {
  auto tcp = co_await listener.Accept();
  if (!tcp.ok()) {
    run.stream = tcp.status();
    co_return;
  }
  run.stream = co_await TlsStream::Accept(std::move(*tcp), std::move(ctx), kGenerous);
  if (!run.stream.ok()) co_return;
  std::vector<uint8_t> buf(4096);
  while (run.received.find('\n') == std::string::npos) {
    auto n = co_await (*run.stream)->Read(buf);
    if (!n.ok() || *n == 0) break;
    run.received.append(reinterpret_cast<const char*>(buf.data()), *n);
  }
}

Task<Status> WriteText(ByteStream& stream, std::string text) {
  co_return co_await stream.Write(
      std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// Reads to the end; OK when the stream ended cleanly.
Task<Status> ReadToEnd(ByteStream& stream) {
  std::vector<uint8_t> buf(4096);
  while (true) {
    auto n = co_await stream.Read(buf);
    if (!n.ok()) co_return n.status();
    if (*n == 0) co_return OkStatus();
  }
}

struct OurServer {
  std::unique_ptr<Loop> loop = MakeLoop();
  std::unique_ptr<TcpListener> listener;
  OurServer() {
    auto l = TcpListener::Bind(*loop, SocketAddress::Loopback4(0));
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok()) listener = std::move(*l);
  }
};

// One exchange with s_client: it sends "ping", we answer "pong", then its
// end of input makes it send close_notify, which ends our read side.
void ExchangeWithOpensslClient(const std::vector<std::string>& client_args,
                               bool require_client_certificate, const std::string& want_version,
                               const std::string& want_peer_subject) {
  OurServer server;
  ASSERT_NE(server.listener, nullptr);
  OpensslClient client(server.listener->port(), client_args);
  client.Send("ping\n");
  ServerRun run;
  RunTask(*server.loop,
          AcceptAndReadLine(*server.listener, ServerContext(require_client_certificate), run));
  ASSERT_TRUE(run.stream.ok()) << run.stream.status().ToString();
  TlsStream& stream = **run.stream;
  EXPECT_EQ(run.received, "ping\n");
  EXPECT_EQ(stream.negotiated_alpn(), "h2");
  EXPECT_EQ(stream.protocol_version(), want_version);
  EXPECT_EQ(stream.PeerCertificateSubject(), want_peer_subject);
  Status wrote = RunTask(*server.loop, WriteText(stream, "pong\n"));
  ASSERT_TRUE(wrote.ok()) << wrote.ToString();
  EXPECT_TRUE(client.process().WaitForLine("pong", kGenerous).has_value());
  client.CloseInput();
  Status ended = RunTask(*server.loop, ReadToEnd(stream));
  EXPECT_TRUE(ended.ok()) << ended.ToString();
  EXPECT_EQ(client.process().Wait(kGenerous), 0);
  EXPECT_TRUE(client.Printed("Verification: OK"));
  EXPECT_TRUE(client.Printed("Protocol version: " + want_version));
}

TEST(TlsInteropTest, OpensslClientAgainstOurServerTls13) {
  ExchangeWithOpensslClient({"-alpn", "h2"}, false, "TLSv1.3", "");
}

TEST(TlsInteropTest, OpensslClientAgainstOurServerTls12) {
  ExchangeWithOpensslClient({"-alpn", "h2", "-tls1_2"}, false, "TLSv1.2", "");
}

TEST(TlsInteropTest, OpensslClientWithCertificateAgainstOurMutualTlsServer) {
  ExchangeWithOpensslClient(
      {"-alpn", "h2", "-cert", Certs().client_cert, "-key", Certs().client_key}, true, "TLSv1.3",
      "CN=client");
}

TEST(TlsInteropTest, OurServerRefusesAnOpensslClientWithoutAlpn) {
  OurServer server;
  ASSERT_NE(server.listener, nullptr);
  OpensslClient client(server.listener->port(), {});
  ServerRun run;
  RunTask(*server.loop, AcceptAndReadLine(*server.listener, ServerContext(false), run));
  ASSERT_FALSE(run.stream.ok());
  EXPECT_EQ(run.stream.status().code(), StatusCode::kUnavailable) << run.stream.status().ToString();
  client.CloseInput();
  EXPECT_NE(client.process().Wait(kGenerous), 0);
}

}  // namespace
}  // namespace uxds
