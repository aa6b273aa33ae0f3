// gRPC over TLS (BoringSSL, ALPN h2): our client against our server.
#include <gtest/gtest.h>

#include <string>

#include "http2_test_util.h"
#include "support/test_support.h"
#include "tls/tls_context.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;

class Http2TlsTest : public Http2Test {
 protected:
  void SetUp() override {
    Http2Test::SetUp();
    certs_ = uxds::testing::MakeTestCertificates(dir_.path());
  }

  // `verify_client`: ask for a client certificate (verified against the
  // test CA) without requiring one.
  ServerOptions TlsServerOptions(bool require_client_certificate = false,
                                 bool verify_client = false) {
    TlsServerConfig config;
    config.certificate_chain_file = certs_.server_cert;
    config.private_key_file = certs_.server_key;
    if (require_client_certificate || verify_client) {
      config.ca_certificate_file = certs_.ca_cert;
      config.require_client_certificate = require_client_certificate;
    }
    StatusOr<std::shared_ptr<TlsServerContext>> context = TlsServerContext::Create(config);
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    ServerOptions options;
    if (context.ok()) options.tls = *context;
    options.handshake_timeout = milliseconds(5000);
    return options;
  }

  ClientConnectionOptions TlsClientOptions(const std::string& ca_file, bool client_certificate) {
    TlsClientConfig config;
    config.ca_certificate_file = ca_file;
    if (client_certificate) {
      config.certificate_file = certs_.client_cert;
      config.private_key_file = certs_.client_key;
    }
    StatusOr<std::shared_ptr<TlsClientContext>> context = TlsClientContext::Create(config);
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    ClientConnectionOptions options;
    if (context.ok()) options.tls = *context;
    options.connect_timeout = milliseconds(5000);
    return options;
  }

  uxds::testing::TempDir dir_;
  uxds::testing::TestCertificates certs_;
};

TEST_F(Http2TlsTest, UnaryBidiAndLargeMessagesOverTls) {
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect(TlsClientOptions(certs_.ca_cert, false));
        CO_ASSERT_OK(conn);
        StatusOr<std::string> echoed = co_await UnaryCall(**conn, "/test.Echo/Unary", "secret");
        CO_ASSERT_OK(echoed);
        EXPECT_EQ(*echoed, "secret");

        std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Bidi");
        const std::string big(3 << 20, 'B');
        for (int i = 0; i < 3; ++i) {
          const Status written = co_await call->Write(big);
          CO_ASSERT_TRUE(written.ok());
          std::optional<std::string> back = co_await call->Read();
          CO_ASSERT_TRUE(back.has_value());
          EXPECT_TRUE(*back == big);
        }
        const Status done = co_await call->WritesDone();
        EXPECT_TRUE(done.ok());
        const Status finished = co_await call->Finish();
        EXPECT_TRUE(finished.ok()) << finished.ToString();
        co_await (*conn)->Close();
      },
      TlsServerOptions());
}

TEST_F(Http2TlsTest, ServerNameOverrideIsVerified) {
  RunWithServer(
      [&]() -> Task<void> {
        ClientConnectionOptions matching = TlsClientOptions(certs_.ca_cert, false);
        matching.tls_server_name = "backend.test.example.com";  // *.test.example.com
        auto conn = co_await Connect(matching);
        CO_ASSERT_OK(conn);
        CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "x"));
        co_await (*conn)->Close();

        ClientConnectionOptions wrong = TlsClientOptions(certs_.ca_cert, false);
        wrong.tls_server_name = "wrong.example.org";
        auto refused = co_await Connect(wrong);
        EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
      },
      TlsServerOptions());
}

TEST_F(Http2TlsTest, UntrustedServerIsUnavailable) {
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect(TlsClientOptions(certs_.other_ca_cert, false));
        EXPECT_EQ(conn.status().code(), StatusCode::kUnavailable) << conn.status().ToString();
        // The server is fine for trusting clients.
        auto good = co_await Connect(TlsClientOptions(certs_.ca_cert, false));
        CO_ASSERT_OK(good);
        CO_ASSERT_OK(co_await UnaryCall(**good, "/test.Echo/Unary", "x"));
        co_await (*good)->Close();
      },
      TlsServerOptions());
}

