#include "tls/tls_engine.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

namespace uxds {
namespace {

// SSL_read / SSL_write take an int length.
int ClampToInt(size_t n) { return static_cast<int>(std::min<size_t>(n, INT_MAX)); }

bool IsIpLiteral(const std::string& host) {
  in6_addr addr;
  return inet_pton(AF_INET, host.c_str(), &addr) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &addr) == 1;
}

// "CN=server,O=example" (RFC 2253 order and escaping).
std::string SubjectOf(X509* cert) {
  bssl::UniquePtr<BIO> out(BIO_new(BIO_s_mem()));
  if (out == nullptr ||
      X509_NAME_print_ex(out.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0) {
    return {};
  }
  const uint8_t* data = nullptr;
  size_t len = 0;
  BIO_mem_contents(out.get(), &data, &len);
  return std::string(reinterpret_cast<const char*>(data), len);
}

// Room kept free at the end of the input buffer for one transport read;
// compacting or growing makes at least this much.
constexpr size_t kMinInputSpace = 4096;
// The input buffer's usual size: two full TLS records per transport read.
constexpr size_t kInputBufferSize = 2 * (16384 + 256);

}  // namespace

StatusOr<std::unique_ptr<TlsEngine>> TlsEngine::CreateClient(
    std::shared_ptr<TlsClientContext> context, std::string_view server_name) {
  std::string host(server_name);
  // "[::1]" names the IPv6 literal ::1, as in a URL authority.
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return InvalidArgumentError("server_name: required for TLS verification");
  bssl::UniquePtr<SSL> ssl(SSL_new(context->native_handle()));
  if (ssl == nullptr) return InternalError("SSL_new failed");
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  if (context->config().server_authorization) {
    // A29: the context's SAN check stands in for the name check; a DNS
    // name still goes out as SNI.
    if (!IsIpLiteral(host) && SSL_set_tlsext_host_name(ssl.get(), host.c_str()) != 1) {
      ERR_clear_error();
      return InvalidArgumentError("server_name " + host + ": not a usable host name");
    }
  } else if (IsIpLiteral(host)) {
    // RFC 6066 §3: SNI carries host names only, never IP literals; the
    // certificate must then hold the address as an iPAddress SAN.
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      return InvalidArgumentError("server_name " + host + ": not a usable IP address");
    }
  } else {
    if (X509_VERIFY_PARAM_set1_host(param, host.data(), host.size()) != 1 ||
        SSL_set_tlsext_host_name(ssl.get(), host.c_str()) != 1) {
      ERR_clear_error();
      return InvalidArgumentError("server_name " + host + ": not a usable host name");
    }
  }
  SSL_set_connect_state(ssl.get());
  std::unique_ptr<TlsEngine> engine(new TlsEngine(ssl.release(), /*is_client=*/true));
  if (!engine->AttachBio()) return InternalError("BIO_new failed");
  engine->alpn_required_ = !context->config().alpn.empty();
  engine->context_ = std::move(context);
  return engine;
}

StatusOr<std::unique_ptr<TlsEngine>> TlsEngine::CreateServer(
    std::shared_ptr<TlsServerContext> context) {
  bssl::UniquePtr<SSL> ssl(SSL_new(context->native_handle()));
  if (ssl == nullptr) return InternalError("SSL_new failed");
  SSL_set_accept_state(ssl.get());
  std::unique_ptr<TlsEngine> engine(new TlsEngine(ssl.release(), /*is_client=*/false));
  if (!engine->AttachBio()) return InternalError("BIO_new failed");
  // The server side of the ALPN requirement is enforced inside the handshake
  // by the context's callbacks.
  engine->context_ = std::move(context);
  return engine;
}

TlsEngine::TlsEngine(ssl_st* ssl, bool is_client) : ssl_(ssl), is_client_(is_client) {}

TlsEngine::~TlsEngine() { SSL_free(ssl_); }

bool TlsEngine::AttachBio() {
  // One BIO_METHOD for every engine, made on first use and kept for the
  // life of the process.
  static const BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "uxds TLS engine");
    if (m != nullptr) {
      BIO_meth_set_read(m, &TlsEngine::BioRead);
      BIO_meth_set_write(m, &TlsEngine::BioWrite);
      BIO_meth_set_ctrl(m, &TlsEngine::BioCtrl);
    }
    return m;
  }();
  if (method == nullptr) return false;
  BIO* bio = BIO_new(method);
  if (bio == nullptr) return false;
  BIO_set_data(bio, this);
  BIO_set_init(bio, 1);
  // The same BIO both ways: SSL takes its single reference.
  SSL_set_bio(ssl_, bio, bio);
  return true;
}

