// How a Channel secures its connections to endpoints: gRPC's channel
// credentials.
//
//   ChannelOptions options;
//   // gRPC's XdsCredentials(InsecureChannelCredentials()): each cluster's
//   // xDS security config (A29) decides; a cluster without one is plaintext.
//   options.credentials = ChannelCredentials::Xds(ChannelCredentials::Insecure());
//
// With Xds credentials, a Cluster whose transport_socket carries an
// UpstreamTlsContext makes its endpoints' connections TLS: the roots (and,
// for mutual TLS, the identity) come from the bootstrap's
// certificate_providers instances it names, and the server certificate's
// SANs must pass its match_subject_alt_names (in lieu of a host name
// check). A server that fails the check fails the connection attempt, and
// calls that find no other endpoint fail UNAVAILABLE. Without Xds
// credentials, the xDS security config is ignored, as in gRPC.
#pragma once

#include <memory>
#include <string>

namespace uxds {

// PEM files of a TLS client.
struct TlsClientFiles {
  // Required: the roots the server's certificate chain must verify against.
  std::string ca_certificate_file = {};
  // Optional, for mutual TLS: a certificate chain (leaf first) and its key;
  // both or neither.
  std::string certificate_file = {};
  std::string private_key_file = {};
};

struct ChannelCredentials {
  enum class Kind {
    kInsecure,  // plaintext (gRPC's InsecureChannelCredentials)
    kTls,       // TLS from files (gRPC's SslCredentials)
    kXds,       // gRPC's XdsCredentials (A29)
  };

  // Plaintext: the default.
  static ChannelCredentials Insecure() { return ChannelCredentials(); }
  // TLS with `files`. The server's certificate must match the target's host
  // ("xds:///greeter": "greeter"; "example.com:443": "example.com"). The
  // files are read when the channel is created; an unreadable file fails
  // Channel::Create with INVALID_ARGUMENT naming it.
  static ChannelCredentials Tls(TlsClientFiles files) {
    ChannelCredentials credentials;
    credentials.kind = Kind::kTls;
    credentials.tls = std::move(files);
    return credentials;
  }
  // A29: a cluster's xDS security config decides; a cluster without one,
  // and a host:port target, use `fallback` (Insecure or Tls).
  static ChannelCredentials Xds(const ChannelCredentials& fallback) {
    ChannelCredentials credentials;
    credentials.kind = Kind::kXds;
    credentials.fallback = std::make_shared<const ChannelCredentials>(fallback);
    return credentials;
  }

  Kind kind = Kind::kInsecure;
  TlsClientFiles tls;                                  // kTls
  std::shared_ptr<const ChannelCredentials> fallback;  // kXds
};

}  // namespace uxds
