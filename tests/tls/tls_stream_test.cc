// TlsStream over real loopback TCP: our client against our server.
#include "tls/tls_stream.h"

#include <gtest/gtest.h>

#include <numeric>

#include "runtime/tcp_socket.h"
#include "tls_test_util.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;
using testing::Certs;
using testing::RunTask;

constexpr auto kGenerous = 10s;  // an upper bound, never a timing assertion

std::shared_ptr<TlsClientContext> ClientContext(bool with_certificate = false,
                                                std::string ca = Certs().ca_cert) {
  TlsClientConfig config;
  config.ca_certificate_file = std::move(ca);
  if (with_certificate) {
    config.certificate_file = Certs().client_cert;
    config.private_key_file = Certs().client_key;
  }
  auto ctx = TlsClientContext::Create(config);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  return ctx.ok() ? *ctx : nullptr;
}

std::shared_ptr<TlsServerContext> ServerContext(bool verify_clients = false,
                                                bool require_client_certificate = false) {
  TlsServerConfig config;
  config.certificate_chain_file = Certs().server_cert;
  config.private_key_file = Certs().server_key;
  if (verify_clients) config.ca_certificate_file = Certs().ca_cert;
  config.require_client_certificate = require_client_certificate;
  auto ctx = TlsServerContext::Create(config);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  return ctx.ok() ? *ctx : nullptr;
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

class TlsStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    auto listener = TcpListener::Bind(*loop_, SocketAddress::Loopback4(0));
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    listener_ = std::move(*listener);
  }

  Loop& loop() { return *loop_; }
  SocketAddress address() const { return listener_->local_address(); }
  TcpListener& listener() { return *listener_; }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<TcpListener> listener_;
};

// The server half of a test: accepts one connection and runs TLS over it.
Task<StatusOr<std::unique_ptr<TlsStream>>> AcceptTls(TcpListener& listener,
                                                     std::shared_ptr<TlsServerContext> ctx,
                                                     std::chrono::milliseconds timeout) {
  auto sock = co_await listener.Accept();
  if (!sock.ok()) co_return sock.status();
  co_return co_await TlsStream::Accept(std::move(*sock), std::move(ctx), timeout);
}

Task<StatusOr<std::unique_ptr<TlsStream>>> ConnectTls(Loop& loop, SocketAddress address,
                                                      std::shared_ptr<TlsClientContext> ctx,
                                                      std::string server_name,
                                                      std::chrono::milliseconds timeout) {
  auto sock = co_await TcpSocket::Connect(loop, address, timeout);
  if (!sock.ok()) co_return sock.status();
  co_return co_await TlsStream::Connect(std::move(*sock), std::move(ctx), std::move(server_name),
                                        timeout);
}

struct Handshakes {
  StatusOr<std::unique_ptr<TlsStream>> client = UnknownError("not run");
  StatusOr<std::unique_ptr<TlsStream>> server = UnknownError("not run");
};

// Runs both handshakes concurrently.
Task<void> RunHandshakes(Loop& loop, TcpListener& listener, std::shared_ptr<TlsClientContext> cctx,
                         std::shared_ptr<TlsServerContext> sctx, std::string server_name,
                         Handshakes& out) {
  TaskGroup group(loop);
  group.Spawn(
      [](TcpListener& l, std::shared_ptr<TlsServerContext> ctx, Handshakes& o) -> Task<void> {
        o.server = co_await AcceptTls(l, std::move(ctx), kGenerous);
      }(listener, std::move(sctx), out));
  group.Spawn([](Loop& lp, SocketAddress addr, std::shared_ptr<TlsClientContext> ctx,
                 std::string name, Handshakes& o) -> Task<void> {
    o.client = co_await ConnectTls(lp, addr, std::move(ctx), std::move(name), kGenerous);
  }(loop, listener.local_address(), std::move(cctx), std::move(server_name), out));
  co_await group.Join();
}

