#include "http2/http2_stream.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>

#include "http2/http2_session.h"

namespace uxds::http2::detail {

Http2Stream::Http2Stream(Http2Session* session, size_t max_receive_message_size)
    : loop_(session->loop()),
      session_(session),
      deframer_(max_receive_message_size),
      read_cond_(session->loop()),
      write_cond_(session->loop()) {}

Http2Stream::~Http2Stream() { ForgetSession(); }

void Http2Stream::ForgetSession() {
  if (session_ == nullptr) return;
  session_->ForgetCreditWaiter(this);
  if (std::exchange(in_write_batch_, false)) session_->ForgetBatchStream(this);
  session_->AdjustBuffered(this, accounted_bytes_, 0, accounted_unfinished_, 0);
  accounted_bytes_ = 0;
  accounted_unfinished_ = 0;
  session_ = nullptr;
}

void Http2Stream::UpdateBuffered() {
  if (session_ == nullptr) return;
  // What the message still arriving holds is what its pieces were
  // allocated, not only the bytes in them.
  const size_t unfinished = deframer_.partial_capacity();
  const size_t now = received_bytes_ + unfinished;
  const size_t before = std::exchange(accounted_bytes_, now);
  const size_t unfinished_before = std::exchange(accounted_unfinished_, unfinished);
  session_->AdjustBuffered(this, before, now, unfinished_before, unfinished);
}

bool Http2Stream::DropPartialMessage(const Status& reason) {
  if (!deframer_.error().ok() || !deframer_.has_partial_message()) return false;
  deframer_.Abandon(reason);  // frees the pieces; later bytes are dropped
  UpdateBuffered();
  ReturnCredit();
  return true;
}

void Http2Stream::AbandonForMemory(Status reason) {
  if (session_ == nullptr || !deframer_.error().ok()) return;
  deframer_.Abandon(reason);  // frees the message still arriving, drops later bytes
  DiscardReceived();
  OnReceiveError(std::move(reason));
}

void Http2Stream::OnSendEnd(uint32_t* data_flags) { *data_flags |= NGHTTP2_DATA_FLAG_EOF; }

Status Http2Stream::QueueMessage(std::string_view message) {
  const size_t before = send_buffer_.size();
  if (Status framed = AppendGrpcFrame(send_buffer_, message); !framed.ok()) return framed;
  queued_total_ += send_buffer_.size() - before;
  if (session_ != nullptr && !stream_closed_) {
    // Fails harmlessly when the DATA source is not deferred (already queued).
    nghttp2_session_resume_data(session_->nghttp2(), stream_id_);
    session_->WakeWriter();
  }
  return OkStatus();
}

void Http2Stream::EndSending() {
  if (send_ended_) return;
  send_ended_ = true;
  if (session_ != nullptr && !stream_closed_) {
    nghttp2_session_resume_data(session_->nghttp2(), stream_id_);
    session_->WakeWriter();
  }
}

void Http2Stream::DiscardSendBuffer() {
  send_buffer_.clear();
  send_offset_ = 0;
}

std::string Http2Stream::PopReceivedMessage() {
  std::string message = received_.pop_front();
  received_bytes_ -= message.size() + kGrpcFrameHeaderSize;
  UpdateBuffered();
  ReturnCredit();
  return message;
}

void Http2Stream::DiscardReceived() {
  received_.clear();
  received_bytes_ = 0;
  UpdateBuffered();
  ReturnCredit();
}

void Http2Stream::ResetStream(uint32_t error_code) {
  if (session_ == nullptr || stream_closed_ || stream_id_ <= 0 || session_->closing()) return;
  nghttp2_submit_rst_stream(session_->nghttp2(), NGHTTP2_FLAG_NONE, stream_id_, error_code);
  session_->WakeWriter();
}

void Http2Stream::AttachToNghttp2(int32_t stream_id) {
  stream_id_ = stream_id;
  attached_ = true;
}

void Http2Stream::DetachFromNghttp2() {
  if (!attached_ || session_ == nullptr) return;
  attached_ = false;
  // Fails for a request whose HEADERS are still queued (no stream yet); the
  // RST_STREAM we submitted before cancels that request, so nghttp2 never
  // opens a stream with the stale pointer.
  nghttp2_session_set_stream_user_data(session_->nghttp2(), stream_id_, nullptr);
}

void Http2Stream::OnData(const uint8_t* data, size_t length) {
  uncredited_bytes_ += length;
  if (deframer_.error().ok()) {
    const size_t before = received_.size();
    Status status =
        deframer_.Feed(std::string_view(reinterpret_cast<const char*>(data), length), received_);
    for (size_t i = before; i < received_.size(); ++i) {
      received_bytes_ += received_[i].size() + kGrpcFrameHeaderSize;
    }
    if (received_.size() > before) read_cond_.NotifyAll();
    if (!status.ok()) deframer_.Abandon(status);  // nothing more of it is kept
    UpdateBuffered();
    if (!status.ok()) {
      ReturnCredit();
      OnReceiveError(std::move(status));
      return;
    }
  }
  ReturnCredit();
}

void Http2Stream::ReturnCredit() {
  if (uncredited_bytes_ == 0 || session_ == nullptr || stream_closed_ || stream_id_ <= 0) return;
  // Hold the window back while the stream holds a window's worth: the peer
  // then stops sending on it until the application catches up. Only a lone
  // message larger than the window may grow past it, and only while the
  // connection has room (see the header). After a deframing error the bytes
  // are dropped as they come, so credit flows.
  const size_t held = received_bytes_ + deframer_.partial_size();
  if (held >= session_->options().initial_stream_window_size && deframer_.error().ok()) {
    const bool lone_large_message = received_.empty() && deframer_.has_partial_message();
    if (!lone_large_message) return;  // the application's next read returns it
    if (session_->buffered_bytes() >= session_->options().max_buffered_bytes) {
      session_->WaitForConnectionCredit(this);
      return;
    }
  }
  nghttp2_session_consume_stream(session_->nghttp2(), stream_id_, uncredited_bytes_);
  uncredited_bytes_ = 0;
  session_->WakeWriter();
}

void Http2Stream::OnBatchWritten() {
  in_write_batch_ = false;
  written_total_ = pulled_total_;
  write_cond_.NotifyAll();
}

ssize_t Http2Stream::ReadSendData(uint8_t* buf, size_t length, uint32_t* data_flags) {
  const size_t pending = send_pending();
  if (pending == 0) {
    if (!send_ended_) return NGHTTP2_ERR_DEFERRED;
    OnSendEnd(data_flags);
    return 0;
  }
  const size_t n = std::min(length, pending);
  std::memcpy(buf, send_buffer_.data() + send_offset_, n);
  send_offset_ += n;
  pulled_total_ += n;
  if (session_ != nullptr && !std::exchange(in_write_batch_, true)) session_->NoteDataInBatch(this);
  if (send_offset_ == send_buffer_.size()) {
    send_buffer_.clear();
    send_offset_ = 0;
  } else if (send_offset_ >= kSendBufferHighWater && send_offset_ * 2 >= send_buffer_.size()) {
    // Keep a long-lived stream's buffer from growing without bound.
    send_buffer_.erase(0, send_offset_);
    send_offset_ = 0;
  }
  if (send_pending() <= kSendBufferHighWater) write_cond_.NotifyAll();
  if (send_pending() == 0 && send_ended_) OnSendEnd(data_flags);
  return static_cast<ssize_t>(n);
}

}  // namespace uxds::http2::detail
