#include "http2/server_call.h"

#include <nghttp2/nghttp2.h>

#include "http2/grpc_protocol.h"
#include "http2/nv_list.h"
#include "http2/server_session.h"

namespace uxds::http2 {
namespace {

using HeaderFields = std::vector<std::pair<std::string, std::string>>;

// A call's trailers (grpc-status, grpc-message, the handler's trailing
// metadata) added to `nva`; `texts` keeps the encoded values until
// nghttp2 copies them at submit.
struct TrailerTexts {
  std::string code;
  std::string message;
  std::vector<std::string> metadata;
};
void AddTrailers(NvList& nva, const Status& status, const HeaderFields& trailing,
                 TrailerTexts& texts) {
  texts.code = std::to_string(static_cast<int>(status.code()));
  nva.Add("grpc-status", texts.code);
  if (!status.message().empty()) {
    texts.message = PercentEncodeGrpcMessage(status.message());
    nva.Add("grpc-message", texts.message);
  }
  texts.metadata.reserve(trailing.size());
  for (const auto& [key, value] : trailing) {
    nva.Add(key, texts.metadata.emplace_back(EncodeMetadataValue(key, value)));
  }
}

const std::string& GrpcContentType() {
  static const std::string* const kValue = new std::string("application/grpc");
  return *kValue;
}

}  // namespace

Http2ServerCall::Http2ServerCall(detail::ServerSession* session, CancelState* parent_cancel,
                                 size_t max_receive_message_size, size_t max_metadata_size)
    : Http2Stream(session, max_receive_message_size),
      server_session_(session),
      cancel_state_(parent_cancel),
      max_metadata_size_(max_metadata_size) {}

Http2ServerCall::~Http2ServerCall() {
  if (deadline_timer_) deadline_timer_->Cancel();
  DetachFromNghttp2();
}

const std::string& Http2ServerCall::peer() const { return server_session_->peer(); }

const ConnectionInfo& Http2ServerCall::connection() const {
  return server_session_->connection_info();
}

Task<std::optional<std::string>> Http2ServerCall::Read() {
  while (true) {
    if (has_received_message()) co_return PopReceivedMessage();
    if (remote_end_ || cancelled_ || stream_closed_) co_return std::nullopt;
    const Status awaited = co_await read_cond_.Wait();
    if (!awaited.ok()) co_return std::nullopt;
  }
}

Task<Status> Http2ServerCall::Write(std::string_view message) {
  if (cancelled_) co_return CancelledError("call " + path_ + " was cancelled");
  if (finished_) co_return FailedPreconditionError("Write() after " + path_ + " finished");
  if (!headers_sent_) {
    if (Status sent = SendInitialMetadata(); !sent.ok()) co_return sent;
  }
  if (Status queued = QueueMessage(message); !queued.ok()) co_return queued;
  while (!cancelled_ && !stream_closed_ && send_pending() > detail::kSendBufferHighWater) {
    const Status awaited = co_await write_cond_.Wait();
    if (!awaited.ok()) {
      co_return CancelledError("call " + path_ + " was cancelled");
    }
  }
  if (cancelled_ || stream_closed_) co_return CancelledError("call " + path_ + " was cancelled");
  co_return OkStatus();
}

void Http2ServerCall::AddInitialMetadata(std::string key, std::string value) {
  if (!headers_sent_) initial_metadata_.emplace_back(std::move(key), std::move(value));
}

void Http2ServerCall::AddTrailingMetadata(std::string key, std::string value) {
  // After the call finished its trailers are decided (and sent with the
  // last DATA frame): later metadata is not added.
  if (finished_) return;
  trailing_metadata_.emplace_back(std::move(key), std::move(value));
}

Status Http2ServerCall::SendInitialMetadata() {
  if (headers_sent_) return OkStatus();
  if (cancelled_) return CancelledError("call " + path_ + " was cancelled");
  if (finished_) return FailedPreconditionError("call " + path_ + " already finished");
  if (Status valid = ValidateMetadataToSend(initial_metadata_); !valid.ok()) {
    initial_metadata_.clear();
    Abort(valid);
    return valid;
  }
  NvList nva;
  nva.AddStatic(":status", "200");
  nva.AddStatic("content-type", "application/grpc");
  nva.AddStatic("grpc-accept-encoding", "identity");
  // Encoded values live until nghttp2 has copied them, at submit.
  std::vector<std::string> encoded;
  encoded.reserve(initial_metadata_.size());
  for (const auto& [key, value] : initial_metadata_) {
    nva.Add(key, encoded.emplace_back(EncodeMetadataValue(key, value)));
  }
  const nghttp2_data_provider provider = detail::Http2Session::StreamDataProvider();
  const int rv =
      nghttp2_submit_response(session_->nghttp2(), stream_id_, nva.data(), nva.size(), &provider);
  if (rv != 0) {
    MarkCancelled();
    return InternalError(std::string("cannot send response headers: ") + nghttp2_strerror(rv));
  }
  headers_sent_ = true;
  session_->WakeWriter();
  return OkStatus();
}

void Http2ServerCall::FinishWithStatus(const Status& handler_status) {
  if (finished_ || cancelled_ || stream_closed_ || session_->closing()) {
    finished_ = true;
    return;
  }
  Status status = handler_status;
  if (Status valid = ValidateMetadataToSend(trailing_metadata_); !valid.ok()) {
    trailing_metadata_.clear();
    status = valid;
  }
  if (!headers_sent_ && !initial_metadata_.empty()) {
    // Headers the handler asked for go out in their own frame.
    if (Status sent = SendInitialMetadata(); !sent.ok()) return;
  }
  finished_ = true;
  if (deadline_timer_) deadline_timer_->Cancel();
  if (!headers_sent_) {
    // Trailers-Only: nothing was written, one HEADERS frame with END_STREAM.
    NvList nva;
    nva.AddStatic(":status", "200");
    nva.AddStatic("content-type", "application/grpc");
    TrailerTexts texts;
    AddTrailers(nva, status, trailing_metadata_, texts);
    nghttp2_submit_response(session_->nghttp2(), stream_id_, nva.data(), nva.size(), nullptr);
    headers_sent_ = true;
  } else {
    // The trailers follow the last DATA frame (OnSendEnd).
    pending_status_ = std::move(status);
    EndSending();
  }
  session_->WakeWriter();
}

void Http2ServerCall::RespondWithoutHandler(int http_status, const Status& status,
                                            const HeaderFields& extra) {
  handler_done_ = true;
  finished_ = true;
  if (stream_closed_ || session_->closing()) return;
  const std::string http_status_text = std::to_string(http_status);
  NvList nva;
  nva.Add(":status", http_status_text);
  nva.AddStatic("content-type", "application/grpc");
  nva.Add(extra);
  TrailerTexts texts;
  AddTrailers(nva, status, trailing_metadata_, texts);
  nghttp2_submit_response(session_->nghttp2(), stream_id_, nva.data(), nva.size(), nullptr);
  headers_sent_ = true;
  session_->WakeWriter();
}

void Http2ServerCall::Abort(const Status& status) {
  FinishWithStatus(status);
  MarkCancelled();
}

void Http2ServerCall::MarkCancelled() {
  if (cancelled_) return;
  cancelled_ = true;
  if (deadline_timer_) deadline_timer_->Cancel();
  DiscardReceived();
  // A message still arriving is freed now, not when the handler ends: the
  // server's memory budget stops counting it once the call is gone.
  DropPartialMessage(CancelledError("the call was cancelled"));
  // Interrupts whatever the handler awaits (on later loop turns).
  cancel_state_.Cancel();
  read_cond_.NotifyAll();
  write_cond_.NotifyAll();
}

void Http2ServerCall::StartDeadlineTimer() {
  if (!deadline_) return;
  deadline_timer_ = std::make_unique<Timer>(loop_);
  deadline_timer_->Start(*deadline_ - Loop::Clock::now(), [this] {
    if (finished_ || cancelled_) return;
    // PROTOCOL-HTTP2 "Client Cancellation": when the deadline passes the
    // server cancels the call locally and sends RST_STREAM CANCEL.
    ResetStream(NGHTTP2_CANCEL);
    MarkCancelled();
  });
}

// --- Events from nghttp2 -----------------------------------------------------

void Http2ServerCall::OnHeader(uint8_t category, std::string_view name, std::string_view value) {
  // Request trailers carry nothing gRPC uses.
  if (category != NGHTTP2_HCAT_REQUEST) return;
  header_list_size_ += HeaderFieldSize(name, value);
  if (header_list_size_ > max_metadata_size_) {
    header_list_too_large_ = true;
    return;
  }
  if (name == ":method") {
    method_ = value;
  } else if (name == ":path") {
    path_ = value;
  } else if (name == ":authority") {
    authority_ = value;
    authority_seen_ = true;
  } else if (!name.empty() && name[0] == ':') {
    // :scheme: nothing to check.
  } else if (name == "content-type") {
    if (value == GrpcContentType()) {
      content_type_ = &GrpcContentType();
    } else {
      content_type_value_ = value;
      content_type_ = &content_type_value_;
    }
  } else if (name == "grpc-timeout") {
    grpc_timeout_ = std::string(value);
  } else if (name == "grpc-encoding") {
    grpc_encoding_ = std::string(value);
  } else if (name == "te" || name == "grpc-accept-encoding") {
    // nghttp2 only lets "te: trailers" through; we send identity regardless.
  } else if (name == "host") {
    // A41: one unambiguous authority per request. Host stands in for a
    // missing :authority and is dropped beside one (pseudo-headers come
    // first, so :authority is known by now). nghttp2 resets a stream with
    // two Host or two :authority headers (PROTOCOL_ERROR, which A41 allows).
    if (!authority_seen_) authority_ = value;
  } else {
    // Room for a few entries at once, rather than growing one at a time.
    if (request_metadata_.capacity() == 0) request_metadata_.reserve(4);
    AppendReceivedMetadata(request_metadata_, name, value);
  }
}

void Http2ServerCall::OnHeadersComplete(uint8_t category, bool end_stream) {
  if (category == NGHTTP2_HCAT_REQUEST) {
    remote_end_ = end_stream;
    server_session_->OnRequestHeaders(this);
    return;
  }
  if (end_stream) {
    remote_end_ = true;
    read_cond_.NotifyAll();
  }
}

void Http2ServerCall::OnDataEndStream() {
  remote_end_ = true;
  if (deframer_.error().ok() && deframer_.has_partial_message()) {
    Abort(InternalError("request stream for " + path_ + " ended inside a message"));
  }
  read_cond_.NotifyAll();
}

void Http2ServerCall::OnReceiveError(Status status) {
  DiscardReceived();
  Abort(status);
}

void Http2ServerCall::OnStreamClose(uint32_t /*error_code*/) {
  // A stream that closes before we sent the final status was reset by the
  // client (cancellation) or by nghttp2 for a protocol error.
  if (!finished_) MarkCancelled();
  read_cond_.NotifyAll();
  write_cond_.NotifyAll();
  server_session_->MaybeRelease(this);  // may destroy *this
}

void Http2ServerCall::OnSessionClosed(const Status& /*reason*/) {
  // PROTOCOL-HTTP2: on connection failure a server's open calls are
  // CANCELLED. The session outlives us, so session_ stays valid; nghttp2
  // must not reach us once the session frees us.
  DetachFromNghttp2();
  stream_closed_ = true;
  MarkCancelled();
}

void Http2ServerCall::OnSendEnd(uint32_t* data_flags) {
  *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  if (!pending_status_) return;
  // The trailers carry END_STREAM, not the last DATA frame.
  *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
  NvList nva;
  TrailerTexts texts;
  AddTrailers(nva, *pending_status_, trailing_metadata_, texts);
  nghttp2_submit_trailer(session_->nghttp2(), stream_id_, nva.data(), nva.size());
  pending_status_.reset();
}

void Http2ServerCall::OnFinalHeadersSent() {
  // PROTOCOL-HTTP2 "Early Server Closure": the client has not half-closed;
  // RST_STREAM NO_ERROR releases the stream.
  if (!remote_end_) ResetStream(NGHTTP2_NO_ERROR);
}

}  // namespace uxds::http2