int TlsEngine::BioRead(BIO* bio, char* out, int len) {
  auto* self = static_cast<TlsEngine*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  size_t available = self->input_end_ - self->input_begin_;
  if (available == 0) {
    if (self->end_of_input_) return 0;  // EOF
    BIO_set_retry_read(bio);            // come back with more ciphertext
    return -1;
  }
  size_t n = std::min(available, static_cast<size_t>(std::max(len, 0)));
  std::memcpy(out, self->input_.data() + self->input_begin_, n);
  // Only the front moves here: a transport read may be filling the room at
  // the end.
  self->input_begin_ += n;
  return static_cast<int>(n);
}

int TlsEngine::BioWrite(BIO* bio, const char* in, int len) {
  auto* self = static_cast<TlsEngine*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (len <= 0) return 0;
  self->output_.insert(self->output_.end(), in, in + len);
  return len;
}

long TlsEngine::BioCtrl(BIO* bio, int cmd, long /*larg*/, void* /*parg*/) {
  auto* self = static_cast<TlsEngine*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:  // written bytes are in output_ already
      return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(self->input_end_ - self->input_begin_);
    case BIO_CTRL_WPENDING:
      return static_cast<long>(self->output_.size());
    default:
      return 0;
  }
}

std::span<uint8_t> TlsEngine::InputSpace() {
  if (input_begin_ == input_end_) {
    input_begin_ = input_end_ = 0;
  } else if (input_.size() - input_end_ < kMinInputSpace && input_begin_ > 0) {
    // Usually less than one record remains: move it to the front.
    std::memmove(input_.data(), input_.data() + input_begin_, input_end_ - input_begin_);
    input_end_ -= input_begin_;
    input_begin_ = 0;
  }
  if (input_.size() - input_end_ < kMinInputSpace) {
    input_.resize(std::max(kInputBufferSize, input_end_ + kMinInputSpace));
  }
  return std::span<uint8_t>(input_.data() + input_end_, input_.size() - input_end_);
}

void TlsEngine::CommitInput(size_t n) { input_end_ = std::min(input_end_ + n, input_.size()); }

void TlsEngine::PutCiphertext(std::span<const uint8_t> data) {
  while (!data.empty()) {
    std::span<uint8_t> room = InputSpace();
    size_t n = std::min(room.size(), data.size());
    std::memcpy(room.data(), data.data(), n);
    CommitInput(n);
    data = data.subspan(n);
  }
}

void TlsEngine::PutEndOfInput() { end_of_input_ = true; }

void TlsEngine::TakeCiphertext(std::vector<uint8_t>& out) {
  out.clear();
  out.swap(output_);
}

StatusOr<bool> TlsEngine::Handshake() {
  if (handshake_done_) return true;
  ERR_clear_error();
  int ret = SSL_do_handshake(ssl_);
  if (ret != 1) {
    if (SSL_get_error(ssl_, ret) == SSL_ERROR_WANT_READ && !end_of_input_) return false;
    return ErrorFor(ret);
  }
  handshake_done_ = true;
  const uint8_t* alpn = nullptr;
  unsigned alpn_len = 0;
  SSL_get0_alpn_selected(ssl_, &alpn, &alpn_len);
  alpn_.assign(reinterpret_cast<const char*>(alpn), alpn_len);
  bssl::UniquePtr<X509> peer(SSL_get_peer_certificate(ssl_));
  if (peer != nullptr) {
    // A41: what RBAC's authenticated.principal_name is matched against.
    peer_.has_certificate = true;
    peer_.subject = SubjectOf(peer.get());
    for (SubjectAltName& san : SubjectAltNamesOf(peer.get())) {
      if (san.type == SubjectAltName::Type::kUri) peer_.uri_sans.push_back(std::move(san.value));
      if (san.type == SubjectAltName::Type::kDns) peer_.dns_sans.push_back(std::move(san.value));
    }
  }
  UXDS_RETURN_IF_ERROR(CheckNegotiatedAlpn());
  return true;
}

