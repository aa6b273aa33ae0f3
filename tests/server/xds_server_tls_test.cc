// A29 on the server: a filter chain's DownstreamTlsContext secures the
// connections the chain is chosen for, when the server has xDS credentials.
// The fake control plane sends the Listener; certificates made at test time
// are read by file_watcher providers; uxds's own HTTP/2 client connects over
// TLS (or not) and calls.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "support/test_support.h"
#include "support/xds_test_resources.h"
#include "tls/tls_context.h"
#include "uxds/client_channel.h"
#include "xds_server_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

CertificateProviderConfig FileWatcher(const std::string& config_json) {
  return CertificateProviderConfig{.plugin_name = "file_watcher", .config_json = config_json};
}

class XdsServerTlsTest : public XdsServerTest {
 protected:
  void SetUp() override {
    XdsServerTest::SetUp();
    certs_ = MakeTestCertificates(dir_.path());
    // The server's identity files are copies, so a test can replace them.
    WriteFile(identity_cert_, ReadFile(certs_.server_cert));
    WriteFile(identity_key_, ReadFile(certs_.server_key));
    customize_bootstrap_ = [this](Bootstrap& bootstrap) {
      bootstrap.certificate_providers["server-id"] =
          FileWatcher(R"({"certificate_file":")" + identity_cert_ + R"(","private_key_file":")" +
                      identity_key_ + R"("})");
      bootstrap.certificate_providers["ca"] =
          FileWatcher(R"({"ca_certificate_file":")" + certs_.ca_cert + R"("})");
      bootstrap.certificate_providers["client"] =
          FileWatcher(R"({"certificate_file":")" + certs_.client_cert +
                      R"(","private_key_file":")" + certs_.client_key + R"("})");
      bootstrap.certificate_providers["missing"] =
          FileWatcher(R"({"certificate_file":")" + dir_.File("none.pem") +
                      R"(","private_key_file":")" + dir_.File("none.key") + R"("})");
    };
  }

  // Serves every connection to the listening port under one chain.
  void ServeOneChain(ServerChain chain, ServerCredentials credentials) {
    const std::string address = "127.0.0.1:" + std::to_string(port_);
    XdsServerOptions options;
    options.credentials = std::move(credentials);
    StartServer(address, std::move(options));
    SetListener(Listener(ListenerNameFor(address), "127.0.0.1", port_, {std::move(chain)}), "1");
    ASSERT_TRUE(WaitForServing().has_value());
  }

  // A TLS client trusting the test CA, offering the client certificate if
  // `mutual`. It accepts any server the CA vouches for and records the
  // SANs it saw (`seen_sans_`).
  http2::ClientConnectionOptions TlsClient(bool mutual) {
    TlsClientConfig config;
    config.ca_certificate_file = certs_.ca_cert;
    if (mutual) {
      config.certificate_file = certs_.client_cert;
      config.private_key_file = certs_.client_key;
    }
    config.server_authorization = [this](const std::vector<SubjectAltName>& sans) {
      std::lock_guard lock(sans_mu_);
      seen_sans_ = sans;
      return true;
    };
    auto context = TlsClientContext::Create(config);
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    http2::ClientConnectionOptions options;
    if (context.ok()) options.tls = *context;
    return options;
  }

  // Whether the last server certificate seen names `value` among its SANs.
  bool SawSan(const std::string& value) {
    std::lock_guard lock(sans_mu_);
    for (const SubjectAltName& san : seen_sans_) {
      if (san.value == value) return true;
    }
    return false;
  }

  // The interop tests' mesh, for client and server alike: the server
  // Listener of `address` (one chain, mutual TLS required), and "xds:///svc"
  // routed to cluster "c" (mutual TLS, the server checked for
  // DNS:localhost) whose one endpoint is `address`.
  void ConfigureMutualTlsMesh(const std::string& address) {
    const ServerListenerSpec server_listener =
        Listener(ListenerNameFor(address), "127.0.0.1", port_, {TlsChain("ca", true)});
    ASSERT_TRUE(cp_->SetResources(kLdsType,
                                  {{server_listener.name, ServerListener(server_listener)},
                                   {"svc", ApiListenerWithRoutes("svc", "svc", {{"", "c"}})}},
                                  "1"));
    ASSERT_TRUE(cp_->SetResources(
        kCdsType, {{"c", SecureCluster("c", "s", "ca", "client", {"exact:localhost"})}}, "1"));
    ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s", EndpointsAt("s", {address})}}, "1"));
  }

  static ServerChain TlsChain(std::string ca, bool require_client_certificate) {
    ServerChain chain = Chain("tls");
    chain.tls_identity = "server-id";
    chain.tls_ca = std::move(ca);
    chain.require_client_certificate = require_client_certificate;
    return chain;
  }

  TempDir dir_;
  TestCertificates certs_;
  const std::string identity_cert_ = dir_.File("identity.pem");
  const std::string identity_key_ = dir_.File("identity.key");
  std::mutex sans_mu_;
  std::vector<SubjectAltName> seen_sans_;
};

