// A41 on the server: the RBAC HTTP filter in a Listener's
// HttpConnectionManager, overridden per virtual host and route, decides
// which RPCs reach their handlers. The fake control plane sends the
// Listener and routes; uxds's HTTP/2 client calls over plaintext and mutual
// TLS (the client certificate's identity is the principal).
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "envoy/extensions/filters/http/rbac/v3/rbac.pb.h"
#include "support/test_support.h"
#include "tls/tls_context.h"
#include "xds_server_test_fixture.h"

namespace uxds::testing {
namespace {

namespace rbac_v3 = envoy::config::rbac::v3;
using HttpRbac = envoy::extensions::filters::http::rbac::v3::RBAC;
using RbacPerRoute = envoy::extensions::filters::http::rbac::v3::RBACPerRoute;

constexpr char kRbacType[] = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC";
constexpr char kRbacPerRouteType[] =
    "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute";

// A policy of `action` with one policy "p": its permission is a url_path
// prefix, its principal `principal` (any when unset).
HttpRbac PathPolicy(rbac_v3::RBAC::Action action, const std::string& path_prefix,
                    std::optional<rbac_v3::Principal> principal = std::nullopt) {
  HttpRbac proto;
  proto.mutable_rules()->set_action(action);
  auto& policy = (*proto.mutable_rules()->mutable_policies())["p"];
  policy.add_permissions()->mutable_url_path()->mutable_path()->set_prefix(path_prefix);
  if (principal.has_value()) {
    *policy.add_principals() = *principal;
  } else {
    policy.add_principals()->set_any(true);
  }
  return proto;
}

std::pair<std::string, std::string> AsRbac(const HttpRbac& proto) {
  return {kRbacType, proto.SerializeAsString()};
}

std::pair<std::string, std::string> AsOverride(const RbacPerRoute& proto) {
  return {kRbacPerRouteType, proto.SerializeAsString()};
}

CertificateProviderConfig FileWatcher(const std::string& config_json) {
  return CertificateProviderConfig{.plugin_name = "file_watcher", .config_json = config_json};
}

class XdsServerRbacTest : public XdsServerTest {
 protected:
  void SetUp() override {
    XdsServerTest::SetUp();
    certs_ = MakeTestCertificates(dir_.path());
    customize_bootstrap_ = [this](Bootstrap& bootstrap) {
      bootstrap.certificate_providers["server-id"] =
          FileWatcher(R"({"certificate_file":")" + certs_.server_cert +
                      R"(","private_key_file":")" + certs_.server_key + R"("})");
      bootstrap.certificate_providers["ca"] =
          FileWatcher(R"({"ca_certificate_file":")" + certs_.ca_cert + R"("})");
    };
  }

  void Serve(ServerChain chain) {
    const std::string address = "127.0.0.1:" + std::to_string(port_);
    XdsServerOptions options;
    options.credentials = ServerCredentials::Xds(ServerCredentials::Insecure());
    StartServer(address, std::move(options));
    SetListener(Listener(ListenerNameFor(address), "127.0.0.1", port_, {std::move(chain)}), "1");
    ASSERT_TRUE(WaitForServing().has_value());
  }

  // A chain with the filters `filters` (name, RBAC) before the router.
  static ServerChain RbacChain(std::vector<std::pair<std::string, HttpRbac>> filters,
                               ServerRoutes routes = {}) {
    ServerChain chain = Chain("rbac");
    for (auto& [name, proto] : filters) chain.http_filters.push_back({name, AsRbac(proto)});
    chain.routes = std::move(routes);
    return chain;
  }

  http2::ClientConnectionOptions TlsClient(bool with_certificate) {
    TlsClientConfig config;
    config.ca_certificate_file = certs_.ca_cert;
    if (with_certificate) {
      config.certificate_file = certs_.client_cert;
      config.private_key_file = certs_.client_key;
    }
    auto context = TlsClientContext::Create(config);
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    http2::ClientConnectionOptions options;
    if (context.ok()) options.tls = *context;
    return options;
  }

  static void ExpectDenied(const StatusOr<std::string>& result) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), StatusCode::kPermissionDenied) << result.status().ToString();
    EXPECT_EQ(result.status().message(), "Unauthorized RPC rejected");
  }

  TempDir dir_;
  TestCertificates certs_;
};

// A41: ALLOW admits only what a policy matches; a denied RPC fails
// PERMISSION_DENIED before its handler starts.
TEST_F(XdsServerRbacTest, AllowPolicyAdmitsMatchingCallsOnlyAndNoHandlerRunsForTheRest) {
  Serve(RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/open.")}}));
  StatusOr<std::string> allowed = Call("127.0.0.1", "/open.Svc/Get");
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_EQ(*allowed, "/open.Svc/Get");
  ExpectDenied(Call("127.0.0.1", "/gate.Svc/Get"));
  EXPECT_EQ(gate_calls_started_.load(), 0);
}

TEST_F(XdsServerRbacTest, DenyPolicyRefusesMatchingCallsOnly) {
  Serve(RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::DENY, "/admin.")}}));
  ExpectDenied(Call("127.0.0.1", "/admin.Svc/Reset"));
  EXPECT_TRUE(Call("127.0.0.1", "/user.Svc/Get").ok());
}

