// A29 on the client: a Cluster's UpstreamTlsContext secures the channel's
// connections to its endpoints when the channel has xDS credentials. Real
// TLS backends on loopback (uxds HTTP/2 servers), certificates made at test
// time, certificate providers from the bootstrap reading real files.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>

#include "channel_fixture.h"
#include "support/test_support.h"
#include "test_service/test_service.h"
#include "tls/tls_context.h"
#include "uxds/client_channel.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

// Backend 0 is plaintext; the TLS backends follow it in servers_.
constexpr int kMutualTlsBackend = 1;  // server_cert (DNS:localhost), client certificate required
constexpr int kMeshBackend = 2;       // mesh_server_cert (URI spiffe://td.example/...)

CertificateProviderConfig FileWatcher(const std::string& config_json) {
  return CertificateProviderConfig{.plugin_name = "file_watcher", .config_json = config_json};
}

class ChannelSecurityTest : public ChannelFixture {
 protected:
  ChannelSecurityTest() : ChannelFixture(1), certs_(MakeTestCertificates(dir_.path())) {
    customize_bootstrap_ = [this](Bootstrap& bootstrap) {
      bootstrap.certificate_providers["ca"] =
          FileWatcher(R"({"ca_certificate_file":")" + certs_.ca_cert + R"("})");
      bootstrap.certificate_providers["client"] =
          FileWatcher(R"({"certificate_file":")" + certs_.client_cert +
                      R"(","private_key_file":")" + certs_.client_key + R"("})");
      bootstrap.certificate_providers["other-ca"] =
          FileWatcher(R"({"ca_certificate_file":")" + certs_.other_ca_cert + R"("})");
      bootstrap.certificate_providers["missing"] =
          FileWatcher(R"({"ca_certificate_file":")" + dir_.File("missing.pem") + R"("})");
    };
  }

  void SetUp() override {
    ChannelFixture::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    TlsServerConfig mutual;
    mutual.certificate_chain_file = certs_.server_cert;
    mutual.private_key_file = certs_.server_key;
    mutual.ca_certificate_file = certs_.ca_cert;
    mutual.require_client_certificate = true;
    ServeTls(mutual);
    TlsServerConfig mesh;
    mesh.certificate_chain_file = certs_.mesh_server_cert;
    mesh.private_key_file = certs_.mesh_server_key;
    ServeTls(mesh);
  }

  void ServeTls(const TlsServerConfig& config) {
    const int index = static_cast<int>(servers_.size());
    backends_->RunSync([&] {
      auto services = std::make_shared<http2::ServiceRegistry>();
      test_service::RegisterTestService(*services, "b" + std::to_string(index),
                                        "host-" + std::to_string(index));
      http2::ServerOptions options;
      auto context = TlsServerContext::Create(config);
      ASSERT_TRUE(context.ok()) << context.status().ToString();
      options.tls = *context;
      auto server =
          http2::Server::Listen(backends_->loop(), SocketAddress::Loopback4(0), services, options);
      ASSERT_TRUE(server.ok()) << server.status().ToString();
      backends_->loop().Spawn((*server)->Serve());
      addresses_.push_back("127.0.0.1:" + std::to_string((*server)->port()));
      servers_.push_back(*std::move(server));
    });
  }

  // Listener `name` routes every call to cluster "c", whose endpoints are
  // backend `backend`.
  void Configure(const std::string& name, ResponseResource cluster, int backend) {
    ASSERT_TRUE(
        cp_->SetResources(kLdsType, {{name, ApiListenerWithRoutes(name, name, {{"", "c"}})}}, "1"));
    ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c", std::move(cluster)}}, "1"));
    ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s", EndpointsAt("s", {addresses_[backend]})}}, "1"));
  }

  void UseCredentials(ChannelCredentials credentials) {
    customize_options_ = [credentials](ChannelOptions& options) {
      options.credentials = credentials;
    };
  }

  TempDir dir_;
  TestCertificates certs_;
};

// A29: roots from one provider instance, the identity from another; the
// backend requires a client certificate, so a call that succeeds went over
// mutual TLS. The server certificate's DNS SAN passes the exact matcher.
TEST_F(ChannelSecurityTest, XdsCredentialsMakeTheClustersConnectionsMutualTls) {
  Configure("svc", SecureCluster("c", "s", "ca", "client", {"exact:localhost"}), kMutualTlsBackend);
  UseCredentials(ChannelCredentials::Xds(ChannelCredentials::Insecure()));
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kUnaryCall);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[kMutualTlsBackend]);
}