// A29: identity from one instance, client certificates verified against
// another and required. Only a client with a certificate gets through; a
// plaintext client gets nothing served.
TEST_F(XdsServerTlsTest, AChainWithADownstreamTlsContextServesMutualTls) {
  ServeOneChain(TlsChain("ca", true), ServerCredentials::Xds(ServerCredentials::Insecure()));
  StatusOr<std::string> mutual = Call("127.0.0.1", "/a.B/C", TlsClient(true));
  ASSERT_TRUE(mutual.ok()) << mutual.status().ToString();
  EXPECT_TRUE(SawSan("localhost"));
  EXPECT_FALSE(Call("127.0.0.1", "/a.B/C", TlsClient(false)).ok());
  EXPECT_FALSE(Call("127.0.0.1", "/a.B/C").ok());
}

// Without a CA instance the server asks for no client certificate: TLS,
// not mutual TLS.
TEST_F(XdsServerTlsTest, AChainWithoutACaInstanceServesPlainTls) {
  ServeOneChain(TlsChain("", false), ServerCredentials::Xds(ServerCredentials::Insecure()));
  StatusOr<std::string> reply = Call("127.0.0.1", "/a.B/C", TlsClient(false));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_FALSE(Call("127.0.0.1", "/a.B/C").ok());
}

// As gRPC: without xDS credentials the chain's security config is ignored.
TEST_F(XdsServerTlsTest, WithoutXdsCredentialsTheSecurityConfigIsIgnored) {
  ServeOneChain(TlsChain("ca", true), ServerCredentials::Insecure());
  StatusOr<std::string> reply = Call("127.0.0.1", "/a.B/C");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
}

// A chain without security config uses the fallback credentials: TLS from
// files here.
TEST_F(XdsServerTlsTest, AChainWithoutSecurityConfigUsesTheFallback) {
  ServeOneChain(Chain("plain"), ServerCredentials::Xds(ServerCredentials::Tls(
                                    {.certificate_chain_file = certs_.mesh_server_cert,
                                     .private_key_file = certs_.mesh_server_key})));
  StatusOr<std::string> reply = Call("127.0.0.1", "/a.B/C", TlsClient(false));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(SawSan("spiffe://td.example/ns/default/sa/backend"));
  EXPECT_FALSE(Call("127.0.0.1", "/a.B/C").ok());
}

// A36 + A29: the chain, and so whether the connection is TLS, is chosen
// from the addresses before any byte is read. 127.0.0.1 reaches the TLS
// chain; ::1 the plaintext default chain.
TEST_F(XdsServerTlsTest, TheChainIsChosenBeforeTheHandshake) {
  const std::string address = "[::]:" + std::to_string(port_);
  XdsServerOptions options;
  options.credentials = ServerCredentials::Xds(ServerCredentials::Insecure());
  StartServer(address, std::move(options));
  ServerChain tls = TlsChain("ca", false);
  tls.prefix_ranges = {"127.0.0.1/32"};
  ServerListenerSpec spec = Listener(ListenerNameFor(address), "::", port_, {tls});
  spec.default_chain = Chain("default");
  SetListener(spec, "1");
  ASSERT_TRUE(WaitForServing().has_value());
  EXPECT_TRUE(Call("127.0.0.1", "/a.B/C", TlsClient(false)).ok());
  EXPECT_FALSE(Call("127.0.0.1", "/a.B/C").ok());
  EXPECT_TRUE(Call("::1", "/a.B/C").ok());
}

