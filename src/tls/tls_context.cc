#include "tls/tls_context.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstring>
#include <string_view>
#include <utility>

#include "tls/certificate_provider.h"
#include "tls/pem_files.h"
#include "tls/tls_alpn.h"

namespace uxds {
namespace {

using tls_internal::ConfigFile;
using tls_internal::FileError;
using tls_internal::LoadCertificates;
using tls_internal::LoadPrivateKey;
using tls_internal::TakeBoringSslReason;
using tls_internal::X509List;

// Installs the certificate chain (leaf first) and its key on `ctx`;
// errors name `cert_file` and `key_file`.
Status InstallIdentity(SSL_CTX* ctx, const X509List& chain, EVP_PKEY* key,
                       const ConfigFile& cert_file, const ConfigFile& key_file) {
  ERR_clear_error();
  if (SSL_CTX_use_certificate(ctx, chain[0].get()) != 1) {
    return FileError(cert_file, "unusable certificate: " + TakeBoringSslReason());
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1) {
      return FileError(cert_file, "unusable chain certificate: " + TakeBoringSslReason());
    }
  }
  if (SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    std::string reason = TakeBoringSslReason();
    return FileError(key_file, "does not match the certificate in " + std::string(cert_file.field) +
                                   " " + cert_file.path + " (" + reason + ")");
  }
  return OkStatus();
}

Status UseCertificateAndKey(SSL_CTX* ctx, const ConfigFile& cert_file, const ConfigFile& key_file) {
  StatusOr<X509List> chain = LoadCertificates(cert_file);
  if (!chain.ok()) return chain.status();
  StatusOr<bssl::UniquePtr<EVP_PKEY>> key = LoadPrivateKey(key_file);
  if (!key.ok()) return key.status();
  return InstallIdentity(ctx, *chain, key->get(), cert_file, key_file);
}

// Trusts every certificate of `roots` for verifying peers. With
// `for_server`, their subjects also become the CertificateRequest's list of
// acceptable issuers.
Status InstallRoots(SSL_CTX* ctx, const X509List& roots, const ConfigFile& ca_file,
                    bool for_server) {
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  ERR_clear_error();
  for (const auto& root : roots) {
    if (X509_STORE_add_cert(store, root.get()) != 1) {
      return FileError(ca_file, "cannot add certificate: " + TakeBoringSslReason());
    }
    if (for_server && SSL_CTX_add_client_CA(ctx, root.get()) != 1) {
      return FileError(ca_file, "cannot add client CA: " + TakeBoringSslReason());
    }
  }
  return OkStatus();
}

Status UseCaCertificates(SSL_CTX* ctx, const ConfigFile& ca_file, bool for_server) {
  StatusOr<X509List> roots = LoadCertificates(ca_file);
  if (!roots.ok()) return roots.status();
  return InstallRoots(ctx, *roots, ca_file, for_server);
}

Status ValidateAlpn(const std::vector<std::string>& alpn) {
  for (size_t i = 0; i < alpn.size(); ++i) {
    // RFC 7301 §3.1: protocol names are 1 to 255 bytes.
    if (alpn[i].empty() || alpn[i].size() > 255) {
      return InvalidArgumentError("alpn[" + std::to_string(i) + "]: must be 1 to 255 bytes long");
    }
  }
  return OkStatus();
}

bssl::UniquePtr<SSL_CTX> NewContext() {
  bssl::UniquePtr<SSL_CTX> ctx(SSL_CTX_new(TLS_method()));
  if (ctx == nullptr) return nullptr;
  // TLS 1.2 at least; BoringSSL's maximum (TLS 1.3) is preferred.
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), TLS1_3_VERSION);
  return ctx;
}

