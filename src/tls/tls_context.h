// TLS configuration and the per-configuration BoringSSL contexts.
//
// A context is built once from files (certificates, keys, CA roots) and
// shared by every connection made with it; it is immutable after Create() and
// may be shared across loop threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "uxds/status.h"

struct ssl_ctx_st;
struct x509_st;

namespace uxds {

struct CertificateMaterial;

// A subject alternative name of a peer certificate, as A29's server
// authorization sees it. IP addresses are in canonical text (RFC 5952 for
// IPv6: "2001:db8::1").
struct SubjectAltName {
  enum class Type { kDns, kUri, kEmail, kIpAddress };
  Type type = Type::kDns;
  std::string value;
  friend bool operator==(const SubjectAltName&, const SubjectAltName&) = default;
};

// Answers whether a server whose leaf certificate carries these SANs (in
// certificate order) may be talked to.
using ServerAuthorization = std::function<bool(const std::vector<SubjectAltName>& sans)>;

struct TlsClientConfig {
  // Required: PEM roots the server's certificate chain must verify against.
  std::string ca_certificate_file;
  // Optional client certificate (chain, leaf first) and its key, for mutual
  // TLS. Both or neither.
  std::string certificate_file;
  std::string private_key_file;
  // Offered in order. gRPC requires "h2" to be negotiated (see TlsStream).
  std::vector<std::string> alpn = {"h2"};
  // A29 "server authorization": when set, it decides on the server
  // certificate's SANs in lieu of the check against the server name (the
  // chain is verified against the roots all the same, and the name is still
  // sent as SNI). A refusal fails the handshake with "certificate check
  // failure". Called on the connection's thread during the handshake.
  ServerAuthorization server_authorization;
};

struct TlsServerConfig {
  // Required: PEM certificate chain (leaf first) and its private key.
  std::string certificate_chain_file;
  std::string private_key_file;
  // When set, client certificates are requested and verified against these
  // roots.
  std::string ca_certificate_file;
  // Fail the handshake when the client sends no certificate. Needs
  // ca_certificate_file.
  bool require_client_certificate = false;
  // Protocols we accept, in our order of preference.
  std::vector<std::string> alpn = {"h2"};
};

// Errors from Create() are INVALID_ARGUMENT and name the field, the file and
// the reason, e.g. "ca_certificate_file /x/ca.pem: cannot read: No such file
// or directory". Create() reads the files synchronously: call it when loading
// configuration, not on a connection's path.
class TlsClientContext {
 public:
  static StatusOr<std::shared_ptr<TlsClientContext>> Create(const TlsClientConfig& config);
  // From what a certificate provider read (A29, A65): its roots verify the
  // server, its identity (if any) is offered for mutual TLS. Reads no file;
  // `config` gives the ALPN list, and the file names errors mention.
  static StatusOr<std::shared_ptr<TlsClientContext>> FromMaterial(
      std::shared_ptr<const CertificateMaterial> material, const TlsClientConfig& config);
  // The same from two providers (A29: a Cluster's UpstreamTlsContext may
  // name one instance for the roots and another for the identity): `roots`
  // must hold roots; `identity` (may be null) is offered when it holds a
  // certificate chain.
  static StatusOr<std::shared_ptr<TlsClientContext>> FromMaterial(
      std::shared_ptr<const CertificateMaterial> roots,
      std::shared_ptr<const CertificateMaterial> identity, const TlsClientConfig& config);
  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  const TlsClientConfig& config() const { return config_; }
  ssl_ctx_st* native_handle() const { return ctx_; }
  // The material it was made from (FromMaterial), or null: the roots', and
  // the identity's (the same for the one-material FromMaterial).
  const CertificateMaterial* material() const { return material_.get(); }
  const CertificateMaterial* identity_material() const { return identity_material_.get(); }

 private:
  TlsClientContext(TlsClientConfig config, ssl_ctx_st* ctx);
  TlsClientConfig config_;
  ssl_ctx_st* ctx_;  // owned
  std::shared_ptr<const CertificateMaterial> material_;
  std::shared_ptr<const CertificateMaterial> identity_material_;
};

// The DNS, URI, email and IP address SANs of `certificate`, in its order.
std::vector<SubjectAltName> SubjectAltNamesOf(x509_st* certificate);

class TlsServerContext {
 public:
  static StatusOr<std::shared_ptr<TlsServerContext>> Create(const TlsServerConfig& config);
  // From what certificate providers read (A29: a filter chain's
  // DownstreamTlsContext names one instance for the identity and one, maybe
  // the same, for the roots): `identity`'s chain and key are presented;
  // `roots` (may be null), when it holds roots, verifies client
  // certificates, which are then asked for, and required if
  // `config.require_client_certificate`. Reads no file; `config` gives the
  // ALPN list and the file names errors mention.
  static StatusOr<std::shared_ptr<TlsServerContext>> FromMaterial(
      std::shared_ptr<const CertificateMaterial> identity,
      std::shared_ptr<const CertificateMaterial> roots, const TlsServerConfig& config);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  const TlsServerConfig& config() const { return config_; }
  ssl_ctx_st* native_handle() const { return ctx_; }
  // The material it was made from (FromMaterial), or null: a holder can
  // tell when a provider has read something newer.
  const CertificateMaterial* identity_material() const { return identity_material_.get(); }
  const CertificateMaterial* roots_material() const { return roots_material_.get(); }

 private:
  TlsServerContext(TlsServerConfig config, ssl_ctx_st* ctx);
  // Takes `ctx` (owned from here on) once its roots and identity are in,
  // and adds the ALPN callbacks.
  static std::shared_ptr<TlsServerContext> Finish(const TlsServerConfig& config, ssl_ctx_st* ctx);
  TlsServerConfig config_;
  ssl_ctx_st* ctx_;  // owned
  std::shared_ptr<const CertificateMaterial> identity_material_;
  std::shared_ptr<const CertificateMaterial> roots_material_;
};

}  // namespace uxds