// Bad security config in a Listener is NACKed and the server keeps what
// it serves (A29 + A36).
TEST_F(XdsServerTlsTest, AListenerWithBadSecurityConfigIsNackedAndTheOldOneKept) {
  ServeOneChain(TlsChain("", false), ServerCredentials::Xds(ServerCredentials::Insecure()));
  ServerChain unknown = TlsChain("", false);
  unknown.tls_identity = "not-in-the-bootstrap";
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  SetListener(Listener(ListenerNameFor(address), "127.0.0.1", port_, {unknown}), "2");
  auto nack = cp_->NextRequestMatching(milliseconds(10000), [](const ObservedRequest& r) {
    return r.type_url == kLdsType && r.error_detail.has_value();
  });
  ASSERT_TRUE(nack.has_value()) << "version 2 was not NACKed";
  EXPECT_EQ(nack->version_info, "1");
  EXPECT_NE(nack->error_detail->message.find(
                "unrecognized certificate provider instance name: not-in-the-bootstrap"),
            std::string::npos)
      << nack->error_detail->message;
  EXPECT_TRUE(Call("127.0.0.1", "/a.B/C", TlsClient(false)).ok());
}

// A provider with no usable certificates secures nothing: the connection
// is closed, never served in the clear.
TEST_F(XdsServerTlsTest, AnIdentityWithNoCertificatesClosesTheConnection) {
  ServerChain chain = TlsChain("", false);
  chain.tls_identity = "missing";
  LogCapture log;
  ServeOneChain(chain, ServerCredentials::Xds(ServerCredentials::Insecure()));
  EXPECT_FALSE(Call("127.0.0.1", "/a.B/C", TlsClient(false)).ok());
  EXPECT_FALSE(Call("127.0.0.1", "/a.B/C").ok());
  // The reason is the operator's to read (the client saw a closed
  // connection): logged once, not once per connection.
  EXPECT_EQ(log.Count("filter chain \"tls\" closes its connections unserved: certificate "
                      "provider instance \"missing\" has no certificates"),
            1);
}