// Server: ALPN selection in our order of preference. No protocol in common
// fails the handshake with no_application_protocol (RFC 7301 §3.2); gRPC
// refuses such connections as well (ssl_check_peer -> grpc_ssl_check_alpn).
int SelectAlpn(SSL* /*ssl*/, const uint8_t** out, uint8_t* out_len, const uint8_t* in,
               unsigned in_len, void* arg) {
  const auto* context = static_cast<const TlsServerContext*>(arg);
  std::span<const uint8_t> offered(in, in_len);
  for (const std::string& ours : context->config().alpn) {
    std::optional<std::span<const uint8_t>> match = FindAlpnProtocol(offered, ours);
    if (match) {
      *out = match->data();
      *out_len = static_cast<uint8_t>(match->size());
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

// Server: a ClientHello without ALPN is refused when we have ALPN protocols
// configured. gRPC requires h2 to have been negotiated on both sides
// (grpc_ssl_check_alpn: "missing selected ALPN property"); refusing the
// ClientHello makes the client see a handshake failure rather than a TLS
// session that is closed right after it was established.
ssl_select_cert_result_t RequireAlpnExtension(const SSL_CLIENT_HELLO* hello) {
  const uint8_t* data = nullptr;
  size_t len = 0;
  if (SSL_early_callback_ctx_extension_get(
          hello, TLSEXT_TYPE_application_layer_protocol_negotiation, &data, &len) == 1) {
    return ssl_select_cert_success;
  }
  return ssl_select_cert_error;
}

}  // namespace

namespace {

// A29: the chain as usual, then the SANs by the context's
// server_authorization (the context is the callback's argument and
// outlives every connection made with it).
int VerifyChainThenAuthorize(X509_STORE_CTX* store, void* arg) {
  if (X509_verify_cert(store) != 1) return 0;
  const auto* context = static_cast<const TlsClientContext*>(arg);
  X509* leaf = X509_STORE_CTX_get0_cert(store);
  bool authorized = false;
  try {
    authorized = leaf != nullptr && context->config().server_authorization(SubjectAltNamesOf(leaf));
  } catch (...) {
    // Nothing may unwind through BoringSSL's C frames: a check that throws
    // refuses.
    authorized = false;
  }
  if (!authorized) {
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
  }
  return 1;
}

// Installed once the context object exists (the callback needs it).
void InstallServerAuthorization(TlsClientContext& context) {
  if (!context.config().server_authorization) return;
  SSL_CTX_set_cert_verify_callback(context.native_handle(), VerifyChainThenAuthorize, &context);
}

// A client context's verification and ALPN, once its roots are in.
Status FinishClientContext(SSL_CTX* ctx, const TlsClientConfig& config) {
  // The host name (or, with server_authorization, nothing) is set per
  // connection (TlsEngine); the chain is verified during the handshake and
  // a failure aborts it.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!config.alpn.empty()) {
    std::vector<uint8_t> wire = EncodeAlpnProtocols(config.alpn);
    // SSL_CTX_set_alpn_protos returns 0 on success.
    if (SSL_CTX_set_alpn_protos(ctx, wire.data(), wire.size()) != 0) {
      return InternalError("SSL_CTX_set_alpn_protos failed: " + TakeBoringSslReason());
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::shared_ptr<TlsClientContext>> TlsClientContext::Create(
    const TlsClientConfig& config) {
  UXDS_RETURN_IF_ERROR(ValidateAlpn(config.alpn));
  bssl::UniquePtr<SSL_CTX> ctx = NewContext();
  if (ctx == nullptr) return InternalError("SSL_CTX_new failed: " + TakeBoringSslReason());
  UXDS_RETURN_IF_ERROR(UseCaCertificates(
      ctx.get(), ConfigFile{"ca_certificate_file", config.ca_certificate_file}, false));
  bool has_cert = !config.certificate_file.empty();
  bool has_key = !config.private_key_file.empty();
  if (has_cert != has_key) {
    return InvalidArgumentError(has_cert
                                    ? "private_key_file: required when certificate_file is set"
                                    : "certificate_file: required when private_key_file is set");
  }
  if (has_cert) {
    UXDS_RETURN_IF_ERROR(
        UseCertificateAndKey(ctx.get(), ConfigFile{"certificate_file", config.certificate_file},
                             ConfigFile{"private_key_file", config.private_key_file}));
  }
  UXDS_RETURN_IF_ERROR(FinishClientContext(ctx.get(), config));
  auto context = std::shared_ptr<TlsClientContext>(new TlsClientContext(config, ctx.release()));
  InstallServerAuthorization(*context);
  return context;
}

StatusOr<std::shared_ptr<TlsClientContext>> TlsClientContext::FromMaterial(
    std::shared_ptr<const CertificateMaterial> material, const TlsClientConfig& config) {
  std::shared_ptr<const CertificateMaterial> identity = material;
  return FromMaterial(std::move(material), std::move(identity), config);
}

StatusOr<std::shared_ptr<TlsClientContext>> TlsClientContext::FromMaterial(
    std::shared_ptr<const CertificateMaterial> roots,
    std::shared_ptr<const CertificateMaterial> identity, const TlsClientConfig& config) {
  UXDS_RETURN_IF_ERROR(ValidateAlpn(config.alpn));
  if (roots == nullptr || roots->roots.empty()) {
    return InvalidArgumentError("ca_certificate_file: required");
  }
  bssl::UniquePtr<SSL_CTX> ctx = NewContext();
  if (ctx == nullptr) return InternalError("SSL_CTX_new failed: " + TakeBoringSslReason());
  UXDS_RETURN_IF_ERROR(InstallRoots(ctx.get(), roots->roots,
                                    ConfigFile{"ca_certificate_file", config.ca_certificate_file},
                                    false));
  if (identity != nullptr && !identity->identity_chain.empty()) {
    UXDS_RETURN_IF_ERROR(InstallIdentity(ctx.get(), identity->identity_chain,
                                         identity->private_key.get(),
                                         ConfigFile{"certificate_file", config.certificate_file},
                                         ConfigFile{"private_key_file", config.private_key_file}));
  }
  UXDS_RETURN_IF_ERROR(FinishClientContext(ctx.get(), config));
  auto context = std::shared_ptr<TlsClientContext>(new TlsClientContext(config, ctx.release()));
  InstallServerAuthorization(*context);
  context->material_ = std::move(roots);
  context->identity_material_ = std::move(identity);
  return context;
}

std::vector<SubjectAltName> SubjectAltNamesOf(X509* certificate) {
  std::vector<SubjectAltName> sans;
  bssl::UniquePtr<GENERAL_NAMES> names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr)));
  if (names == nullptr) return sans;
  for (size_t i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    auto text = [](const ASN1_STRING* s) {
      return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                         static_cast<size_t>(ASN1_STRING_length(s)));
    };
    switch (name->type) {
      case GEN_DNS:
        sans.push_back({SubjectAltName::Type::kDns, text(name->d.dNSName)});
        break;
      case GEN_URI:
        sans.push_back({SubjectAltName::Type::kUri, text(name->d.uniformResourceIdentifier)});
        break;
      case GEN_EMAIL:
        sans.push_back({SubjectAltName::Type::kEmail, text(name->d.rfc822Name)});
        break;
      case GEN_IPADD: {
        // A29: the canonical text form; inet_ntop writes RFC 5952's (the
        // longest zero run compressed, no leading zeros, lower case).
        const ASN1_OCTET_STRING* ip = name->d.iPAddress;
        const int length = ASN1_STRING_length(ip);
        char buffer[INET6_ADDRSTRLEN] = {};
        const int family = length == 4 ? AF_INET : length == 16 ? AF_INET6 : 0;
        if (family != 0 &&
            inet_ntop(family, ASN1_STRING_get0_data(ip), buffer, sizeof buffer) != nullptr) {
          sans.push_back({SubjectAltName::Type::kIpAddress, buffer});
        }
        break;
      }
      default:
        break;  // other name forms take no part (A29)
    }
  }
  return sans;
}

TlsClientContext::TlsClientContext(TlsClientConfig config, ssl_ctx_st* ctx)
    : config_(std::move(config)), ctx_(ctx) {}

TlsClientContext::~TlsClientContext() { SSL_CTX_free(ctx_); }

namespace {

// Client certificates are asked for (and required, if so configured) once
// the roots that verify them are in.
void VerifyClients(SSL_CTX* ctx, bool require_client_certificate) {
  int mode = SSL_VERIFY_PEER;
  if (require_client_certificate) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  SSL_CTX_set_verify(ctx, mode, nullptr);
  // Sessions resumed under client authentication must stay within this
  // configuration.
  static constexpr uint8_t kSessionContext[] = {'u', 'x', 'd', 's'};
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext);
}

}  // namespace