// Writes `data` in uneven pieces, then ShutdownWrite().
Task<void> WriteAll(ByteStream& stream, const std::vector<uint8_t>& data, Status& result) {
  size_t offset = 0, piece = 1000;
  while (offset < data.size()) {
    size_t n = std::min(piece, data.size() - offset);
    result = co_await stream.Write(std::span<const uint8_t>(data.data() + offset, n));
    if (!result.ok()) co_return;
    offset += n;
    piece = piece * 3 % 200000 + 1;  // 1 byte up to ~200 KB
  }
  result = co_await stream.ShutdownWrite();
}

// Reads until end of stream.
Task<void> ReadAll(ByteStream& stream, std::vector<uint8_t>& out, Status& result) {
  std::vector<uint8_t> buf(50000);
  while (true) {
    auto n = co_await stream.Read(buf);
    if (!n.ok()) {
      result = n.status();
      co_return;
    }
    if (*n == 0) co_return;
    out.insert(out.end(), buf.begin(), buf.begin() + static_cast<long>(*n));
  }
}

TEST_F(TlsStreamTest, HandshakeAgreesOnH2AndVerifiesTheServer) {
  Handshakes h;
  RunTask(loop(),
          RunHandshakes(loop(), listener(), ClientContext(), ServerContext(), "localhost", h));
  ASSERT_TRUE(h.client.ok()) << h.client.status().ToString();
  ASSERT_TRUE(h.server.ok()) << h.server.status().ToString();
  EXPECT_EQ((*h.client)->negotiated_alpn(), "h2");
  EXPECT_EQ((*h.server)->negotiated_alpn(), "h2");
  EXPECT_EQ((*h.client)->protocol_version(), "TLSv1.3");
  EXPECT_EQ((*h.client)->PeerCertificateSubject(), "CN=server");
  EXPECT_EQ((*h.server)->PeerCertificateSubject(), "");
  EXPECT_EQ((*h.client)->PeerName(), address().ToString());
}

TEST_F(TlsStreamTest, IpLiteralServerName) {
  Handshakes h;
  RunTask(loop(),
          RunHandshakes(loop(), listener(), ClientContext(), ServerContext(), "127.0.0.1", h));
  EXPECT_TRUE(h.client.ok()) << h.client.status().ToString();
  EXPECT_TRUE(h.server.ok()) << h.server.status().ToString();
}

// Several MiB each way at once, each side reading in one task and writing in
// another on the same stream; both ends finish with close_notify.
TEST_F(TlsStreamTest, LargeTransfersBothWaysConcurrently) {
  Handshakes h;
  RunTask(loop(),
          RunHandshakes(loop(), listener(), ClientContext(), ServerContext(), "localhost", h));
  ASSERT_TRUE(h.client.ok()) << h.client.status().ToString();
  ASSERT_TRUE(h.server.ok()) << h.server.status().ToString();
  std::vector<uint8_t> up = Pattern(6 << 20, 1), down = Pattern((5 << 20) + 12345, 2);
  std::vector<uint8_t> got_up, got_down;
  Status client_write, client_read, server_write, server_read;
  RunTask(loop(),
          [](Loop& lp, ByteStream& client, ByteStream& server, const std::vector<uint8_t>& up_data,
             const std::vector<uint8_t>& down_data, std::vector<uint8_t>& up_out,
             std::vector<uint8_t>& down_out, Status& cw, Status& cr, Status& sw,
             Status& sr) -> Task<void> {
            TaskGroup group(lp);
            group.Spawn(WriteAll(client, up_data, cw));
            group.Spawn(ReadAll(client, down_out, cr));
            group.Spawn(WriteAll(server, down_data, sw));
            group.Spawn(ReadAll(server, up_out, sr));
            co_await group.Join();
          }(loop(), **h.client, **h.server, up, down, got_up, got_down, client_write, client_read,
                         server_write, server_read));
  EXPECT_TRUE(client_write.ok()) << client_write.ToString();
  EXPECT_TRUE(client_read.ok()) << client_read.ToString();
  EXPECT_TRUE(server_write.ok()) << server_write.ToString();
  EXPECT_TRUE(server_read.ok()) << server_read.ToString();
  EXPECT_EQ(got_up.size(), up.size());
  EXPECT_TRUE(got_up == up);
  EXPECT_EQ(got_down.size(), down.size());
  EXPECT_TRUE(got_down == down);
}