// A hostile client that connects to a TLS chain and never sends its
// ClientHello is closed once the handshake timeout passes, without a byte of
// HTTP/2 and without keeping its max_connections slot; one that sends
// something that is not TLS is closed at once. Neither holds up Shutdown().
TEST_F(XdsServerTlsTest, SilentAndGarbledTlsClientsAreClosedAndDoNotHoldUpShutdown) {
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  XdsServerOptions options;
  options.credentials = ServerCredentials::Xds(ServerCredentials::Insecure());
  options.handshake_timeout = milliseconds(300);
  options.max_connections = 1;
  StartServer(address, std::move(options));
  SetListener(Listener(ListenerNameFor(address), "127.0.0.1", port_, {TlsChain("", false)}), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  const ConnectionProbe silent = Probe("127.0.0.1", port_, std::nullopt, milliseconds(10'000));
  EXPECT_TRUE(silent.closed_by_server);
  EXPECT_EQ(silent.bytes_received, 0u);
  // Its slot was given back: a real client gets the one connection allowed.
  EXPECT_TRUE(Call("127.0.0.1", "/a.B/C", TlsClient(false)).ok());
  // Not TLS at all: an HTTP/2 preface where a ClientHello belongs.
  EXPECT_FALSE(Call("127.0.0.1", "/a.B/C").ok());
  // A silent client still in its handshake when the server shuts down.
  auto target = SocketAddress::FromIpAndPort("127.0.0.1", port_);
  ASSERT_TRUE(target.ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::connect(fd, target->sockaddr_ptr(), target->size()), 0);
  auto returned = StartShutdown(milliseconds(100));
  EXPECT_EQ(returned.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "Shutdown() waited on a client that never finished its handshake";
  ::close(fd);
}

// A29: new certificates apply to new connections; a connection made with
// the old ones keeps working.
TEST_F(XdsServerTlsTest, ANewCertificateAppliesToNewConnectionsAndKeepsOpenOnes) {
  ServeOneChain(TlsChain("", false), ServerCredentials::Xds(ServerCredentials::Insecure()));
  auto address = SocketAddress::FromIpAndPort("127.0.0.1", port_);
  ASSERT_TRUE(address.ok());
  http2::ClientConnectionOptions options = TlsClient(false);
  auto connect = [](Loop& loop, SocketAddress address, http2::ClientConnectionOptions options)
      -> Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> {
    co_return co_await http2::ClientConnection::Connect(loop, address, options);
  };
  auto old_connection = client_loop_->BlockOn(connect(*client_loop_, *address, options));
  ASSERT_TRUE(old_connection.ok()) << old_connection.status().ToString();
  EXPECT_TRUE(SawSan("localhost"));
  // Replace the identity (key first: a pair that does not match is never
  // used, the previous one is kept until the files agree).
  WriteFile(identity_key_ + ".new", ReadFile(certs_.mesh_server_key));
  WriteFile(identity_cert_ + ".new", ReadFile(certs_.mesh_server_cert));
  std::filesystem::rename(identity_key_ + ".new", identity_key_);
  std::filesystem::rename(identity_cert_ + ".new", identity_cert_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool rotated = false;
  while (!rotated && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(Call("127.0.0.1", "/a.B/C", TlsClient(false)).ok());
    rotated = SawSan("spiffe://td.example/ns/default/sa/backend");
    if (!rotated) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(rotated) << "new connections never saw the new certificate";
  auto call_on_old = [](http2::ClientConnection* connection) -> Task<StatusOr<std::string>> {
    StatusOr<std::string> reply = co_await http2::UnaryCall(
        *connection, "/a.B/C", "", {}, Loop::Clock::now() + std::chrono::seconds(10));
    co_await connection->Close();
    co_return reply;
  };
  StatusOr<std::string> reply = client_loop_->BlockOn(call_on_old(old_connection->get()));
  EXPECT_TRUE(reply.ok()) << reply.status().ToString();
}

// Interop (A29): gRPC C++ 1.51's xDS client, with XdsCredentials, calls a
// uxds xDS-enabled server over mutual TLS that only xDS configured: the
// Cluster's UpstreamTlsContext on gRPC's side, the filter chain's
// DownstreamTlsContext on ours, both from the same control plane. The
// server requires a client certificate, so a call that succeeds went over
// mutual TLS. Skipped in builds without the gRPC C++ peers.
TEST_F(XdsServerTlsTest, GrpcCppXdsCredentialsCallAUxdsServerOverMutualTls) {
  const std::string binary = BuildRoot() + "/tests/peers/grpc_cpp_xds_client";
  if (access(binary.c_str(), X_OK) != 0) GTEST_SKIP() << "no gRPC C++ peer in this build";
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  XdsServerOptions options;
  options.credentials = ServerCredentials::Xds(ServerCredentials::Insecure());
  StartServer(address, std::move(options));
  ConfigureMutualTlsMesh(address);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitForServing().has_value());
  const std::string bootstrap = dir_.File("grpc_bootstrap.json");
  WriteFile(bootstrap,
            R"({"xds_servers":[{"server_uri":")" + cp_->target() +
                R"(","channel_creds":[{"type":"insecure"}],"server_features":["xds_v3"]}],)"
                R"("node":{"id":"grpc-cpp-client"},"certificate_providers":{)"
                R"("ca":{"plugin_name":"file_watcher","config":{"ca_certificate_file":")" +
                certs_.ca_cert +
                R"("}},)"
                R"("client":{"plugin_name":"file_watcher","config":{"certificate_file":")" +
                certs_.client_cert + R"(","private_key_file":")" + certs_.client_key + R"("}}}})");
  Subprocess client = Subprocess::Start(
      {binary, "--calls", "5", "--deadline-ms", "20000", "--xds-creds", "xds:///svc"},
      {{"GRPC_XDS_BOOTSTRAP", bootstrap}, {"GRPC_XDS_EXPERIMENTAL_SECURITY_SUPPORT", "true"}});
  std::optional<std::string> summary = client.WaitForLine("{\"summary\"", std::chrono::seconds(60));
  const int exit_code = client.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(summary.has_value()) << "gRPC C++ client printed no summary";
  EXPECT_EQ(exit_code, 0) << *summary;
  EXPECT_NE(summary->find("\"ok\":5"), std::string::npos) << *summary;
}