// ServerCall::connection(): both ends, and over TLS the client
// certificate's identities (what RBAC authorizes on, A41).
TEST_F(Http2TlsTest, CallsSeeTheirConnectionAndTheClientsCertificate) {
  RunWithServer(
      [&]() -> Task<void> {
        auto mutual = co_await Connect(TlsClientOptions(certs_.ca_cert, true));
        CO_ASSERT_OK(mutual);
        CO_ASSERT_OK(co_await UnaryCall(**mutual, "/test.Echo/Unary", "x"));
        const ConnectionInfo& seen = probe_->last_connection;
        EXPECT_EQ(seen.local.port, server_->port());
        EXPECT_NE(seen.peer.port, 0);
        EXPECT_FALSE(seen.peer.is_ipv6);
        EXPECT_EQ(seen.peer.bytes()[0], 127);
        CO_ASSERT_TRUE(seen.tls.has_value());
        EXPECT_TRUE(seen.tls->has_certificate);
        EXPECT_EQ(seen.tls->dns_sans, std::vector<std::string>{"client.test.example.com"});
        EXPECT_TRUE(seen.tls->uri_sans.empty());
        EXPECT_EQ(seen.tls->subject, "CN=client");
        EXPECT_EQ(probe_->last_content_type, "application/grpc");
        co_await (*mutual)->Close();

        auto server_only = co_await Connect(TlsClientOptions(certs_.ca_cert, false));
        CO_ASSERT_OK(server_only);
        CO_ASSERT_OK(co_await UnaryCall(**server_only, "/test.Echo/Unary", "x"));
        CO_ASSERT_TRUE(probe_->last_connection.tls.has_value());
        EXPECT_FALSE(probe_->last_connection.tls->has_certificate);
        EXPECT_EQ(probe_->last_connection.tls->subject, "");
        co_await (*server_only)->Close();
      },
      TlsServerOptions(/*require_client_certificate=*/false, /*verify_client=*/true));
}

TEST_F(Http2TlsTest, MutualTlsRequiresTheClientCertificate) {
  RunWithServer(
      [&]() -> Task<void> {
        auto with_cert = co_await Connect(TlsClientOptions(certs_.ca_cert, true));
        CO_ASSERT_OK(with_cert);
        CO_ASSERT_OK(co_await UnaryCall(**with_cert, "/test.Echo/Unary", "mtls"));
        co_await (*with_cert)->Close();

        auto without = co_await Connect(TlsClientOptions(certs_.ca_cert, false));
        if (without.ok()) {
          // TLS 1.3 lets the client finish before the server checks its
          // certificate: the refusal then shows on the first call.
          StatusOr<std::string> response = co_await UnaryCall(**without, "/test.Echo/Unary", "x");
          EXPECT_EQ(response.status().code(), StatusCode::kUnavailable)
              << response.status().ToString();
          co_await (*without)->Close();
        } else {
          EXPECT_EQ(without.status().code(), StatusCode::kUnavailable)
              << without.status().ToString();
        }
      },
      TlsServerOptions(/*require_client_certificate=*/true));
}

TEST_F(Http2TlsTest, PlaintextClientCannotTalkToTlsServer) {
  RunWithServer(
      [&]() -> Task<void> {
        ClientConnectionOptions plaintext;
        plaintext.connect_timeout = milliseconds(5000);
        auto conn = co_await Connect(plaintext);
        EXPECT_FALSE(conn.ok());
        EXPECT_EQ(conn.status().code(), StatusCode::kUnavailable) << conn.status().ToString();
      },
      TlsServerOptions());
}

TEST_F(Http2TlsTest, DrainOverTls) {
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect(TlsClientOptions(certs_.ca_cert, false));
        CO_ASSERT_OK(conn);
        std::unique_ptr<ClientCall> held = (*conn)->StartCall("/test.Echo/Hold");
        CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));
        TaskGroup group(*loop_);
        group.Spawn(server_->Shutdown(std::chrono::seconds(20)));
        const bool goaway = co_await WaitUntil(*loop_, [&] { return !(*conn)->usable(); });
        EXPECT_TRUE(goaway);
        probe_->release.Set();
        const Status status = co_await held->Finish();
        EXPECT_TRUE(status.ok()) << status.ToString();
        const Status closed = co_await (*conn)->closed_event().Wait();
        EXPECT_TRUE(closed.ok());
        co_await group.Join();
      },
      TlsServerOptions());
}

}  // namespace
}  // namespace uxds::http2::testing
