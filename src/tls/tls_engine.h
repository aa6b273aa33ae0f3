// TlsEngine: one BoringSSL connection over two memory BIOs, without I/O.
//
// The owner moves bytes: ciphertext received from the peer goes in with
// PutCiphertext(), ciphertext for the peer comes out with TakeCiphertext().
// Handshake(), Read() and Write() never block: when BoringSSL needs more
// ciphertext they report `need_input`. TlsStream drives an engine over a
// ByteStream; tests drive two engines against each other in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tls/tls_context.h"
#include "uxds/status.h"

struct ssl_st;
struct bio_st;

namespace uxds {

class TlsEngine {
 public:
  // A client engine that checks the server certificate against `server_name`
  // (a DNS name, or an IPv4/IPv6 literal, brackets allowed) and sends it as
  // SNI when it is a DNS name. INVALID_ARGUMENT for an empty name.
  static StatusOr<std::unique_ptr<TlsEngine>> CreateClient(
      std::shared_ptr<TlsClientContext> context, std::string_view server_name);
  static StatusOr<std::unique_ptr<TlsEngine>> CreateServer(
      std::shared_ptr<TlsServerContext> context);
  ~TlsEngine();
  TlsEngine(const TlsEngine&) = delete;
  TlsEngine& operator=(const TlsEngine&) = delete;

  // Ciphertext from the peer.
  void PutCiphertext(std::span<const uint8_t> data);
  // The transport reached end of stream: no more ciphertext will arrive.
  void PutEndOfInput();
  bool end_of_input() const { return end_of_input_; }

  // Ciphertext waiting to be sent to the peer.
  size_t ciphertext_pending() const;
  // Moves up to out.size() bytes of it into `out`; returns how many.
  size_t TakeCiphertext(std::span<uint8_t> out);

  // The outcome of one step: `bytes` of plaintext read or written, or
  // `need_input` (feed more ciphertext, then retry), or `end` (Read only: the
  // peer finished sending).
  struct Progress {
    size_t bytes = 0;
    bool need_input = false;
    bool end = false;
  };

  // Advances the handshake; returns true once it is complete. After each
  // call, send what TakeCiphertext() yields. Failure: UNAVAILABLE with
  // BoringSSL's reason, e.g. "CERTIFICATE_VERIFY_FAILED (certificate verify
  // failed: unable to get local issuer certificate)".
  StatusOr<bool> Handshake();
  bool handshake_done() const { return handshake_done_; }

  // Decrypts into `out`. May queue ciphertext (TLS 1.3 KeyUpdate replies).
  // A transport EOF without close_notify also reads as `end`: HTTP/2 frames
  // are self-delimiting, so a truncated stream is detected a layer up.
  StatusOr<Progress> Read(std::span<uint8_t> out);
  // Encrypts all of `data` into queued ciphertext (the memory BIO grows), or
  // reports need_input.
  StatusOr<Progress> Write(std::span<const uint8_t> data);
  // Queues close_notify. Reading may continue afterwards.
  Status Shutdown();
  // Queues a TLS 1.3 KeyUpdate that also asks the peer to update its keys.
  Status RequestKeyUpdate();

  // After the handshake.
  const std::string& negotiated_alpn() const { return alpn_; }
  const std::string& peer_certificate_subject() const { return peer_subject_; }
  std::string protocol_version() const;

 private:
  TlsEngine(ssl_st* ssl, bio_st* network_in, bio_st* network_out, bool is_client);
  // The Status for a failed SSL_* call that returned `ret`.
  Status ErrorFor(int ret) const;
  Status CheckNegotiatedAlpn() const;

  ssl_st* ssl_;          // owned; owns both BIOs
  bio_st* network_in_;   // SSL's read BIO: ciphertext from the peer
  bio_st* network_out_;  // SSL's write BIO: ciphertext for the peer
  bool is_client_;
  bool alpn_required_ = false;
  bool end_of_input_ = false;
  bool handshake_done_ = false;
  std::shared_ptr<const void> context_;  // keeps the SSL_CTX's owner alive
  std::string alpn_;
  std::string peer_subject_;
};

}  // namespace uxds