// Two RBAC filters in a row: an RPC must pass both.
TEST_F(XdsServerRbacTest, EveryRbacFilterOfTheChainMustAllow) {
  Serve(RbacChain({{"first", PathPolicy(rbac_v3::RBAC::ALLOW, "/a")},
                   {"second", PathPolicy(rbac_v3::RBAC::DENY, "/ab")}}));
  EXPECT_TRUE(Call("127.0.0.1", "/aa.Svc/M").ok());
  ExpectDenied(Call("127.0.0.1", "/ab.Svc/M"));
  ExpectDenied(Call("127.0.0.1", "/b.Svc/M"));
}

// A41 principals on the connection: source_ip and direct_remote_ip are the
// peer. Connections to 127.0.0.1 get a chain that admits loopback peers,
// connections to 127.0.0.2 one that admits only 10.0.0.0/8.
TEST_F(XdsServerRbacTest, SourceIpIsTheConnectionsPeer) {
  rbac_v3::Principal loopback;
  loopback.mutable_source_ip()->set_address_prefix("127.0.0.0");
  loopback.mutable_source_ip()->mutable_prefix_len()->set_value(8);
  rbac_v3::Principal elsewhere;
  elsewhere.mutable_direct_remote_ip()->set_address_prefix("10.0.0.0");
  elsewhere.mutable_direct_remote_ip()->mutable_prefix_len()->set_value(8);
  ServerChain local = RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/", loopback)}});
  local.name = "local";
  local.prefix_ranges = {"127.0.0.1/32"};
  ServerChain remote = RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/", elsewhere)}});
  remote.name = "remote";
  remote.prefix_ranges = {"127.0.0.2/32"};
  const std::string address = "0.0.0.0:" + std::to_string(port_);
  StartServer(address);
  SetListener(Listener(ListenerNameFor(address), "0.0.0.0", port_, {local, remote}), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  EXPECT_TRUE(Call("127.0.0.1", "/x.Svc/M").ok());
  ExpectDenied(Call("127.0.0.2", "/x.Svc/M"));
}

// A39 overrides: the virtual host's RBACPerRoute replaces the filter's
// config for its routes; a route's replaces the virtual host's, and one
// without `rbac` turns RBAC off for that route.
TEST_F(XdsServerRbacTest, PerRouteOverridesWinOverTheFilterConfig) {
  ServerRoutes routes;
  routes.routes = {{"/open.", ServerRouteAction::kNonForwarding},
                   {"", ServerRouteAction::kNonForwarding}};
  RbacPerRoute vhost_policy;
  *vhost_policy.mutable_rbac() = PathPolicy(rbac_v3::RBAC::ALLOW, "/user.");
  routes.virtual_host_overrides["rbac"] = AsOverride(vhost_policy);
  routes.route_overrides["/open."]["rbac"] = AsOverride(RbacPerRoute());
  // The filter alone would deny everything but /nothing., the virtual
  // host's policy everything but /user.
  Serve(RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/nothing.")}}, routes));
  EXPECT_TRUE(Call("127.0.0.1", "/open.Svc/M").ok());  // the route's: RBAC off
  EXPECT_TRUE(Call("127.0.0.1", "/user.Svc/M").ok());  // the virtual host's
  ExpectDenied(Call("127.0.0.1", "/nothing.Svc/M"));
  ExpectDenied(Call("127.0.0.1", "/admin.Svc/M"));
}

// The reverse: RBAC off on the virtual host, a route's RBACPerRoute turns
// it back on for that route.
TEST_F(XdsServerRbacTest, ARouteOverrideEnforcesUnderAVirtualHostWithoutRbac) {
  ServerRoutes routes;
  routes.routes = {{"/guarded.", ServerRouteAction::kNonForwarding},
                   {"", ServerRouteAction::kNonForwarding}};
  routes.virtual_host_overrides["rbac"] = AsOverride(RbacPerRoute());
  RbacPerRoute guarded;
  *guarded.mutable_rbac() = PathPolicy(rbac_v3::RBAC::ALLOW, "/guarded.Svc/Open");
  routes.route_overrides["/guarded."]["rbac"] = AsOverride(guarded);
  Serve(RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/nothing.")}}, routes));
  EXPECT_TRUE(Call("127.0.0.1", "/other.Svc/M").ok());
  EXPECT_TRUE(Call("127.0.0.1", "/guarded.Svc/Open").ok());
  ExpectDenied(Call("127.0.0.1", "/guarded.Svc/Closed"));
}

// A41: action LOG, and a filter without `rules`, enforce nothing.
TEST_F(XdsServerRbacTest, LogActionAndAbsentRulesLetEveryCallThrough) {
  HttpRbac log = PathPolicy(rbac_v3::RBAC::DENY, "/");
  log.mutable_rules()->set_action(rbac_v3::RBAC::LOG);
  Serve(RbacChain({{"log", log}, {"absent", HttpRbac()}}));
  EXPECT_TRUE(Call("127.0.0.1", "/any.Svc/M").ok());
}

// A dual-stack listener ([::]) sees an IPv4 client as ::ffff:127.0.0.1;
// RBAC matches it as the IPv4 address it is.
TEST_F(XdsServerRbacTest, AnIpv4PeerOfADualStackListenerMatchesIpv4Ranges) {
  rbac_v3::Principal loopback;
  loopback.mutable_source_ip()->set_address_prefix("127.0.0.0");
  loopback.mutable_source_ip()->mutable_prefix_len()->set_value(8);
  rbac_v3::Permission local_destination;
  local_destination.mutable_destination_ip()->set_address_prefix("127.0.0.1");
  local_destination.mutable_destination_ip()->mutable_prefix_len()->set_value(32);
  HttpRbac policy = PathPolicy(rbac_v3::RBAC::ALLOW, "/", loopback);
  *(*policy.mutable_rules()->mutable_policies())["p"].mutable_permissions(0) = local_destination;
  const std::string address = "[::]:" + std::to_string(port_);
  StartServer(address);
  SetListener(Listener(ListenerNameFor(address), "::", port_, {RbacChain({{"rbac", policy}})}),
              "1");
  ASSERT_TRUE(WaitForServing().has_value());
  StatusOr<std::string> v4 = Call("127.0.0.1", "/x.Svc/M");
  EXPECT_TRUE(v4.ok()) << v4.status().ToString();
  ExpectDenied(Call("::1", "/x.Svc/M"));
}

// The policy follows Listener updates: new connections see the new one.
TEST_F(XdsServerRbacTest, AListenerUpdateChangesThePolicy) {
  Serve(RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/v1.")}}));
  EXPECT_TRUE(Call("127.0.0.1", "/v1.Svc/M").ok());
  ExpectDenied(Call("127.0.0.1", "/v2.Svc/M"));
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  SetListener(Listener(ListenerNameFor(address), "127.0.0.1", port_,
                       {RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/v2.")}})}),
              "2");
  bool switched = false;
  for (int i = 0; i < 200 && !switched; ++i) {
    switched = Call("127.0.0.1", "/v2.Svc/M").ok();
    if (!switched) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_TRUE(switched);
  ExpectDenied(Call("127.0.0.1", "/v1.Svc/M"));
}

// A41 authenticated.principal_name over mutual TLS: the client
// certificate's DNS SAN (it has no URI SAN); a TLS client without a
// certificate is "" and a plaintext one is not authenticated at all.
TEST_F(XdsServerRbacTest, AuthenticatedPrincipalIsTheClientCertificatesIdentity) {
  rbac_v3::Principal client;
  client.mutable_authenticated()->mutable_principal_name()->set_exact("client.test.example.com");
  ServerChain chain = RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/", client)}});
  chain.tls_identity = "server-id";
  chain.tls_ca = "ca";
  chain.require_client_certificate = false;
  Serve(chain);
  StatusOr<std::string> mutual = Call("127.0.0.1", "/x.Svc/M", TlsClient(true));
  ASSERT_TRUE(mutual.ok()) << mutual.status().ToString();
  ExpectDenied(Call("127.0.0.1", "/x.Svc/M", TlsClient(false)));
}

TEST_F(XdsServerRbacTest, AuthenticatedWithoutANameAdmitsEveryTlsClientAndNoPlaintextOne) {
  rbac_v3::Principal any_tls;
  any_tls.mutable_authenticated();
  ServerChain tls_chain = RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/", any_tls)}});
  tls_chain.name = "tls";
  tls_chain.tls_identity = "server-id";
  tls_chain.prefix_ranges = {"127.0.0.1/32"};
  // Connections to 127.0.0.2 get a plaintext chain with the same policy.
  ServerChain plain_chain = RbacChain({{"rbac", PathPolicy(rbac_v3::RBAC::ALLOW, "/", any_tls)}});
  plain_chain.name = "plain";
  plain_chain.prefix_ranges = {"127.0.0.2/32"};
  const std::string address = "0.0.0.0:" + std::to_string(port_);
  XdsServerOptions options;
  options.credentials = ServerCredentials::Xds(ServerCredentials::Insecure());
  StartServer(address, std::move(options));
  SetListener(Listener(ListenerNameFor(address), "0.0.0.0", port_, {tls_chain, plain_chain}), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  StatusOr<std::string> tls = Call("127.0.0.1", "/x.Svc/M", TlsClient(false));
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  ExpectDenied(Call("127.0.0.2", "/x.Svc/M"));
}

}  // namespace
}  // namespace uxds::testing
