#include "tls/tls_context.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstring>
#include <string_view>
#include <utility>

#include "tls/tls_alpn.h"

namespace uxds {
namespace {

// Names a config file in error messages: "ca_certificate_file /x/ca.pem".
struct ConfigFile {
  std::string_view field;
  const std::string& path;
};

Status FileError(const ConfigFile& file, std::string_view why) {
  return InvalidArgumentError(std::string(file.field) + " " + file.path + ": " + std::string(why));
}

// The reason of the oldest queued BoringSSL error ("BAD_BASE64_DECODE"), then
// clears the queue.
std::string TakeBoringSslReason() {
  uint32_t packed = ERR_peek_error();
  std::string reason;
  if (packed != 0) {
    const char* text = ERR_reason_error_string(packed);
    reason = text != nullptr ? text : "error " + std::to_string(ERR_GET_REASON(packed));
  }
  ERR_clear_error();
  return reason;
}

// Reads a whole (small) configuration file.
StatusOr<std::string> ReadConfigFile(const ConfigFile& file) {
  if (file.path.empty()) return InvalidArgumentError(std::string(file.field) + ": required");
  int fd = open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError(file, std::string("cannot read: ") + std::strerror(errno));
  std::string contents;
  char buf[16384];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return FileError(file, std::string("cannot read: ") + std::strerror(err));
    }
    if (n == 0) break;
    contents.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return contents;
}

using X509List = std::vector<bssl::UniquePtr<X509>>;

// Every certificate in a PEM file, in file order; at least one.
StatusOr<X509List> LoadCertificates(const ConfigFile& file) {
  StatusOr<std::string> pem = ReadConfigFile(file);
  if (!pem.ok()) return pem.status();
  bssl::UniquePtr<BIO> bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  X509List certs;
  ERR_clear_error();
  while (true) {
    bssl::UniquePtr<X509> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    certs.push_back(std::move(cert));
  }
  uint32_t last = ERR_peek_last_error();
  // Running out of PEM blocks ends the loop with PEM_R_NO_START_LINE; any
  // other error means a block was malformed.
  bool clean_end = last == 0 || (ERR_GET_LIB(last) == ERR_LIB_PEM &&
                                 ERR_GET_REASON(last) == PEM_R_NO_START_LINE);
  if (!clean_end) return FileError(file, "invalid PEM certificate: " + TakeBoringSslReason());
  ERR_clear_error();
  if (certs.empty()) return FileError(file, "no certificate found");
  return certs;
}

StatusOr<bssl::UniquePtr<EVP_PKEY>> LoadPrivateKey(const ConfigFile& file) {
  StatusOr<std::string> pem = ReadConfigFile(file);
  if (!pem.ok()) return pem.status();
  bssl::UniquePtr<BIO> bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  ERR_clear_error();
  bssl::UniquePtr<EVP_PKEY> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    uint32_t last = ERR_peek_last_error();
    if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
      ERR_clear_error();
      return FileError(file, "no private key found");
    }
    return FileError(file, "invalid private key: " + TakeBoringSslReason());
  }
  return key;
}

// Installs the certificate chain (leaf first) and its key on `ctx`.
Status UseCertificateAndKey(SSL_CTX* ctx, const ConfigFile& cert_file, const ConfigFile& key_file) {
  StatusOr<X509List> chain = LoadCertificates(cert_file);
  if (!chain.ok()) return chain.status();
  StatusOr<bssl::UniquePtr<EVP_PKEY>> key = LoadPrivateKey(key_file);
  if (!key.ok()) return key.status();
  ERR_clear_error();
  if (SSL_CTX_use_certificate(ctx, (*chain)[0].get()) != 1) {
    return FileError(cert_file, "unusable certificate: " + TakeBoringSslReason());
  }
  for (size_t i = 1; i < chain->size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, (*chain)[i].get()) != 1) {
      return FileError(cert_file, "unusable chain certificate: " + TakeBoringSslReason());
    }
  }
  if (SSL_CTX_use_PrivateKey(ctx, key->get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    std::string reason = TakeBoringSslReason();
    return FileError(key_file, "does not match the certificate in " + std::string(cert_file.field) +
                                   " " + cert_file.path + " (" + reason + ")");
  }
  return OkStatus();
}

// Trusts every certificate of the CA file for verifying peers. With
// `for_server`, their subjects also become the CertificateRequest's list of
// acceptable issuers.
Status UseCaCertificates(SSL_CTX* ctx, const ConfigFile& ca_file, bool for_server) {
  StatusOr<X509List> roots = LoadCertificates(ca_file);
  if (!roots.ok()) return roots.status();
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  ERR_clear_error();
  for (const auto& root : *roots) {
    if (X509_STORE_add_cert(store, root.get()) != 1) {
      return FileError(ca_file, "cannot add certificate: " + TakeBoringSslReason());
    }
    if (for_server && SSL_CTX_add_client_CA(ctx, root.get()) != 1) {
      return FileError(ca_file, "cannot add client CA: " + TakeBoringSslReason());
    }
  }
  return OkStatus();
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

StatusOr<std::shared_ptr<TlsClientContext>> TlsClientContext::Create(
    const TlsClientConfig& config) {
  UXDS_RETURN_IF_ERROR(ValidateAlpn(config.alpn));
  bssl::UniquePtr<SSL_CTX> ctx = NewContext();
  if (ctx == nullptr) return InternalError("SSL_CTX_new failed: " + TakeBoringSslReason());
  UXDS_RETURN_IF_ERROR(UseCaCertificates(
      ctx.get(), ConfigFile{"ca_certificate_file", config.ca_certificate_file}, false));
  // The host name is set per connection (TlsEngine); the chain is verified
  // during the handshake and a failure aborts it.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);

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
  if (!config.alpn.empty()) {
    std::vector<uint8_t> wire = EncodeAlpnProtocols(config.alpn);
    // SSL_CTX_set_alpn_protos returns 0 on success.
    if (SSL_CTX_set_alpn_protos(ctx.get(), wire.data(), wire.size()) != 0) {
      return InternalError("SSL_CTX_set_alpn_protos failed: " + TakeBoringSslReason());
    }
  }
  return std::shared_ptr<TlsClientContext>(new TlsClientContext(config, ctx.release()));
}

TlsClientContext::TlsClientContext(TlsClientConfig config, ssl_ctx_st* ctx)
    : config_(std::move(config)), ctx_(ctx) {}

TlsClientContext::~TlsClientContext() { SSL_CTX_free(ctx_); }

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
    int mode = SSL_VERIFY_PEER;
    if (config.require_client_certificate) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx.get(), mode, nullptr);
    // Sessions resumed under client authentication must stay within this
    // configuration.
    static constexpr uint8_t kSessionContext[] = {'u', 'x', 'd', 's'};
    SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext);
  }
  auto context = std::shared_ptr<TlsServerContext>(new TlsServerContext(config, ctx.release()));
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