// A KeyUpdate sent while another task is writing megabytes on the same
// stream: its flush joins the writer's (one transport write at a time), and
// both sides keep decrypting across the key change.
TEST_F(TlsStreamTest, KeyUpdateWhileWriting) {
  Handshakes h;
  RunTask(loop(),
          RunHandshakes(loop(), listener(), ClientContext(), ServerContext(), "localhost", h));
  ASSERT_TRUE(h.client.ok() && h.server.ok());
  std::vector<uint8_t> up = Pattern(8 << 20, 3), down = Pattern(1 << 20, 4);
  std::vector<uint8_t> got_up, got_down;
  Status cw, cr, sw, sr, update;
  RunTask(loop(),
          [](Loop& lp, TlsStream& client, TlsStream& server, const std::vector<uint8_t>& a,
             const std::vector<uint8_t>& b, std::vector<uint8_t>& up_out,
             std::vector<uint8_t>& down_out, Status& cw_, Status& cr_, Status& sw_, Status& sr_,
             Status& update_) -> Task<void> {
            Event updated(lp);
            TaskGroup group(lp);
            group.Spawn(ReadAll(server, up_out, sr_));
            group.Spawn(ReadAll(client, down_out, cr_));
            group.Spawn([](TlsStream& s, const std::vector<uint8_t>& d, Event& e,
                           Status& out) -> Task<void> {
              out = co_await s.Write(d);
              (void)co_await e.Wait();  // close_notify only after the KeyUpdate
              if (out.ok()) out = co_await s.ShutdownWrite();
            }(client, a, updated, cw_));
            // The server's records after the request follow its own KeyUpdate.
            group.Spawn(WriteAll(server, b, sw_));
            (void)co_await SleepFor(lp, 2ms);  // most likely mid-write; correct either way
            update_ = co_await client.UpdateKeys();
            updated.Set();
            co_await group.Join();
          }(loop(), **h.client, **h.server, up, down, got_up, got_down, cw, cr, sw, sr, update));
  EXPECT_TRUE(update.ok()) << update.ToString();
  EXPECT_TRUE(cw.ok() && cr.ok() && sw.ok() && sr.ok())
      << cw.ToString() << cr.ToString() << sw.ToString() << sr.ToString();
  EXPECT_TRUE(got_up == up);
  EXPECT_TRUE(got_down == down);
}