// A29: the SAN matchers replace the host name check: the mesh certificate
// names no 127.0.0.1, and its URI SAN is what the prefix matcher accepts.
TEST_F(ChannelSecurityTest, TheSanMatchersDecideInsteadOfTheHostName) {
  Configure("svc", SecureCluster("c", "s", "ca", "", {"prefix:spiffe://td.example/ns/default/"}),
            kMeshBackend);
  UseCredentials(ChannelCredentials::Xds(ChannelCredentials::Insecure()));
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kUnaryCall);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[kMeshBackend]);
}

// A29: a server whose SANs pass no matcher fails the handshake; the call
// fails UNAVAILABLE and says why.
TEST_F(ChannelSecurityTest, AServerWhoseSansMatchNothingFailsTheCallUnavailable) {
  Configure("svc", SecureCluster("c", "s", "ca", "", {"exact:backend.other.example"}),
            kMeshBackend);
  UseCredentials(ChannelCredentials::Xds(ChannelCredentials::Insecure()));
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kUnaryCall);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("certificate check failure"), std::string::npos)
      << reply.status().ToString();
}

// Roots the server's chain does not verify against fail the same way.
TEST_F(ChannelSecurityTest, RootsThatDoNotVouchForTheServerFailTheCall) {
  Configure("svc", SecureCluster("c", "s", "other-ca", "", {}), kMeshBackend);
  UseCredentials(ChannelCredentials::Xds(ChannelCredentials::Insecure()));
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kUnaryCall);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status().ToString();
}

// A provider whose files cannot be read gives nothing to connect with: the
// call fails UNAVAILABLE naming the instance, and nothing is sent in the
// clear.
TEST_F(ChannelSecurityTest, AProviderWithNoCertificatesFailsTheCallNamingIt) {
  Configure("svc", SecureCluster("c", "s", "missing", "", {}), kMeshBackend);
  UseCredentials(ChannelCredentials::Xds(ChannelCredentials::Insecure()));
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kUnaryCall);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("\"missing\""), std::string::npos)
      << reply.status().ToString();
}

// As gRPC: without xDS credentials the security config is ignored, and the
// channel speaks plaintext to the cluster's (plaintext) backend.
TEST_F(ChannelSecurityTest, WithoutXdsCredentialsTheSecurityConfigIsIgnored) {
  Configure("svc", SecureCluster("c", "s", "ca", "client", {"exact:localhost"}), 0);
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kUnaryCall);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[0]);
}

// A cluster without security config uses the fallback: plaintext here.
TEST_F(ChannelSecurityTest, AClusterWithoutSecurityConfigUsesAnInsecureFallback) {
  Configure("svc", ValidCluster("c", "s"), 0);
  UseCredentials(ChannelCredentials::Xds(ChannelCredentials::Insecure()));
  CreateChannel("xds:///svc");
  auto reply = Call(test_service::kUnaryCall);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[0]);
}

// ... or TLS from files, the server checked against the target's host
// ("localhost", which the server certificate names).
TEST_F(ChannelSecurityTest, AClusterWithoutSecurityConfigUsesATlsFallback) {
  Configure("localhost", ValidCluster("c", "s"), kMutualTlsBackend);
  UseCredentials(
      ChannelCredentials::Xds(ChannelCredentials::Tls({.ca_certificate_file = certs_.ca_cert,
                                                       .certificate_file = certs_.client_cert,
                                                       .private_key_file = certs_.client_key})));
  CreateChannel("xds:///localhost");
  auto reply = Call(test_service::kUnaryCall);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[kMutualTlsBackend]);
}

// TLS credentials on a host:port target (no xDS): the server must name the
// target's host. The mutual TLS backend's certificate names "localhost";
// the mesh backend's names neither it nor 127.0.0.1.
TEST_F(ChannelSecurityTest, TlsCredentialsCheckAHostPortTargetsHost) {
  auto port_of = [&](int backend) {
    return addresses_[backend].substr(addresses_[backend].rfind(':') + 1);
  };
  UseCredentials(ChannelCredentials::Tls({.ca_certificate_file = certs_.ca_cert,
                                          .certificate_file = certs_.client_cert,
                                          .private_key_file = certs_.client_key}));
  CreateChannel("localhost:" + port_of(kMutualTlsBackend));
  CallOptions options;
  options.wait_for_ready = true;  // "localhost" may resolve to ::1 first
  auto reply = Call(test_service::kUnaryCall, options);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[kMutualTlsBackend]);
  RunOnControl<bool>([&]() -> Task<bool> {
    co_await channel_->Shutdown();
    co_return true;
  });
  control_->RunSync([&] { channel_.reset(); });
  // The mesh certificate names no 127.0.0.1 (one address: one error).
  CreateChannel("127.0.0.1:" + port_of(kMeshBackend));
  auto refused = Call(test_service::kUnaryCall);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("CERTIFICATE_VERIFY_FAILED"), std::string::npos)
      << refused.status().ToString();
}