Status TlsEngine::CheckNegotiatedAlpn() const {
  // gRPC fails the connection when no ALPN protocol was selected
  // (grpc_ssl_check_alpn: "Cannot check peer: missing selected ALPN
  // property."), on the client and the server alike. A server that ignores
  // our ALPN offer is therefore refused. BoringSSL itself already rejects a
  // selected protocol we did not offer.
  if (is_client_ && alpn_required_ && alpn_.empty()) {
    return UnavailableError("server selected no ALPN protocol (h2 is required)");
  }
  return OkStatus();
}

StatusOr<TlsEngine::Progress> TlsEngine::Read(std::span<uint8_t> out) {
  ERR_clear_error();
  int n = SSL_read(ssl_, out.data(), ClampToInt(out.size()));
  if (n > 0) return Progress{.bytes = static_cast<size_t>(n)};
  switch (SSL_get_error(ssl_, n)) {
    case SSL_ERROR_WANT_READ:
      return Progress{.need_input = true};
    case SSL_ERROR_ZERO_RETURN:  // close_notify
      return Progress{.end = true};
    case SSL_ERROR_SYSCALL:
      // The transport ended without close_notify (see the header).
      if (end_of_input_ && ERR_peek_error() == 0) return Progress{.end = true};
      [[fallthrough]];
    default:
      return ErrorFor(n);
  }
}

StatusOr<TlsEngine::Progress> TlsEngine::Write(std::span<const uint8_t> data) {
  if (data.empty()) return Progress{};
  ERR_clear_error();
  int n = SSL_write(ssl_, data.data(), ClampToInt(data.size()));
  if (n > 0) return Progress{.bytes = static_cast<size_t>(n)};
  // Renegotiation is off, so after the handshake BoringSSL has no reason to
  // read before writing; honour it anyway.
  if (SSL_get_error(ssl_, n) == SSL_ERROR_WANT_READ && !end_of_input_) {
    return Progress{.need_input = true};
  }
  return ErrorFor(n);
}

Status TlsEngine::Shutdown() {
  if (!handshake_done_) return FailedPreconditionError("TLS handshake not complete");
  ERR_clear_error();
  // 0: close_notify queued; 1: the peer's had been received too.
  int ret = SSL_shutdown(ssl_);
  if (ret < 0) return ErrorFor(ret);
  return OkStatus();
}

Status TlsEngine::RequestKeyUpdate() {
  ERR_clear_error();
  if (SSL_key_update(ssl_, SSL_KEY_UPDATE_REQUESTED) != 1) {
    return FailedPreconditionError("KeyUpdate needs a completed TLS 1.3 handshake");
  }
  // A zero-length SSL_write moves the queued KeyUpdate into the write BIO.
  int ret = SSL_write(ssl_, nullptr, 0);
  if (ret < 0) return ErrorFor(ret);
  return OkStatus();
}

std::string TlsEngine::protocol_version() const { return SSL_get_version(ssl_); }

Status TlsEngine::ErrorFor(int ret) const {
  int error = SSL_get_error(ssl_, ret);
  std::string reason;
  if (error == SSL_ERROR_SSL) {
    uint32_t packed = ERR_peek_error();
    const char* text = ERR_reason_error_string(packed);
    reason = text != nullptr ? text : "error " + std::to_string(ERR_GET_REASON(packed));
    long verify = SSL_get_verify_result(ssl_);
    if (ERR_GET_LIB(packed) == ERR_LIB_SSL &&
        ERR_GET_REASON(packed) == SSL_R_CERTIFICATE_VERIFY_FAILED && verify != X509_V_OK) {
      // X509_V_ERR_APPLICATION_VERIFICATION is only set by the A29 SAN
      // check (VerifyChainThenAuthorize); A29 names the failure so.
      reason += verify == X509_V_ERR_APPLICATION_VERIFICATION
                    ? std::string(
                          " (certificate check failure: no subject alternative name "
                          "of the server's certificate is authorized)")
                    : std::string(" (certificate verify failed: ") +
                          X509_verify_cert_error_string(verify) + ")";
    }
  } else if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
    reason = end_of_input_ ? "connection closed by peer" : "unexpected transport error";
  } else if (error == SSL_ERROR_WANT_READ) {
    reason = "connection closed by peer";
  } else {
    reason = SSL_error_description(error) != nullptr ? SSL_error_description(error)
                                                     : "SSL error " + std::to_string(error);
  }
  ERR_clear_error();
  return UnavailableError(std::move(reason));
}

}  // namespace uxds
