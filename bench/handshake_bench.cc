// What securing a connection costs (A29): each iteration opens a new
// connection to a uxds server on loopback (TCP, the TLS handshake if any, the
// server's SETTINGS), makes one unary call on it and closes it. The variants
// run in the same process, so their ratios are the figure:
//   0 plaintext
//   1 TLS: the client verifies the server (a fixed client context)
//   2 mutual TLS: the server requires and verifies a client certificate too
//   3 mutual TLS as a channel with xDS credentials makes it: the client
//     context comes from UpstreamTls (certificate providers reading files,
//     SAN matchers in lieu of the host name), cached per material version,
//     so this is variant 2 plus the provider look-up and the SAN check.
// Certificates come from the test CA (tests/support, the openssl command).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "lb/upstream_tls.h"
#include "loopback_server.h"
#include "support/test_support.h"

namespace uxds {
namespace {

enum Variant { kPlaintext = 0, kTls = 1, kMutualTls = 2, kMutualTlsFromXds = 3 };

const testing::TestCertificates& Certificates() {
  static testing::TempDir* dir = new testing::TempDir();
  static const testing::TestCertificates certs = testing::MakeTestCertificates(dir->path());
  return certs;
}

http2::ServerOptions ServerSecurity(Variant variant) {
  http2::ServerOptions options;
  if (variant == kPlaintext) return options;
  const testing::TestCertificates& certs = Certificates();
  TlsServerConfig config;
  config.certificate_chain_file = certs.server_cert;
  config.private_key_file = certs.server_key;
  if (variant != kTls) {
    config.ca_certificate_file = certs.ca_cert;
    config.require_client_certificate = true;
  }
  options.tls = *TlsServerContext::Create(config);
  return options;
}

// How the client secures its connections (null: plaintext).
std::shared_ptr<const UpstreamTls> ClientSecurity(Variant variant) {
  const testing::TestCertificates& certs = Certificates();
  if (variant == kPlaintext) return nullptr;
  if (variant == kMutualTlsFromXds) {
    Bootstrap bootstrap;
    bootstrap.certificate_providers["ca"] = CertificateProviderConfig{
        .plugin_name = "file_watcher",
        .config_json = R"({"ca_certificate_file":")" + certs.ca_cert + R"("})"};
    bootstrap.certificate_providers["id"] = CertificateProviderConfig{
        .plugin_name = "file_watcher",
        .config_json = R"({"certificate_file":")" + certs.client_cert +
                       R"(","private_key_file":")" + certs.client_key + R"("})"};
    CommonTlsContext context;
    context.tls_certificate_provider_instance.instance_name = "id";
    context.certificate_validation_context.ca_certificate_provider_instance.instance_name = "ca";
    StringMatcher localhost;
    localhost.value = "localhost";
    context.certificate_validation_context.match_subject_alt_names.push_back(localhost);
    return UpstreamTls::FromXds(bootstrap, context);
  }
  TlsClientConfig config;
  config.ca_certificate_file = certs.ca_cert;
  if (variant == kMutualTls) {
    config.certificate_file = certs.client_cert;
    config.private_key_file = certs.client_key;
  }
  return UpstreamTls::Fixed(*TlsClientContext::Create(config), "localhost");
}

void BM_ConnectCallClose(benchmark::State& state) {
  static constexpr const char* kNames[] = {"plaintext", "tls", "mutual_tls", "mutual_tls_from_xds"};
  const auto variant = static_cast<Variant>(state.range(0));
  state.SetLabel(kNames[variant]);
  LoopOptions options;
  ServerFixture server(options, ServerSecurity(variant));
  std::shared_ptr<const UpstreamTls> security = ClientSecurity(variant);
  auto loop = std::move(*Loop::Create(options));
  const SocketAddress address = SocketAddress::Loopback4(server.port());
  auto run = [&](Loop& l) -> Task<void> {
    for (auto _ : state) {
      auto connection =
          co_await ConnectSecured(l, address, http2::ClientConnectionOptions(), security.get());
      if (!connection.ok()) {
        state.SkipWithError(connection.status().ToString().c_str());
        break;
      }
      auto response = co_await http2::UnaryCall(**connection, test_service::kEmptyCall, "");
      if (!response.ok()) {
        state.SkipWithError(response.status().ToString().c_str());
        break;
      }
      co_await (*connection)->Close();
    }
  };
  loop->BlockOn(run(*loop));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ConnectCallClose)->DenseRange(kPlaintext, kMutualTlsFromXds)->UseRealTime();

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