// A TLS file that cannot be read fails Channel::Create, naming it.
TEST_F(ChannelSecurityTest, TlsCredentialsWithAMissingFileFailChannelCreation) {
  control_->RunSync([&] {
    ChannelOptions options;
    options.xds_client_pool = pool_;
    options.credentials = ChannelCredentials::Xds(
        ChannelCredentials::Tls({.ca_certificate_file = dir_.File("none.pem")}));
    auto channel = Channel::Create(control_->loop(), "xds:///svc", options);
    ASSERT_FALSE(channel.ok());
    EXPECT_EQ(channel.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(channel.status().message().find("none.pem"), std::string::npos)
        << channel.status().ToString();
    options.credentials = ChannelCredentials::Xds(ChannelCredentials::Xds({}));
    channel = Channel::Create(control_->loop(), "xds:///svc", options);
    ASSERT_FALSE(channel.ok());
    EXPECT_EQ(channel.status().code(), StatusCode::kInvalidArgument);
  });
}

// Two clusters send calls to the same TLS backend, one secured and one not:
// they must not share a connection. The secured one's calls succeed; the
// plaintext one's cannot speak to a TLS server.
TEST_F(ChannelSecurityTest, TheSameAddressSecuredTwoWaysIsTwoConnections) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType,
      {{"svc",
        ApiListenerWithRoutes("svc", "svc",
                              {{"/grpc.testing.TestService/EmptyCall", "plain"}, {"", "secure"}})}},
      "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType,
      {{"secure", SecureCluster("secure", "s", "ca", "", {"prefix:spiffe://td.example/"})},
       {"plain", ValidCluster("plain", "s")}},
      "1"));
  ASSERT_TRUE(
      cp_->SetResources(kEdsType, {{"s", EndpointsAt("s", {addresses_[kMeshBackend]})}}, "1"));
  UseCredentials(ChannelCredentials::Xds(ChannelCredentials::Insecure()));
  CreateChannel("xds:///svc");
  auto secure = Call(test_service::kUnaryCall);
  ASSERT_TRUE(secure.ok()) << secure.status().ToString();
  EXPECT_EQ(secure->peer, addresses_[kMeshBackend]);
  CallOptions quick;
  quick.timeout = milliseconds(2000);
  auto plain = Call(test_service::kEmptyCall, quick);
  EXPECT_FALSE(plain.ok());
  auto again = Call(test_service::kUnaryCall);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
}

// A LoopChannel's own connections are secured as the channel's are.
TEST_F(ChannelSecurityTest, ALoopChannelsConnectionsAreSecuredToo) {
  Configure("svc", SecureCluster("c", "s", "ca", "client", {"exact:localhost"}), kMutualTlsBackend);
  UseCredentials(ChannelCredentials::Xds(ChannelCredentials::Insecure()));
  CreateChannel("xds:///svc");
  // The channel's own connection first: an endpoint is READY for every
  // loop when it is READY for the channel.
  ASSERT_TRUE(Call(test_service::kUnaryCall).ok());
  std::unique_ptr<LoopThread> worker = *LoopThread::Start();
  std::unique_ptr<LoopChannel> handle = channel_->OnLoop(worker->loop());
  std::promise<StatusOr<UnaryResponse>> result;
  worker->RunSync([&] {
    worker->loop().Spawn([](LoopChannel* h,
                            std::promise<StatusOr<UnaryResponse>>* out) -> Task<void> {
      CallOptions options;
      options.timeout = std::chrono::seconds(10);
      StatusOr<UnaryResponse> reply = co_await h->UnaryCall(test_service::kUnaryCall, "", options);
      co_await h->Shutdown();
      out->set_value(std::move(reply));
    }(handle.get(), &result));
  });
  StatusOr<UnaryResponse> reply = result.get_future().get();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, addresses_[kMutualTlsBackend]);
  worker->RunSync([&] { handle.reset(); });
}

}  // namespace
}  // namespace uxds::testing