StatusOr<std::shared_ptr<TlsServerContext>> TlsServerContext::Create(
    const TlsServerConfig& config) {
  UXDS_RETURN_IF_ERROR(ValidateAlpn(config.alpn));
  if (config.require_client_certificate && config.ca_certificate_file.empty()) {
    return InvalidArgumentError(
        "ca_certificate_file: required when require_client_certificate is set");
  }
  bssl::UniquePtr<SSL_CTX> ctx = NewContext();
  if (ctx == nullptr) return InternalError("SSL_CTX_new failed: " + TakeBoringSslReason());
  UXDS_RETURN_IF_ERROR(UseCertificateAndKey(
      ctx.get(), ConfigFile{"certificate_chain_file", config.certificate_chain_file},
      ConfigFile{"private_key_file", config.private_key_file}));
  if (!config.ca_certificate_file.empty()) {
    UXDS_RETURN_IF_ERROR(UseCaCertificates(
        ctx.get(), ConfigFile{"ca_certificate_file", config.ca_certificate_file}, true));
    VerifyClients(ctx.get(), config.require_client_certificate);
  }
  return Finish(config, ctx.release());
}

StatusOr<std::shared_ptr<TlsServerContext>> TlsServerContext::FromMaterial(
    std::shared_ptr<const CertificateMaterial> identity,
    std::shared_ptr<const CertificateMaterial> roots, const TlsServerConfig& config) {
  UXDS_RETURN_IF_ERROR(ValidateAlpn(config.alpn));
  if (identity == nullptr || identity->identity_chain.empty()) {
    return InvalidArgumentError("certificate_chain_file: required");
  }
  const bool has_roots = roots != nullptr && !roots->roots.empty();
  if (config.require_client_certificate && !has_roots) {
    return InvalidArgumentError(
        "ca_certificate_file: required when require_client_certificate is set");
  }
  bssl::UniquePtr<SSL_CTX> ctx = NewContext();
  if (ctx == nullptr) return InternalError("SSL_CTX_new failed: " + TakeBoringSslReason());
  UXDS_RETURN_IF_ERROR(
      InstallIdentity(ctx.get(), identity->identity_chain, identity->private_key.get(),
                      ConfigFile{"certificate_chain_file", config.certificate_chain_file},
                      ConfigFile{"private_key_file", config.private_key_file}));
  if (has_roots) {
    UXDS_RETURN_IF_ERROR(InstallRoots(ctx.get(), roots->roots,
                                      ConfigFile{"ca_certificate_file", config.ca_certificate_file},
                                      true));
    VerifyClients(ctx.get(), config.require_client_certificate);
  }
  std::shared_ptr<TlsServerContext> context = Finish(config, ctx.release());
  context->identity_material_ = std::move(identity);
  context->roots_material_ = has_roots ? std::move(roots) : nullptr;
  return context;
}

std::shared_ptr<TlsServerContext> TlsServerContext::Finish(const TlsServerConfig& config,
                                                           ssl_ctx_st* ctx) {
  auto context = std::shared_ptr<TlsServerContext>(new TlsServerContext(config, ctx));
  if (!config.alpn.empty()) {
    // `context` owns the SSL_CTX, so the callback argument outlives it.
    SSL_CTX_set_alpn_select_cb(context->ctx_, SelectAlpn, context.get());
    SSL_CTX_set_select_certificate_cb(context->ctx_, RequireAlpnExtension);
  }
  return context;
}

TlsServerContext::TlsServerContext(TlsServerConfig config, ssl_ctx_st* ctx)
    : config_(std::move(config)), ctx_(ctx) {}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

}  // namespace uxds
