// TlsEngine: one BoringSSL connection over in-memory buffers, without I/O.
//
// The owner moves bytes: ciphertext received from the peer goes into the
// engine's input buffer (InputSpace() + CommitInput(), so a transport can
// read straight into it), ciphertext for the peer comes out with
// TakeCiphertext() (a buffer swap, so a transport can write straight from
// it). Handshake(), Read() and Write() never block: when BoringSSL needs more
// ciphertext they report `need_input`. TlsStream drives an engine over a
// ByteStream; tests drive two engines against each other in memory.
//
// BoringSSL sees both buffers through one memory BIO of our own (rather than
// two BIO_s_mem, which would copy every byte once more on each side and move
// the remaining input down after each record read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tls/tls_context.h"
#include "uxds/connection_info.h"
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

  // Room for ciphertext from the peer, at the end of the input buffer. It
  // stays valid while Handshake/Read/Write run (they only consume from the
  // front), until the next InputSpace() or PutCiphertext() call.
  std::span<uint8_t> InputSpace();
  // `n` bytes were stored at the start of InputSpace().
  void CommitInput(size_t n);
  // Copies `data` in (InputSpace + CommitInput).
  void PutCiphertext(std::span<const uint8_t> data);
  // The transport reached end of stream: no more ciphertext will arrive.
  void PutEndOfInput();
  bool end_of_input() const { return end_of_input_; }

  // Ciphertext waiting to be sent to the peer.
  size_t ciphertext_pending() const { return output_.size(); }
  // Swaps all of it into `out`; whatever `out` held is dropped and its
  // storage reused for the next ciphertext.
  void TakeCiphertext(std::vector<uint8_t>& out);

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
  const std::string& peer_certificate_subject() const { return peer_.subject; }
  // The peer certificate's identities (empty without one).
  const TlsPeer& peer() const { return peer_; }
  std::string protocol_version() const;

 private:
  TlsEngine(ssl_st* ssl, bool is_client);
  // Gives `ssl_` its BIO over input_/output_; false on allocation failure.
  bool AttachBio();
  // The BIO's read, write and ctrl functions (BIO data: the engine).
  static int BioRead(bio_st* bio, char* out, int len);
  static int BioWrite(bio_st* bio, const char* in, int len);
  static long BioCtrl(bio_st* bio, int cmd, long larg, void* parg);
  // The Status for a failed SSL_* call that returned `ret`.
  Status ErrorFor(int ret) const;
  Status CheckNegotiatedAlpn() const;

  ssl_st* ssl_;  // owned; owns the BIO
  bool is_client_;
  bool alpn_required_ = false;
  bool end_of_input_ = false;
  bool handshake_done_ = false;
  std::shared_ptr<const void> context_;  // keeps the SSL_CTX's owner alive
  std::string alpn_;
  TlsPeer peer_;
  // Received ciphertext: input_[input_begin_, input_end_) is not yet read by
  // BoringSSL; input_[input_end_, size) is free room.
  std::vector<uint8_t> input_;
  size_t input_begin_ = 0;
  size_t input_end_ = 0;
  // Ciphertext produced for the peer, not yet taken.
  std::vector<uint8_t> output_;
};

}  // namespace uxds