TEST_F(TlsStreamTest, UnrelatedCaFailsTheHandshakeOnBothSides) {
  Handshakes h;
  RunTask(loop(), RunHandshakes(loop(), listener(), ClientContext(false, Certs().other_ca_cert),
                                ServerContext(), "localhost", h));
  ASSERT_FALSE(h.client.ok());
  EXPECT_EQ(h.client.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(h.client.status().message(),
            "TLS handshake with " + address().ToString() +
                " failed: CERTIFICATE_VERIFY_FAILED (certificate verify failed: unable to get "
                "local issuer certificate)");
  ASSERT_FALSE(h.server.ok());
  EXPECT_EQ(h.server.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(h.server.status().message().find("TLSV1_ALERT_UNKNOWN_CA"), std::string::npos)
      << h.server.status().ToString();
}

TEST_F(TlsStreamTest, WrongHostNameFailsTheHandshake) {
  Handshakes h;
  RunTask(loop(), RunHandshakes(loop(), listener(), ClientContext(), ServerContext(),
                                "wrong.example.org", h));
  ASSERT_FALSE(h.client.ok());
  EXPECT_EQ(h.client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(h.client.status().message().find(
                "CERTIFICATE_VERIFY_FAILED (certificate verify failed: Hostname mismatch)"),
            std::string::npos)
      << h.client.status().ToString();
  EXPECT_FALSE(h.server.ok());
}

TEST_F(TlsStreamTest, MutualTlsAccepted) {
  Handshakes h;
  RunTask(loop(), RunHandshakes(loop(), listener(), ClientContext(true), ServerContext(true, true),
                                "localhost", h));
  ASSERT_TRUE(h.client.ok()) << h.client.status().ToString();
  ASSERT_TRUE(h.server.ok()) << h.server.status().ToString();
  EXPECT_EQ((*h.server)->PeerCertificateSubject(), "CN=client");
  EXPECT_EQ((*h.client)->PeerCertificateSubject(), "CN=server");
}

TEST_F(TlsStreamTest, MissingClientCertificateRejected) {
  Handshakes h;
  RunTask(loop(), RunHandshakes(loop(), listener(), ClientContext(false), ServerContext(true, true),
                                "localhost", h));
  ASSERT_FALSE(h.server.ok());
  EXPECT_EQ(h.server.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(h.server.status().message().find("failed: PEER_DID_NOT_RETURN_A_CERTIFICATE"),
            std::string::npos)
      << h.server.status().ToString();
  // TLS 1.3: the client may finish its side first and learn of the refusal
  // from the server's alert on its first read.
  if (h.client.ok()) {
    std::vector<uint8_t> buf(100);
    auto n = RunTask(loop(), (*h.client)->Read(buf));
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(n.status().message().find("CERTIFICATE_REQUIRED"), std::string::npos)
        << n.status().ToString();
  }
}

// Accepts one TCP connection and keeps it, saying nothing.
Task<void> AcceptSilently(TcpListener& listener, std::unique_ptr<TcpSocket>& out, Event& accepted) {
  auto sock = co_await listener.Accept();
  if (sock.ok()) out = std::move(*sock);
  accepted.Set();
}

TEST_F(TlsStreamTest, ClientHandshakeTimesOutAgainstASilentServer) {
  std::unique_ptr<TcpSocket> silent;
  auto result = RunTask(
      loop(),
      [](Loop& lp, TcpListener& l,
         std::unique_ptr<TcpSocket>& peer) -> Task<StatusOr<std::unique_ptr<TlsStream>>> {
        Event accepted(lp);
        TaskGroup group(lp);
        group.Spawn(AcceptSilently(l, peer, accepted));
        auto r = co_await ConnectTls(lp, l.local_address(), ClientContext(), "localhost", 300ms);
        co_await group.Join();
        co_return r;
      }(loop(), listener(), silent));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(result.status().message(),
            "TLS handshake with " + address().ToString() + " timed out after 300 ms");
  EXPECT_NE(silent, nullptr);
}

TEST_F(TlsStreamTest, ServerHandshakeTimesOutAgainstASilentClient) {
  std::unique_ptr<TcpSocket> silent_client;
  auto result =
      RunTask(loop(),
              [](Loop& lp, TcpListener& l,
                 std::unique_ptr<TcpSocket>& client) -> Task<StatusOr<std::unique_ptr<TlsStream>>> {
                auto sock = co_await TcpSocket::Connect(lp, l.local_address(), kGenerous);
                if (sock.ok()) client = std::move(*sock);
                co_return co_await AcceptTls(l, ServerContext(), 300ms);
              }(loop(), listener(), silent_client));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded) << result.status().ToString();
  EXPECT_NE(result.status().message().find("timed out after 300 ms"), std::string::npos);
}

TEST_F(TlsStreamTest, PeerClosingDuringTheHandshakeIsUnavailable) {
  auto result =
      RunTask(loop(), [](Loop& lp, TcpListener& l) -> Task<StatusOr<std::unique_ptr<TlsStream>>> {
        TaskGroup group(lp);
        group.Spawn([](TcpListener& listener) -> Task<void> {
          auto sock = co_await listener.Accept();  // and close it at once
        }(l));
        auto r =
            co_await ConnectTls(lp, l.local_address(), ClientContext(), "localhost", kGenerous);
        co_await group.Join();
        co_return r;
      }(loop(), listener()));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_EQ(result.status().message().rfind("TLS handshake with " + address().ToString(), 0), 0u)
      << result.status().ToString();
}

TEST_F(TlsStreamTest, CancellingTheHandshakeTaskEndsItWithCancelled) {
  std::unique_ptr<TcpSocket> silent;
  Status result = RunTask(
      loop(), [](Loop& lp, TcpListener& l, std::unique_ptr<TcpSocket>& peer) -> Task<Status> {
        Event accepted(lp);
        TaskGroup server(lp);
        server.Spawn(AcceptSilently(l, peer, accepted));
        Status connect_result = UnknownError("not run");
        TaskGroup client(lp);
        client.Spawn([](Loop& lp2, SocketAddress addr, Status& out) -> Task<void> {
          auto r = co_await ConnectTls(lp2, addr, ClientContext(), "localhost", 60s);
          out = r.status();
        }(lp, l.local_address(), connect_result));
        (void)co_await accepted.Wait();
        // The ClientHello is out and the client waits for the server's reply.
        co_await client.CancelAndJoin();
        co_await server.Join();
        co_return connect_result;
      }(loop(), listener(), silent));
  EXPECT_EQ(result.code(), StatusCode::kCancelled) << result.ToString();
}

TEST_F(TlsStreamTest, CloseCancelsPendingReadAndWrite) {
  Handshakes h;
  RunTask(loop(),
          RunHandshakes(loop(), listener(), ClientContext(), ServerContext(), "localhost", h));
  ASSERT_TRUE(h.client.ok() && h.server.ok());
  std::vector<uint8_t> huge = Pattern(64 << 20, 5);  // more than the socket buffers hold
  Status write_result, read_result;
  std::vector<uint8_t> ignored;
  RunTask(loop(),
          [](Loop& lp, TlsStream& client, const std::vector<uint8_t>& data, Status& w, Status& r,
             std::vector<uint8_t>& sink) -> Task<void> {
            TaskGroup group(lp);
            group.Spawn([](TlsStream& s, const std::vector<uint8_t>& d, Status& out) -> Task<void> {
              out = co_await s.Write(d);
            }(client, data, w));
            group.Spawn(ReadAll(client, sink, r));  // the server sends nothing
            // Let both reach their transport operations (the test holds either way).
            (void)co_await SleepFor(lp, 50ms);
            client.Close();
            client.Close();  // idempotent
            co_await group.Join();
          }(loop(), **h.client, huge, write_result, read_result, ignored));
  EXPECT_EQ(write_result.code(), StatusCode::kCancelled) << write_result.ToString();
  EXPECT_EQ(read_result.code(), StatusCode::kCancelled) << read_result.ToString();
  // Further calls fail at once.
  auto n = RunTask(loop(), (*h.client)->Read(ignored));
  EXPECT_EQ(n.status().code(), StatusCode::kCancelled);
}

TEST_F(TlsStreamTest, TransportEofWithoutCloseNotifyReadsAsEnd) {
  Handshakes h;
  RunTask(loop(),
          RunHandshakes(loop(), listener(), ClientContext(), ServerContext(), "localhost", h));
  ASSERT_TRUE(h.client.ok() && h.server.ok());
  (*h.server)->Close();
  std::vector<uint8_t> got;
  Status result;
  RunTask(loop(), ReadAll(**h.client, got, result));
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_TRUE(got.empty());
}

TEST_F(TlsStreamTest, WriteAfterShutdownWriteFails) {
  Handshakes h;
  RunTask(loop(),
          RunHandshakes(loop(), listener(), ClientContext(), ServerContext(), "localhost", h));
  ASSERT_TRUE(h.client.ok() && h.server.ok());
  EXPECT_TRUE(RunTask(loop(), (*h.client)->ShutdownWrite()).ok());
  std::vector<uint8_t> data = Pattern(10, 6);
  Status st = RunTask(loop(), (*h.client)->Write(data));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  // The server sees close_notify as the end; its own writes still reach us.
  std::vector<uint8_t> got;
  Status read_result;
  RunTask(loop(), ReadAll(**h.server, got, read_result));
  EXPECT_TRUE(read_result.ok()) << read_result.ToString();
  EXPECT_TRUE(got.empty());
  std::vector<uint8_t> answer = Pattern(70000, 7);
  Status write_result;
  RunTask(loop(), WriteAll(**h.server, answer, write_result));
  EXPECT_TRUE(write_result.ok()) << write_result.ToString();
  std::vector<uint8_t> got_answer;
  RunTask(loop(), ReadAll(**h.client, got_answer, read_result));
  EXPECT_TRUE(read_result.ok()) << read_result.ToString();
  EXPECT_TRUE(got_answer == answer);
}

}  // namespace
}  // namespace uxds
