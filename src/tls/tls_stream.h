// TlsStream: TLS (BoringSSL) over any ByteStream, driven by the runtime.
//
// BoringSSL runs over memory BIOs (TlsEngine); this class moves ciphertext
// between those BIOs and the transport with coroutines. One Read() and one
// Write() may be pending at the same time (HTTP/2 reads in one task and
// writes in another): transport writes are serialized through one flush path,
// and transport reads through one fill path, whichever task needs them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/byte_stream.h"
#include "tls/tls_context.h"
#include "uxds/connection_info.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds {

class TlsEngine;

class TlsStream final : public ByteStream {
 public:
  // Handshakes as the client over `transport`: verifies the server's chain
  // against the context's CA file and that `server_name` (a DNS name, or an IP
  // literal such as "127.0.0.1" or "::1") matches the certificate; sends SNI
  // for DNS names. Must run on the loop that drives `transport`.
  //
  // Errors: UNAVAILABLE "TLS handshake with <peer> failed: <reason>" (the
  // BoringSSL reason, plus the certificate verification result when that was
  // the cause); DEADLINE_EXCEEDED after `handshake_timeout`; CANCELLED when
  // the calling task is cancelled; INVALID_ARGUMENT for an empty server_name.
  static Task<StatusOr<std::unique_ptr<TlsStream>>> Connect(
      std::unique_ptr<ByteStream> transport, std::shared_ptr<TlsClientContext> ctx,
      std::string server_name, std::chrono::milliseconds handshake_timeout);

  // Handshakes as the server over `transport`. Same errors as Connect().
  static Task<StatusOr<std::unique_ptr<TlsStream>>> Accept(
      std::unique_ptr<ByteStream> transport, std::shared_ptr<TlsServerContext> ctx,
      std::chrono::milliseconds handshake_timeout);

  ~TlsStream() override;

  // The protocol agreed through ALPN ("h2"), or empty when none was.
  std::string negotiated_alpn() const;
  // The peer certificate's subject (RFC 2253 form, e.g. "CN=server"), for
  // logs and tests; empty when the peer sent no certificate.
  std::string PeerCertificateSubject() const;
  // The peer certificate's URI and DNS SANs and subject (A41), for servers
  // to authorize calls on; empty without a certificate.
  const TlsPeer& peer() const;
  // "TLSv1.3" / "TLSv1.2".
  std::string protocol_version() const;
  // TLS 1.3: sends a KeyUpdate that also asks the peer to update its keys
  // (RFC 8446 §4.6.3), for connections that live long enough to want it.
  Task<Status> UpdateKeys();

  // ByteStream. Read() returns 0 once the peer sent close_notify or closed
  // the transport. ShutdownWrite() sends close_notify, then shuts down the
  // transport's sending side. Close() cancels pending operations (they
  // complete with CANCELLED) and closes the transport.
  Task<StatusOr<size_t>> Read(std::span<uint8_t> buf) override;
  Task<Status> Write(std::span<const uint8_t> data) override;
  Task<Status> ShutdownWrite() override;
  void Close() override;
  std::string PeerName() const override;

 private:
  TlsStream(Loop& loop, std::unique_ptr<ByteStream> transport, std::unique_ptr<TlsEngine> engine);

  static Task<StatusOr<std::unique_ptr<TlsStream>>> Handshake(std::unique_ptr<TlsStream> stream,
                                                              std::chrono::milliseconds timeout);
  // Sends the ciphertext the engine has queued so far. When another task is
  // already flushing, waits for its round instead (it sends our bytes too).
  Task<Status> Flush();
  // Reads once from the transport into the engine. When another task is
  // already reading, waits for that read instead.
  Task<Status> Fill();
  std::shared_ptr<Event> JoinRound(std::shared_ptr<Event>& round);
  static void EndRound(std::shared_ptr<Event>& round);

  Loop& loop_;
  std::unique_ptr<ByteStream> transport_;
  std::unique_ptr<TlsEngine> engine_;
  std::string peer_name_;
  bool closed_ = false;
  bool shutdown_sent_ = false;

  // Flush path: one transport Write at a time. A waiter holds the Event of
  // the round it waits on, so the Event outlives the round.
  bool flushing_ = false;
  std::shared_ptr<Event> flush_done_;  // made when someone waits
  uint64_t ciphertext_taken_ = 0;      // moved out of the engine for sending
  uint64_t ciphertext_sent_ = 0;       // written to the transport
  std::vector<uint8_t> sending_;       // the flusher's buffer, swapped with the engine's
  std::optional<Status> write_error_;  // sticky: a failed write breaks the record stream

  // Fill path: one transport Read at a time.
  bool filling_ = false;
  std::shared_ptr<Event> fill_done_;  // made when someone waits
  std::optional<Status> read_error_;  // sticky, except CANCELLED
  bool transport_eof_ = false;
};

}  // namespace uxds
