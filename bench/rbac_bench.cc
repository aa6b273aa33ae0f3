// What RBAC (A41) costs a call on an xDS-enabled server.
//
// BM_RbacCheck: one check, the way the server runs it for every RPC, of
//   0 a 10-rule policy: one ALLOW policy whose ten permission rules (paths,
//     headers, destination ports) are tried in order and only the last one
//     matches, and an authenticated principal_name: every rule is
//     evaluated (the figure #28's target is on);
//   1 ten policies of three rules each: and(url_path prefix, header exact)
//     and an authenticated principal_name, the request failing the header
//     of policies 0..8 and admitted by policy 9.
// Allocations per check are counted (target: none).
//
// BM_UnaryCall: unary calls on one mutual TLS connection to a uxds server on
// loopback, in the same process:
//   0 the application's registry alone (no xDS routing)
//   1 the xDS server's routed registry: route selection (A36), no RBAC
//   2 the same plus the ten-policy RBAC filter: variant 2 minus variant 1 is
//     what RBAC adds to a call, end to end.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "envoy/extensions/filters/http/rbac/v3/rbac.pb.h"
#include "http2/client_connection.h"
#include "loopback_server.h"
#include "server/server_routing.h"
#include "support/allocation_counter.h"
#include "support/test_support.h"
#include "xds/resources/rbac_parser.h"

