// How an xDS-enabled server secures the connections it accepts: gRPC's
// server credentials.
//
//   XdsServerOptions options;
//   // gRPC's XdsServerCredentials(InsecureServerCredentials()): each filter
//   // chain's xDS security config (A29) decides; a chain without one is
//   // plaintext.
//   options.credentials = ServerCredentials::Xds(ServerCredentials::Insecure());
//
// With Xds credentials, a filter chain whose transport_socket carries a
// DownstreamTlsContext makes the connections it is chosen for TLS: the chain
// is chosen first (FilterChainMatch), then the handshake presents the
// identity from the bootstrap's certificate_providers instance the context
// names; when it names a CA instance, client certificates are asked for and
// verified (mutual TLS), and required if require_client_certificate. New
// certificates apply to new connections; open ones are kept. Without Xds
// credentials the security config is ignored, as in gRPC.
#pragma once

#include <memory>
#include <string>

namespace uxds {

// PEM files of a TLS server.
struct TlsServerFiles {
  // Required: the certificate chain (leaf first) and its private key.
  std::string certificate_chain_file = {};
  std::string private_key_file = {};
  // Optional: client certificates are asked for and verified against these
  // roots.
  std::string ca_certificate_file = {};
  // Fail the handshake of a client without a certificate (needs the roots).
  bool require_client_certificate = false;
};

struct ServerCredentials {
  enum class Kind {
    kInsecure,  // plaintext (gRPC's InsecureServerCredentials)
    kTls,       // TLS from files (gRPC's SslServerCredentials)
    kXds,       // gRPC's XdsServerCredentials (A29)
  };

  // Plaintext: the default.
  static ServerCredentials Insecure() { return ServerCredentials(); }
  // TLS with `files`, read when the server is created (an unusable file
  // fails XdsServer::Create with INVALID_ARGUMENT naming it).
  static ServerCredentials Tls(TlsServerFiles files) {
    ServerCredentials credentials;
    credentials.kind = Kind::kTls;
    credentials.tls = std::move(files);
    return credentials;
  }
  // A29: a filter chain's xDS security config decides; a chain without one
  // uses `fallback` (Insecure or Tls).
  static ServerCredentials Xds(const ServerCredentials& fallback) {
    ServerCredentials credentials;
    credentials.kind = Kind::kXds;
    credentials.fallback = std::make_shared<const ServerCredentials>(fallback);
    return credentials;
  }

  Kind kind = Kind::kInsecure;
  TlsServerFiles tls;                                 // kTls
  std::shared_ptr<const ServerCredentials> fallback;  // kXds
};

}  // namespace uxds