// Interop (A29), the other way: a uxds channel with xDS credentials calls
// gRPC C++ 1.51's XdsServerBuilder server with XdsServerCredentials over
// mutual TLS that only xDS configured (the server requires a client
// certificate). Skipped in builds without the gRPC C++ peers.
TEST_F(XdsServerTlsTest, AUxdsChannelCallsAGrpcCppXdsServerOverMutualTls) {
  const std::string binary = BuildRoot() + "/tests/peers/grpc_cpp_test_server";
  if (access(binary.c_str(), X_OK) != 0) GTEST_SKIP() << "no gRPC C++ peer in this build";
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  ConfigureMutualTlsMesh(address);
  ASSERT_FALSE(HasFatalFailure());
  const std::string bootstrap = dir_.File("grpc_server_bootstrap.json");
  WriteFile(bootstrap,
            R"({"xds_servers":[{"server_uri":")" + cp_->target() +
                R"(","channel_creds":[{"type":"insecure"}],"server_features":["xds_v3"]}],)"
                R"("node":{"id":"grpc-cpp-server"},"server_listener_resource_name_template":")" +
                std::string(kTemplate) +
                R"(","certificate_providers":{)"
                R"("ca":{"plugin_name":"file_watcher","config":{"ca_certificate_file":")" +
                certs_.ca_cert +
                R"("}},)"
                R"("server-id":{"plugin_name":"file_watcher","config":{"certificate_file":")" +
                certs_.server_cert + R"(","private_key_file":")" + certs_.server_key + R"("}}}})");
  Subprocess server = Subprocess::Start(
      {binary, "--xds", "--port", std::to_string(port_)},
      {{"GRPC_XDS_BOOTSTRAP", bootstrap}, {"GRPC_XDS_EXPERIMENTAL_SECURITY_SUPPORT", "true"}});
  ASSERT_TRUE(server.WaitForLine("SERVING", std::chrono::seconds(60)).has_value())
      << "the gRPC C++ xDS server never served";

  std::promise<StatusOr<UnaryResponse>> result;
  std::shared_ptr<XdsClientPool> pool;
  std::unique_ptr<Channel> channel;
  control_->RunSync([&] {
    Bootstrap uxds_bootstrap;
    XdsServerConfig xds_server;
    xds_server.server_uri = cp_->target();
    uxds_bootstrap.xds_servers.push_back(xds_server);
    uxds_bootstrap.node.id = "uxds-channel";
    customize_bootstrap_(uxds_bootstrap);
    pool = *XdsClientPool::Create(control_->loop(), uxds_bootstrap);
    ChannelOptions options;
    options.xds_client_pool = pool;
    options.credentials = ChannelCredentials::Xds(ChannelCredentials::Insecure());
    channel = *Channel::Create(control_->loop(), "xds:///svc", options);
    control_->loop().Spawn(
        [](Channel* channel, std::promise<StatusOr<UnaryResponse>>* out) -> Task<void> {
          CallOptions call;
          call.timeout = std::chrono::seconds(20);
          call.wait_for_ready = true;
          StatusOr<UnaryResponse> reply =
              co_await channel->UnaryCall("/grpc.testing.TestService/UnaryCall", "", call);
          co_await channel->Shutdown();
          out->set_value(std::move(reply));
        }(channel.get(), &result));
  });
  StatusOr<UnaryResponse> reply = result.get_future().get();
  control_->RunSync([&] {
    channel.reset();
    pool.reset();
  });
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->peer, address);
}

}  // namespace
}  // namespace uxds::testing
