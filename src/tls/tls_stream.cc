#include "tls/tls_stream.h"

#include <algorithm>
#include <utility>

#include "runtime/tcp_socket.h"
#include "tls/tls_engine.h"

namespace uxds {
namespace {

// Plaintext handed to BoringSSL per step of Write(): four full records, so
// the ciphertext queued in the engine stays bounded however large the write,
// and one transport write carries it.
constexpr size_t kPlaintextChunk = 4 * 16384;

// The loop that drives `transport`: a TcpSocket knows its own; any other
// stream is driven by the loop running this coroutine.
Loop* DrivingLoop(ByteStream* transport) {
  if (auto* tcp = dynamic_cast<TcpSocket*>(transport)) return &tcp->loop();
  return Loop::Current();
}

}  // namespace

TlsStream::TlsStream(Loop& loop, std::unique_ptr<ByteStream> transport,
                     std::unique_ptr<TlsEngine> engine)
    : loop_(loop),
      transport_(std::move(transport)),
      engine_(std::move(engine)),
      peer_name_(transport_->PeerName()) {}

TlsStream::~TlsStream() = default;

Task<StatusOr<std::unique_ptr<TlsStream>>> TlsStream::Connect(
    std::unique_ptr<ByteStream> transport, std::shared_ptr<TlsClientContext> ctx,
    std::string server_name, std::chrono::milliseconds handshake_timeout) {
  if (transport == nullptr || ctx == nullptr) {
    co_return InvalidArgumentError("TlsStream::Connect needs a transport and a context");
  }
  Loop* loop = DrivingLoop(transport.get());
  if (loop == nullptr) co_return FailedPreconditionError("TlsStream::Connect outside a loop");
  StatusOr<std::unique_ptr<TlsEngine>> engine =
      TlsEngine::CreateClient(std::move(ctx), server_name);
  if (!engine.ok()) co_return engine.status();
  std::unique_ptr<TlsStream> stream(new TlsStream(*loop, std::move(transport), std::move(*engine)));
  co_return co_await Handshake(std::move(stream), handshake_timeout);
}

Task<StatusOr<std::unique_ptr<TlsStream>>> TlsStream::Accept(
    std::unique_ptr<ByteStream> transport, std::shared_ptr<TlsServerContext> ctx,
    std::chrono::milliseconds handshake_timeout) {
  if (transport == nullptr || ctx == nullptr) {
    co_return InvalidArgumentError("TlsStream::Accept needs a transport and a context");
  }
  Loop* loop = DrivingLoop(transport.get());
  if (loop == nullptr) co_return FailedPreconditionError("TlsStream::Accept outside a loop");
  StatusOr<std::unique_ptr<TlsEngine>> engine = TlsEngine::CreateServer(std::move(ctx));
  if (!engine.ok()) co_return engine.status();
  std::unique_ptr<TlsStream> stream(new TlsStream(*loop, std::move(transport), std::move(*engine)));
  co_return co_await Handshake(std::move(stream), handshake_timeout);
}

Task<StatusOr<std::unique_ptr<TlsStream>>> TlsStream::Handshake(std::unique_ptr<TlsStream> stream,
                                                                std::chrono::milliseconds timeout) {
  TlsStream* self = stream.get();
  bool timed_out = false;
  // On expiry, closing the transport cancels the pending read or write, which
  // ends the loop below. Destroying the timer guarantees the callback never
  // runs after this frame is gone.
  Timer timer(self->loop_);
  timer.Start(timeout, [self, &timed_out] {
    timed_out = true;
    self->transport_->Close();
  });
  Status failure;
  while (true) {
    StatusOr<bool> done = self->engine_->Handshake();
    // Send our next flight, or the alert that explains a failure to the peer.
    Status flushed = co_await self->Flush();
    if (!done.ok()) {
      failure = done.status();
      break;
    }
    if (!flushed.ok()) {
      failure = flushed;
      break;
    }
    if (*done) break;
    Status filled = co_await self->Fill();
    if (!filled.ok()) {
      failure = filled;
      break;
    }
  }
  timer.Cancel();
  if (timed_out) {
    co_return DeadlineExceededError("TLS handshake with " + self->peer_name_ + " timed out after " +
                                    std::to_string(timeout.count()) + " ms");
  }
  if (failure.code() == StatusCode::kCancelled) co_return failure;
  if (!failure.ok()) {
    co_return UnavailableError("TLS handshake with " + self->peer_name_ +
                               " failed: " + failure.message());
  }
  co_return std::move(stream);
}

std::string TlsStream::negotiated_alpn() const { return engine_->negotiated_alpn(); }

const TlsPeer& TlsStream::peer() const { return engine_->peer(); }

std::string TlsStream::PeerCertificateSubject() const {
  return engine_->peer_certificate_subject();
}

std::string TlsStream::protocol_version() const { return engine_->protocol_version(); }

std::string TlsStream::PeerName() const { return peer_name_; }

Task<StatusOr<size_t>> TlsStream::Read(std::span<uint8_t> buf) {
  if (closed_) co_return CancelledError("TLS stream to " + peer_name_ + " closed");
  if (buf.empty()) co_return InvalidArgumentError("TLS read into an empty buffer");
  while (true) {
    StatusOr<TlsEngine::Progress> progress = engine_->Read(buf);
    // Reading may have queued records of our own (a TLS 1.3 KeyUpdate reply,
    // an alert). When another task is flushing, it sends them along with its
    // own; otherwise we do. A failure is sticky and surfaces on the next Write.
    if (engine_->ciphertext_pending() > 0 && !flushing_) {
      Status flushed = co_await Flush();
      (void)flushed;
    }
    if (!progress.ok()) {
      co_return UnavailableError("TLS read from " + peer_name_ +
                                 " failed: " + progress.status().message());
    }
    if (progress->bytes > 0) co_return progress->bytes;
    if (progress->end) co_return size_t{0};
    Status filled = co_await Fill();
    if (!filled.ok()) co_return filled;
  }
}

Task<Status> TlsStream::Write(std::span<const uint8_t> data) {
  if (closed_) co_return CancelledError("TLS stream to " + peer_name_ + " closed");
  if (shutdown_sent_) {
    co_return FailedPreconditionError("TLS write to " + peer_name_ + " after ShutdownWrite");
  }
  while (!data.empty()) {
    if (write_error_) co_return *write_error_;
    StatusOr<TlsEngine::Progress> progress =
        engine_->Write(data.first(std::min(data.size(), kPlaintextChunk)));
    if (!progress.ok()) {
      co_return UnavailableError("TLS write to " + peer_name_ +
                                 " failed: " + progress.status().message());
    }
    if (progress->need_input) {
      Status filled = co_await Fill();
      if (!filled.ok()) co_return filled;
      continue;
    }
    data = data.subspan(progress->bytes);
    Status flushed = co_await Flush();
    if (!flushed.ok()) co_return flushed;
  }
  co_return OkStatus();
}

Task<Status> TlsStream::ShutdownWrite() {
  if (closed_) co_return CancelledError("TLS stream to " + peer_name_ + " closed");
  if (!shutdown_sent_) {
    shutdown_sent_ = true;
    Status queued = engine_->Shutdown();
    if (!queued.ok()) {
      co_return UnavailableError("TLS shutdown with " + peer_name_ +
                                 " failed: " + queued.message());
    }
  }
  Status flushed = co_await Flush();
  if (!flushed.ok()) co_return flushed;
  co_return co_await transport_->ShutdownWrite();
}

Task<Status> TlsStream::UpdateKeys() {
  if (closed_) co_return CancelledError("TLS stream to " + peer_name_ + " closed");
  Status queued = engine_->RequestKeyUpdate();
  if (!queued.ok()) co_return queued;
  co_return co_await Flush();
}

void TlsStream::Close() {
  if (closed_) return;
  closed_ = true;
  // Pending transport operations complete with CANCELLED, which ends every
  // Read/Write/Flush/Fill waiting on them (and their waiters).
  transport_->Close();
}

// Waiting on a flush or fill round: the Event is made only when a second
// task actually waits, so an uncontended round allocates nothing.
std::shared_ptr<Event> TlsStream::JoinRound(std::shared_ptr<Event>& round) {
  if (round == nullptr) round = std::make_shared<Event>(loop_);
  return round;
}

void TlsStream::EndRound(std::shared_ptr<Event>& round) {
  if (round == nullptr) return;
  std::shared_ptr<Event> done = std::move(round);
  done->Set();
}

Task<Status> TlsStream::Flush() {
  // Our bytes end at this position of the ciphertext stream; we are done once
  // it has been sent, by us or by whichever task was flushing meanwhile.
  const uint64_t target = ciphertext_taken_ + engine_->ciphertext_pending();
  while (ciphertext_sent_ < target) {
    if (write_error_) co_return *write_error_;
    if (closed_) co_return CancelledError("TLS stream to " + peer_name_ + " closed");
    if (flushing_) {
      // One transport write at a time: wait for the current round, which
      // sends everything queued when it looks, our bytes included.
      std::shared_ptr<Event> round = JoinRound(flush_done_);
      Status waited = co_await round->Wait();
      if (!waited.ok()) co_return waited;
      continue;
    }
    flushing_ = true;
    while (engine_->ciphertext_pending() > 0) {
      // Swapped out, not copied: other tasks may queue more meanwhile.
      engine_->TakeCiphertext(sending_);
      ciphertext_taken_ += sending_.size();
      Status written = co_await transport_->Write(sending_);
      if (!written.ok()) {
        // Part of a record may have gone out: nothing can follow it.
        write_error_ = written;
        break;
      }
      ciphertext_sent_ += sending_.size();
    }
    flushing_ = false;
    EndRound(flush_done_);
  }
  co_return write_error_.value_or(OkStatus());
}

Task<Status> TlsStream::Fill() {
  if (read_error_) co_return *read_error_;
  if (closed_) co_return CancelledError("TLS stream to " + peer_name_ + " closed");
  if (transport_eof_) co_return OkStatus();  // the engine already knows
  if (filling_) {
    // Another task's read brings the ciphertext we need, or the end.
    std::shared_ptr<Event> round = JoinRound(fill_done_);
    Status waited = co_await round->Wait();
    if (!waited.ok()) co_return waited;
    co_return read_error_.value_or(OkStatus());
  }
  filling_ = true;
  // Straight into the engine's input buffer; the engine only consumes from
  // its front while this read is pending.
  StatusOr<size_t> n = co_await transport_->Read(engine_->InputSpace());
  Status result;
  if (!n.ok()) {
    result = n.status();
    // A cancelled read consumed nothing, so the stream stays usable after it
    // (unless Close() caused it, which `closed_` covers). Other errors stick.
    if (result.code() != StatusCode::kCancelled) read_error_ = result;
  } else if (*n == 0) {
    transport_eof_ = true;
    engine_->PutEndOfInput();
  } else {
    engine_->CommitInput(*n);
  }
  filling_ = false;
  EndRound(fill_done_);
  co_return result;
}

}  // namespace uxds