namespace uxds {
namespace {

constexpr char kClientIdentity[] = "client.test.example.com";  // the test client's DNS SAN
constexpr int kPolicies = 10;

RbacPolicy Compile(const envoy::extensions::filters::http::rbac::v3::RBAC& proto) {
  ValidationErrors errors;
  std::optional<RbacPolicy> policy = ParseRbacConfig(proto.SerializeAsString(), errors);
  if (!errors.ok() || !policy.has_value()) std::abort();
  return *std::move(policy);
}

RbacPolicy TenRules() {
  envoy::extensions::filters::http::rbac::v3::RBAC proto;
  proto.mutable_rules()->set_action(envoy::config::rbac::v3::RBAC::ALLOW);
  auto& policy = (*proto.mutable_rules()->mutable_policies())["callers"];
  for (int i = 0; i < 3; ++i) {
    policy.add_permissions()->mutable_url_path()->mutable_path()->set_exact(
        "/admin.Service/Method" + std::to_string(i));
    auto* header = policy.add_permissions()->mutable_header();
    header->set_name("x-tenant");
    header->set_exact_match("t" + std::to_string(i));
    policy.add_permissions()->set_destination_port(9000 + i);
  }
  policy.add_permissions()->mutable_url_path()->mutable_path()->set_prefix("/grpc.testing.");
  policy.add_principals()->mutable_authenticated()->mutable_principal_name()->set_exact(
      kClientIdentity);
  return Compile(proto);
}

RbacPolicy TenPolicies() {
  envoy::extensions::filters::http::rbac::v3::RBAC proto;
  proto.mutable_rules()->set_action(envoy::config::rbac::v3::RBAC::ALLOW);
  for (int i = 0; i < kPolicies; ++i) {
    auto& policy = (*proto.mutable_rules()->mutable_policies())["p" + std::to_string(i)];
    auto* rules = policy.add_permissions()->mutable_and_rules();
    rules->add_rules()->mutable_url_path()->mutable_path()->set_prefix("/grpc.testing.");
    auto* header = rules->add_rules()->mutable_header();
    header->set_name("x-tenant");
    header->set_exact_match("t" + std::to_string(i));
    policy.add_principals()->mutable_authenticated()->mutable_principal_name()->set_exact(
        kClientIdentity);
  }
  return Compile(proto);
}

const Metadata& RequestMetadata() {
  static const Metadata metadata = {{"x-tenant", "t" + std::to_string(kPolicies - 1)}};
  return metadata;
}

const Metadata& ReceivedMetadata() {
  static const Metadata metadata = {{"user-agent", "uxds-bench"},
                                    {"x-tenant", "t" + std::to_string(kPolicies - 1)}};
  return metadata;
}

void BM_RbacCheck(benchmark::State& state) {
  state.SetLabel(state.range(0) == 0 ? "10 rules, one policy" : "10 policies of 3 rules");
  const RbacPolicy policy = state.range(0) == 0 ? TenRules() : TenPolicies();
  ConnectionInfo connection;
  connection.peer.ip = {127, 0, 0, 1};
  connection.local.ip = {127, 0, 0, 1};
  connection.local.port = 8080;
  connection.tls =
      TlsPeer{.dns_sans = {kClientIdentity}, .subject = "CN=client", .has_certificate = true};
  const RbacRequest request{.path = "/grpc.testing.TestService/EmptyCall",
                            .http_method = "POST",
                            .authority = "127.0.0.1:8080",
                            .content_type = "application/grpc",
                            .metadata = ReceivedMetadata(),
                            .connection = &connection};
  if (!policy.Allows(request)) state.SkipWithError("the policy must admit the request");
  testing::StartCountingAllocations();
  for (auto _ : state) benchmark::DoNotOptimize(policy.Allows(request));
  state.counters["allocs_per_check"] =
      benchmark::Counter(static_cast<double>(testing::StopCountingAllocations()) /
                         static_cast<double>(state.iterations()));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RbacCheck)->DenseRange(0, 1);

const testing::TestCertificates& Certificates() {
  static testing::TempDir* dir = new testing::TempDir();
  static const testing::TestCertificates certs = testing::MakeTestCertificates(dir->path());
  return certs;
}

// Variant 1 and 2's registry: the application's behind A36 routing (one
// virtual host "*", one route with non_forwarding_action) and, for 2, the
// RBAC filter.
RegistryWrapper RoutedWith(bool rbac) {
  return [rbac](std::shared_ptr<const http2::ServiceRegistry> app) {
    RouteConfigResource routes;
    RouteConfigResource::Route route;
    route.matchers.path.type = StringMatcher::Type::kPrefix;
    route.action = RouteConfigResource::Route::NonForwardingAction();
    routes.virtual_hosts.push_back({.domains = {"*"}, .routes = {route}});
    auto table = std::make_shared<const server::RouteTable>(
        std::make_shared<const RouteConfigResource>(std::move(routes)));
    std::vector<HttpConnectionManager::HttpFilter> filters;
    if (rbac) {
      filters.push_back(
          {.name = "rbac", .config_type = std::string(kRbacConfigType), .rbac = TenPolicies()});
    }
    filters.push_back(
        {.name = "router", .config_type = "envoy.extensions.filters.http.router.v3.Router"});
    return server::MakeRoutedRegistry(std::move(app), std::move(table), std::move(filters));
  };
}

void BM_UnaryCall(benchmark::State& state) {
  static constexpr const char* kNames[] = {"application_registry", "xds_routing",
                                           "xds_routing_and_rbac_10_policies"};
  const int64_t variant = state.range(0);
  state.SetLabel(kNames[variant]);
  const testing::TestCertificates& certs = Certificates();
  TlsServerConfig server_tls;
  server_tls.certificate_chain_file = certs.server_cert;
  server_tls.private_key_file = certs.server_key;
  server_tls.ca_certificate_file = certs.ca_cert;
  server_tls.require_client_certificate = true;
  http2::ServerOptions server_options;
  server_options.tls = *TlsServerContext::Create(server_tls);
  LoopOptions options;
  ServerFixture server(options, std::move(server_options),
                       variant == 0 ? RegistryWrapper() : RoutedWith(variant == 2));
  TlsClientConfig client_tls;
  client_tls.ca_certificate_file = certs.ca_cert;
  client_tls.certificate_file = certs.client_cert;
  client_tls.private_key_file = certs.client_key;
  http2::ClientConnectionOptions client_options;
  client_options.tls = *TlsClientContext::Create(client_tls);
  client_options.tls_server_name = "localhost";
  auto loop = std::move(*Loop::Create(options));
  const SocketAddress address = SocketAddress::Loopback4(server.port());
  auto run = [&](Loop& l) -> Task<void> {
    auto connection = co_await http2::ClientConnection::Connect(l, address, client_options);
    if (!connection.ok()) {
      state.SkipWithError(connection.status().ToString().c_str());
      co_return;
    }
    for (auto _ : state) {
      auto response =
          co_await http2::UnaryCall(**connection, test_service::kEmptyCall, "", RequestMetadata());
      if (!response.ok()) {
        state.SkipWithError(response.status().ToString().c_str());
        break;
      }
    }
    co_await (*connection)->Close();
  };
  loop->BlockOn(run(*loop));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UnaryCall)->DenseRange(0, 2)->UseRealTime();

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
