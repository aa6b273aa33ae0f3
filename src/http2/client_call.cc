#include "http2/client_call.h"

#include <nghttp2/nghttp2.h>

#include "http2/client_session.h"
#include "http2/grpc_protocol.h"

namespace uxds::http2 {

ClientCall::ClientCall(detail::ClientSession* session, std::string path,
                       std::optional<Loop::Clock::time_point> deadline,
                       size_t max_receive_message_size, size_t max_metadata_size)
    : Http2Stream(session, max_receive_message_size),
      client_session_(session),
      path_(std::move(path)),
      deadline_(deadline),
      max_metadata_size_(max_metadata_size) {}

ClientCall::~ClientCall() {
  // An unfinished call is cancelled: the server must not keep working for a
  // caller that is gone.
  Fail(CancelledError("call destroyed before it finished"), NGHTTP2_CANCEL);
  Detach();
}

void ClientCall::Detach() {
  if (client_session_ == nullptr) return;
  DetachFromNghttp2();
  client_session_->ForgetCall(stream_id_);
  client_session_ = nullptr;
  ForgetSession();
}

void ClientCall::FailBeforeStart(Status status, Delivery delivery) {
  stream_closed_ = true;
  client_session_ = nullptr;
  ForgetSession();
  delivery_ = delivery;
  Complete(std::move(status));
}

void ClientCall::OnRequestRefused(Status status, Delivery delivery) {
  if (!finished_) {
    delivery_ = delivery;
    Complete(std::move(status));
  }
  DiscardReceived();
  Detach();
  stream_closed_ = true;
}

void ClientCall::StartDeadlineTimer() {
  if (!deadline_) return;
  deadline_timer_ = std::make_unique<Timer>(loop_);
  deadline_timer_->Start(*deadline_ - Loop::Clock::now(), [this] {
    // PROTOCOL-HTTP2: the deadline expiring is a client cancellation.
    Fail(DeadlineExceededError("deadline exceeded for " + path_), NGHTTP2_CANCEL);
  });
}

void ClientCall::Complete(Status status) {
  if (finished_) return;
  finished_ = true;
  status_ = std::move(status);
  if (deadline_timer_) deadline_timer_->Cancel();
  read_cond_.NotifyAll();
  write_cond_.NotifyAll();
}

void ClientCall::Fail(Status status, uint32_t rst_error_code) {
  if (finished_) return;
  Complete(std::move(status));
  DiscardReceived();
  DiscardSendBuffer();
  ResetStream(rst_error_code);
}

Status ClientCall::StatusAfterFinish() const {
  if (!status_.ok()) return status_;
  return FailedPreconditionError("call to " + path_ + " already finished");
}

Task<Status> ClientCall::Write(std::string_view message) {
  if (finished_) co_return StatusAfterFinish();
  if (writes_done_) co_return FailedPreconditionError("Write() after WritesDone() on " + path_);
  if (Status queued = QueueMessage(message); !queued.ok()) co_return queued;
  while (!finished_ && send_pending() > detail::kSendBufferHighWater) {
    const Status awaited = co_await write_cond_.Wait();
    if (!awaited.ok()) {
      Cancel();
      co_return CancelledError("Write() cancelled");
    }
  }
  if (finished_) co_return StatusAfterFinish();
  co_return OkStatus();
}

Task<Status> ClientCall::WaitUntilWritten() {
  while (!finished_ && written_total() < queued_total()) {
    const Status awaited = co_await write_cond_.Wait();
    if (!awaited.ok()) co_return CancelledError("WaitUntilWritten() cancelled");
  }
  if (written_total() < queued_total()) co_return StatusAfterFinish();
  co_return OkStatus();
}

Task<Status> ClientCall::WritesDone() {
  if (finished_) co_return StatusAfterFinish();
  writes_done_ = true;
  EndSending();
  co_return OkStatus();
}

Task<std::optional<std::string>> ClientCall::Read() {
  while (true) {
    if (has_received_message()) co_return PopReceivedMessage();
    if (finished_) co_return std::nullopt;
    const Status awaited = co_await read_cond_.Wait();
    if (!awaited.ok()) {
      Cancel();
      co_return std::nullopt;
    }
  }
}

Task<Status> ClientCall::ReadInitialMetadata() {
  while (!response_headers_received_ && !finished_) {
    const Status awaited = co_await read_cond_.Wait();
    if (!awaited.ok()) Cancel();
  }
  if (response_headers_received_) co_return OkStatus();
  co_return status_;
}

Task<Status> ClientCall::Finish() {
  while (!finished_) {
    // Unread messages would hold back the stream window, and with it the
    // trailers we are waiting for.
    DiscardReceived();
    const Status awaited = co_await read_cond_.Wait();
    if (!awaited.ok()) Cancel();
  }
  DiscardReceived();
  co_return status_;
}

void ClientCall::Cancel() { Fail(CancelledError("call cancelled by the client"), NGHTTP2_CANCEL); }

// --- Events from nghttp2 -----------------------------------------------------

void ClientCall::OnHeader(uint8_t /*category*/, std::string_view name, std::string_view value) {
  header_list_size_ += HeaderFieldSize(name, value);
  if (header_list_size_ > max_metadata_size_) {
    header_list_too_large_ = true;
    return;
  }
  if (name == ":status") {
    // nghttp2 (HTTP messaging) has checked it is three digits.
    http_status_ = 0;
    for (char c : value) http_status_ = http_status_ * 10 + (c - '0');
  } else if (!name.empty() && name[0] == ':') {
    // Other pseudo-headers carry nothing for gRPC.
  } else if (name == "content-type") {
    content_type_ = value;
  } else if (name == "grpc-status") {
    grpc_status_ = std::string(value);
  } else if (name == "grpc-message") {
    grpc_message_ = std::string(value);
  } else if (name == "grpc-encoding" || name == "grpc-accept-encoding") {
    // We never negotiate compression; a compressed message fails in the
    // deframer.
  } else {
    AppendReceivedMetadata(pending_metadata_, name, value);
  }
}

void ClientCall::OnHeadersComplete(uint8_t category, bool end_stream) {
  const bool too_large = header_list_too_large_;
  header_list_size_ = 0;
  header_list_too_large_ = false;
  if (finished_) return;
  if (too_large) {
    Fail(ResourceExhaustedError("response metadata from " + client_session_->peer() +
                                " exceeds the limit of " + std::to_string(max_metadata_size_) +
                                " bytes"),
         NGHTTP2_CANCEL);
    return;
  }
  if (category == NGHTTP2_HCAT_RESPONSE && !response_headers_received_) {
    if (http_status_ >= 100 && http_status_ < 200) {
      // Informational response: the real one follows.
      pending_metadata_.clear();
      return;
    }
    if (end_stream) {
      // Trailers-Only: one HEADERS frame carries the status.
      trailing_metadata_ = std::move(pending_metadata_);
      pending_metadata_.clear();
      CompleteFromTrailers();
      return;
    }
    if (http_status_ != 200) {
      // http-grpc-status-mapping: a non-200 response without grpc-status.
      Fail(Status(StatusCodeFromHttpStatus(http_status_),
                  "HTTP status " + std::to_string(http_status_) + " from " +
                      client_session_->peer() + " for " + path_),
           NGHTTP2_CANCEL);
      return;
    }
    if (!IsGrpcContentType(content_type_)) {
      Fail(UnknownError("response from " + client_session_->peer() + " has content-type \"" +
                        content_type_ + "\", not application/grpc"),
           NGHTTP2_CANCEL);
      return;
    }
    response_headers_received_ = true;
    initial_metadata_ = std::move(pending_metadata_);
    pending_metadata_.clear();
    read_cond_.NotifyAll();
    return;
  }
  // Trailers. nghttp2 (HTTP messaging) only accepts them with END_STREAM.
  trailing_metadata_ = std::move(pending_metadata_);
  pending_metadata_.clear();
  CompleteFromTrailers();
}

void ClientCall::CompleteFromTrailers() {
  Status status;
  if (grpc_status_) {
    std::optional<StatusCode> code = ParseGrpcStatus(*grpc_status_);
    if (code) {
      status = Status(*code, grpc_message_ ? PercentDecodeGrpcMessage(*grpc_message_) : "");
    } else {
      status = UnknownError("invalid grpc-status \"" + *grpc_status_ + "\" from " +
                            client_session_->peer());
    }
  } else if (http_status_ != 200) {
    status = Status(StatusCodeFromHttpStatus(http_status_),
                    "HTTP status " + std::to_string(http_status_) + " from " +
                        client_session_->peer() + " for " + path_ + " (no grpc-status)");
  } else {
    status = UnknownError("response from " + client_session_->peer() + " for " + path_ +
                          " ended without grpc-status");
  }
  if (status.ok() && deframer_.has_partial_message()) {
    status = InternalError("response stream from " + client_session_->peer() +
                           " ended inside a message");
  }
  Complete(std::move(status));
  // PROTOCOL-HTTP2 "Early Server Closure": trailers before our END_STREAM;
  // reset so the stream is released on both sides.
  if (!send_ended_ || send_pending() > 0) {
    DiscardSendBuffer();
    ResetStream(NGHTTP2_NO_ERROR);
  }
}

void ClientCall::OnDataEndStream() {
  if (finished_) return;
  Fail(InternalError("response stream from " + client_session_->peer() + " for " + path_ +
                     " ended without trailers"),
       NGHTTP2_NO_ERROR);
}

void ClientCall::OnReceiveError(Status status) {
  // The stream is unusable; the connection is fine.
  Fail(std::move(status), NGHTTP2_CANCEL);
}

void ClientCall::OnStreamClose(uint32_t error_code) {
  if (!finished_) {
    // A6: REFUSED_STREAM (sent by the server, or nghttp2's own for a stream
    // above a GOAWAY's last stream id) means no application saw the call;
    // only before any of a response arrived.
    if (error_code == NGHTTP2_REFUSED_STREAM && http_status_ == 0 && !response_headers_received_ &&
        !has_received_message()) {
      delivery_ = Delivery::kRefused;
    }
    Status status = StatusFromRstStream(error_code);
    // PROTOCOL-HTTP2 "Client Cancellation": a server's CANCEL after our
    // deadline is our DEADLINE_EXCEEDED.
    if (status.code() == StatusCode::kCancelled && deadline_ && Loop::Clock::now() >= *deadline_) {
      status = DeadlineExceededError("deadline exceeded for " + path_);
    }
    Complete(std::move(status).WithContext(path_));
    DiscardReceived();
  }
  Detach();
}

void ClientCall::OnSessionClosed(const Status& reason) {
  OnSessionClosedWith(reason, Delivery::kMaybeProcessed);
}

void ClientCall::OnSessionClosedWith(const Status& reason, Delivery delivery) {
  // The session forgets us itself; nghttp2 must not reach us after this
  // (the call may be destroyed while the session flushes its GOAWAY).
  DetachFromNghttp2();
  client_session_ = nullptr;
  ForgetSession();
  stream_closed_ = true;
  if (!finished_) {
    if (http_status_ == 0 && !response_headers_received_) delivery_ = delivery;
    // PROTOCOL-HTTP2: a connection failure ends a client's calls UNAVAILABLE.
    Complete(UnavailableError(reason.message()));
    DiscardReceived();
  }
}

}  // namespace uxds::http2
