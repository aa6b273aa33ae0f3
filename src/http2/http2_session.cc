#include "http2/http2_session.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "http2/http2_stream.h"
#include "runtime/block_cache.h"

namespace uxds::http2::detail {
namespace {

// nghttp2's per-stream state (streams, header copies, outbound frames) is
// made and freed with every call: from the loop thread's block cache.
void* SessionMalloc(size_t size, void* /*user_data*/) { return uxds::detail::CachedMalloc(size); }
void SessionFree(void* block, void* /*user_data*/) { uxds::detail::CachedFree(block); }
void* SessionCalloc(size_t count, size_t size, void* /*user_data*/) {
  return uxds::detail::CachedCalloc(count, size);
}
void* SessionRealloc(void* block, size_t size, void* /*user_data*/) {
  return uxds::detail::CachedRealloc(block, size);
}
nghttp2_mem kSessionMemory = {nullptr, SessionMalloc, SessionFree, SessionCalloc, SessionRealloc};

constexpr size_t kReadBufferSize = 32 * 1024;
// mem_send output is gathered up to this size before one transport write.
constexpr size_t kWriteBatchSize = 64 * 1024;
// Without a memory budget we return connection-level credit as soon as
// bytes arrive, so this only has to cover the bandwidth-delay product. With
// one, a connection's window grows to this as its peer fills it.
constexpr int32_t kConnectionWindowSize = 16 * 1024 * 1024;
// HTTP/2's initial connection window: credit a peer has before any
// WINDOW_UPDATE, which the memory budget leaves free of charge.
constexpr size_t kFreeConnectionCredit = NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE;

std::string_view View(const uint8_t* data, size_t length) {
  return std::string_view(reinterpret_cast<const char*>(data), length);
}

}  // namespace

// nghttp2's C callbacks, with access to the session's and streams' insides.
struct Http2SessionCallbacks {
  static Http2Session* Self(void* user_data) { return static_cast<Http2Session*>(user_data); }
  static Http2Stream* StreamOf(nghttp2_session* session, int32_t stream_id) {
    return static_cast<Http2Stream*>(nghttp2_session_get_stream_user_data(session, stream_id));
  }

  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      return 0;
    }
    Http2Stream* stream = Self(user_data)->OnBeginRequest(frame->hd.stream_id);
    if (stream == nullptr) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, stream);
    stream->AttachToNghttp2(frame->hd.stream_id);
    return 0;
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_length, const uint8_t* value, size_t value_length,
                      uint8_t /*flags*/, void* /*user_data*/) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    if (Http2Stream* stream = StreamOf(session, frame->hd.stream_id)) {
      stream->OnHeader(frame->headers.cat, View(name, name_length), View(value, value_length));
    }
    return 0;
  }

  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    Http2Session* self = Self(user_data);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
        if (Http2Stream* stream = StreamOf(session, frame->hd.stream_id)) {
          stream->OnHeadersComplete(frame->headers.cat,
                                    (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0);
        }
        break;
      case NGHTTP2_DATA:
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
          if (Http2Stream* stream = StreamOf(session, frame->hd.stream_id)) {
            stream->OnDataEndStream();
          }
        }
        break;
      case NGHTTP2_SETTINGS:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0 && !self->settings_received_) {
          self->settings_received_ = true;
          self->state_changed_.NotifyAll();
        }
        break;
      case NGHTTP2_PING:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) != 0) self->OnPingAck(frame->ping.opaque_data);
        break;
      case NGHTTP2_GOAWAY:
        self->goaway_received_ = true;
        self->goaway_last_stream_id_ = frame->goaway.last_stream_id;
        self->goaway_error_code_ = frame->goaway.error_code;
        self->OnGoAwayReceived();
        self->state_changed_.NotifyAll();
        break;
      default:
        break;
    }
    return 0;
  }

  static int OnDataChunkRecv(nghttp2_session* session, uint8_t /*flags*/, int32_t stream_id,
                             const uint8_t* data, size_t length, void* user_data) {
    // Without a memory budget connection credit goes back at once: only
    // stream windows push back. With one, the read loop returns it once
    // mem_recv is done, if the budget has room.
    if (Http2Session* self = Self(user_data); self->budget_joined_) {
      self->owed_connection_credit_ += length;
    } else {
      nghttp2_session_consume_connection(session, length);
    }
    if (Http2Stream* stream = StreamOf(session, stream_id)) {
      stream->OnData(data, length);
    } else {
      nghttp2_session_consume_stream(session, stream_id, length);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                           void* user_data) {
    if (Http2Stream* stream = StreamOf(session, stream_id)) {
      nghttp2_session_set_stream_user_data(session, stream_id, nullptr);
      stream->attached_ = false;
      stream->stream_closed_ = true;
      stream->write_cond_.NotifyAll();
      stream->OnStreamClose(error_code);  // may destroy the stream
    }
    Self(user_data)->OnAnyStreamClosed();
    return 0;
  }

  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame,
                         void* /*user_data*/) {
    if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      if (Http2Stream* stream = StreamOf(session, frame->hd.stream_id)) {
        stream->OnFinalHeadersSent();
      }
    }
    return 0;
  }

  static int OnFrameNotSend(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                            int lib_error_code, void* user_data) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      Self(user_data)->OnRequestNotSent(frame->hd.stream_id, lib_error_code);
    }
    return 0;
  }

  static int OnError(nghttp2_session* /*session*/, int /*lib_error_code*/, const char* message,
                     size_t length, void* user_data) {
    Self(user_data)->last_protocol_error_.assign(message, length);
    return 0;
  }

  static ssize_t ReadData(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* data_flags, nghttp2_data_source* /*source*/,
                          void* /*user_data*/) {
    Http2Stream* stream = StreamOf(session, stream_id);
    // A stream whose owner went away: it is being reset anyway.
    if (stream == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return stream->ReadSendData(buf, length, data_flags);
  }
};

Http2Session::Http2Session(Loop& loop, std::unique_ptr<ByteStream> transport, Role role,
                           const Http2SessionOptions& options)
    : loop_(loop),
      transport_(std::move(transport)),
      role_(role),
      options_(options),
      peer_(transport_->PeerName()),
      tasks_(loop),
      writer_cond_(loop),
      state_changed_(loop),
      ping_cond_(loop),
      closed_event_(loop),
      linger_timer_(loop) {}

Http2Session::~Http2Session() {
  ReleaseBudget();
  linger_timer_.Cancel();
  if (session_ != nullptr) nghttp2_session_del(session_);
}

nghttp2_data_provider Http2Session::StreamDataProvider() {
  nghttp2_data_provider provider{};
  provider.source.ptr = nullptr;
  provider.read_callback = &Http2SessionCallbacks::ReadData;
  return provider;
}

void Http2Session::AdjustBuffered(Http2Stream* stream, size_t before, size_t after,
                                  size_t unfinished_before, size_t unfinished_after) {
  buffered_bytes_ = buffered_bytes_ - before + after;
  unfinished_bytes_ = unfinished_bytes_ - unfinished_before + unfinished_after;
  if (before == 0 && after > 0) {
    holding_streams_.push_back(stream);
  } else if (before > 0 && after == 0) {
    std::erase(holding_streams_, stream);
  }
  ChargeBudget();
  // Held bytes went down (a handler read): this connection may be back
  // under its share with credit owed. The writer returns it after its next
  // mem_send, outside nghttp2's callbacks.
  if (after < before && owed_connection_credit_ > 0) WakeWriter();
  if (after >= before || credit_waiters_.empty() ||
      buffered_bytes_ >= options_.max_buffered_bytes) {
    return;
  }
  // Room again: streams that held their credit back for the connection's
  // sake may take it now (each waits again if it still must).
  std::vector<Http2Stream*> waiters;
  waiters.swap(credit_waiters_);
  for (Http2Stream* stream : waiters) {
    stream->waiting_for_connection_credit_ = false;
    stream->ReturnCredit();
  }
}

void Http2Session::ChargeBudget() {
  if (!budget_joined_) return;
  // What the peer can make us hold: what the streams hold, plus the credit
  // it has been promised beyond HTTP/2's initial (free) window: the window,
  // less what it sent that we have not returned yet.
  const size_t unused_credit =
      window_growth_ > owed_connection_credit_ ? window_growth_ - owed_connection_credit_ : 0;
  const size_t held_before = std::exchange(budget_held_, buffered_bytes_ + unused_credit);
  const size_t unfinished_before = std::exchange(budget_unfinished_, unfinished_bytes_);
  // May tell waiters (this session among them) that there is room.
  options_.memory_budget->Recharge(held_before, budget_held_, unfinished_before,
                                   budget_unfinished_);
}

void Http2Session::ReturnOwedConnectionCredit() {
  if (!budget_joined_ || closed_ || session_ == nullptr) return;
  RequestMemoryBudget& budget = *options_.memory_budget;
  if (owed_connection_credit_ == 0) {
    budget.ForgetWaiter(this);
    return;
  }
  ChargeBudget();  // bytes for no stream (closed, unknown) changed the charge too
  // Over the limit: end the largest call of whoever holds the most beyond
  // its share (ours, maybe). That may tell waiters, us among them.
  if (!budget.has_room()) budget.MakeRoom();
  if (owed_connection_credit_ == 0) return;  // returned while room was made
  // All the credit goes back while the budget has room or this connection
  // holds less than its share; else it waits for room. All or nothing:
  // nghttp2 sends a WINDOW_UPDATE once half the window is consumed, which
  // returning everything the peer sent always reaches before the peer runs
  // out, and a part might not.
  if (!budget.has_room() && budget_held_ >= budget.fair_share()) {
    budget.WaitForRoom(this);  // told once there is room
    return;
  }
  budget.ForgetWaiter(this);
  const size_t returned = std::exchange(owed_connection_credit_, 0);
  nghttp2_session_consume_connection(session_, returned);
  ChargeBudget();  // the credit given back is promised memory
  // The peer has filled a whole window since it last grew: grow it (double,
  // up to kConnectionWindowSize) if the budget allows, so one connection's
  // throughput is not capped at 64 KiB per round trip.
  used_since_window_growth_ += returned;
  const size_t window = kFreeConnectionCredit + window_growth_;
  if (used_since_window_growth_ >= window && window < size_t{kConnectionWindowSize}) {
    const size_t more = std::min(window, size_t{kConnectionWindowSize} - window);
    if (budget.TryGrowWindow(more)) {
      if (nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                                static_cast<int32_t>(window + more)) == 0) {
        window_growth_ += more;
        used_since_window_growth_ = 0;
        ChargeBudget();  // the new credit is promised memory
      } else {
        budget.ReleaseGrowth(more);
      }
    }
  }
  WakeWriter();
}

void Http2Session::OnBudgetRoom() {
  // Inside nghttp2 (mem_recv or mem_send) the read or write loop returns
  // credit once it is out.
  if (!in_nghttp2_) ReturnOwedConnectionCredit();
}

void Http2Session::AbandonLargestCall(const Status& reason) {
  Http2Stream* largest = nullptr;
  for (Http2Stream* stream : holding_streams_) {
    if (largest == nullptr || stream->accounted_bytes_ > largest->accounted_bytes_) {
      largest = stream;
    }
  }
  if (largest != nullptr) largest->AbandonForMemory(reason);
}

void Http2Session::ReleaseBudget() {
  if (!std::exchange(budget_joined_, false)) return;
  RequestMemoryBudget& budget = *options_.memory_budget;
  budget.ForgetWaiter(this);
  budget.Recharge(std::exchange(budget_held_, 0), 0, std::exchange(budget_unfinished_, 0), 0);
  budget.ReleaseGrowth(std::exchange(window_growth_, 0));
  budget.Leave(this);  // last: it tells the waiters that their shares grew
}

void Http2Session::WaitForConnectionCredit(Http2Stream* stream) {
  if (stream->waiting_for_connection_credit_) return;
  stream->waiting_for_connection_credit_ = true;
  credit_waiters_.push_back(stream);
}

void Http2Session::ForgetCreditWaiter(Http2Stream* stream) {
  if (!stream->waiting_for_connection_credit_) return;
  stream->waiting_for_connection_credit_ = false;
  std::erase(credit_waiters_, stream);
}

Status Http2Session::Start() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) {
    return InternalError("nghttp2_session_callbacks_new: out of memory");
  }
  using C = Http2SessionCallbacks;
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, &C::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &C::OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &C::OnFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &C::OnDataChunkRecv);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &C::OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &C::OnFrameSend);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, &C::OnFrameNotSend);
  nghttp2_session_callbacks_set_error_callback2(callbacks, &C::OnError);

  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) {
    nghttp2_session_callbacks_del(callbacks);
    return InternalError("nghttp2_option_new: out of memory");
  }
  // We return window credit ourselves, as the application reads.
  nghttp2_option_set_no_auto_window_update(option, 1);
  // PROTOCOL-HTTP2: a value with leading or trailing whitespace "may be
  // stripped"; it must not fail the call.
  nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation(option, 1);

  const int rv =
      role_ == Role::kClient
          ? nghttp2_session_client_new3(&session_, callbacks, this, option, &kSessionMemory)
          : nghttp2_session_server_new3(&session_, callbacks, this, option, &kSessionMemory);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) return InternalError(std::string("nghttp2 session: ") + nghttp2_strerror(rv));

  std::vector<nghttp2_settings_entry> settings = {
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, options_.initial_stream_window_size},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, options_.max_header_list_size},
  };
  if (role_ == Role::kClient) settings.push_back({NGHTTP2_SETTINGS_ENABLE_PUSH, 0});
  if (options_.max_concurrent_streams > 0) {
    settings.push_back({NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams});
  }
  int err = nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
  if (err == 0 && options_.memory_budget == nullptr) {
    err = nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                                kConnectionWindowSize);
  }
  if (err != 0) return InternalError(std::string("nghttp2 SETTINGS: ") + nghttp2_strerror(err));
  if (options_.memory_budget != nullptr) {
    // No credit ahead: the peer starts with HTTP/2's initial window.
    options_.memory_budget->Join(this);
    budget_joined_ = true;
  }

  tasks_.Spawn(ReadLoop());
  tasks_.Spawn(WriteLoop());
  if (options_.keepalive_time.count() > 0) tasks_.Spawn(KeepaliveLoop());
  return OkStatus();
}

void Http2Session::BeginClose(Status reason, uint32_t goaway_error_code) {
  if (closing_) return;
  closing_ = true;
  close_reason_ = std::move(reason);
  if (session_ != nullptr) nghttp2_session_terminate_session(session_, goaway_error_code);
  FailAllStreams(close_reason_);
  state_changed_.NotifyAll();
  ping_cond_.NotifyAll();
  linger_timer_.Start(kCloseLinger, [this] { CloseNow(close_reason_); });
  WakeWriter();
}

void Http2Session::CloseNow(Status reason) {
  if (closed_) return;
  closed_ = true;
  if (!closing_) {
    closing_ = true;
    close_reason_ = std::move(reason);
    FailAllStreams(close_reason_);
  }
  linger_timer_.Cancel();
  ReleaseBudget();
  transport_->Close();
  tasks_.Cancel();
  state_changed_.NotifyAll();
  ping_cond_.NotifyAll();
  closed_event_.Set();
}

Status Http2Session::SessionEndReason() const {
  if (closing_) return close_reason_;
  if (!end_reason_.ok()) return end_reason_;
  if (goaway_received_) {
    return UnavailableError("connection to " + peer_ + " ended after GOAWAY (error code " +
                            std::to_string(goaway_error_code_) + ")");
  }
  if (!last_protocol_error_.empty()) {
    return UnavailableError("HTTP/2 protocol error on the connection with " + peer_ + ": " +
                            last_protocol_error_);
  }
  return UnavailableError("connection to " + peer_ + " closed");
}

Task<void> Http2Session::ReadLoop() {
  std::unique_ptr<uint8_t[]> buffer(new uint8_t[kReadBufferSize]);
  while (!closed_) {
    StatusOr<size_t> n = co_await transport_->Read(std::span(buffer.get(), kReadBufferSize));
    if (closed_) co_return;
    if (!n.ok()) {
      CloseNow(UnavailableError("read from " + peer_ + " failed: " + n.status().message()));
      co_return;
    }
    if (*n == 0) {
      Status reason = UnavailableError("connection closed by " + peer_);
      if (closing_ || goaway_received_ || !end_reason_.ok()) reason = SessionEndReason();
      CloseNow(std::move(reason));
      co_return;
    }
    in_nghttp2_ = true;
    const ssize_t rv = nghttp2_session_mem_recv(session_, buffer.get(), *n);
    in_nghttp2_ = false;
    if (closed_) co_return;
    if (rv < 0) {
      std::string what = nghttp2_strerror(static_cast<int>(rv));
      if (!last_protocol_error_.empty()) what += " (" + last_protocol_error_ + ")";
      // nghttp2 has not always queued a GOAWAY for this (e.g. a bad preface).
      BeginClose(UnavailableError("HTTP/2 protocol error from " + peer_ + ": " + what),
                 NGHTTP2_PROTOCOL_ERROR);
      co_return;
    }
    ReturnOwedConnectionCredit();
    WakeWriter();
  }
}

void Http2Session::ForgetBatchStream(Http2Stream* stream) { std::erase(batch_streams_, stream); }

Task<void> Http2Session::WriteLoop() {
  std::string batch;
  while (!closed_) {
    batch.clear();
    writer_wake_pending_ = false;
    // Credit owed and now returnable (room, or this connection's own
    // handlers read): its WINDOW_UPDATE goes out in this batch.
    if (owed_connection_credit_ > 0) ReturnOwedConnectionCredit();
    while (batch.size() < kWriteBatchSize) {
      const uint8_t* data = nullptr;
      in_nghttp2_ = true;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      in_nghttp2_ = false;
      if (n < 0) {
        CloseNow(InternalError(std::string("HTTP/2 send failed: ") +
                               nghttp2_strerror(static_cast<int>(n))));
        co_return;
      }
      if (n == 0) break;
      batch.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (closed_) co_return;
    if (!batch.empty()) {
      Status status = co_await transport_->Write(
          std::span(reinterpret_cast<const uint8_t*>(batch.data()), batch.size()));
      if (closed_) co_return;
      if (!status.ok()) {
        CloseNow(UnavailableError("write to " + peer_ + " failed: " + status.message()));
        co_return;
      }
      for (Http2Stream* stream : std::exchange(batch_streams_, {})) stream->OnBatchWritten();
      continue;
    }
    if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
      // Every frame is out and nghttp2 expects nothing more: GOAWAY was
      // exchanged and no stream is left, or the session was terminated.
      const Status reason = SessionEndReason();
      if (!linger_timer_.pending())
        linger_timer_.Start(kCloseLinger, [this, reason] { CloseNow(reason); });
      (void)co_await transport_->ShutdownWrite();  // TLS close_notify, TCP FIN
      CloseNow(reason);
      co_return;
    }
    // Woken while running (a WINDOW_UPDATE queued after mem_send): go again.
    if (writer_wake_pending_) continue;
    const Status awaited = co_await writer_cond_.Wait();
    if (!awaited.ok()) co_return;
  }
}

Task<void> Http2Session::KeepaliveLoop() {
  while (!closing_) {
    const Status awaited = co_await SleepFor(loop_, options_.keepalive_time);
    if (!awaited.ok()) co_return;
    if (closing_) co_return;
    Status status = co_await Ping(options_.keepalive_timeout);
    if (closing_ || status.code() == StatusCode::kCancelled) co_return;
    if (!status.ok()) {
      // PROTOCOL-HTTP2: an expired client PING closes every call UNAVAILABLE.
      CloseNow(UnavailableError("keepalive: " + peer_ + " did not acknowledge a PING within " +
                                std::to_string(options_.keepalive_timeout.count()) + " ms"));
      co_return;
    }
  }
}

Task<Status> Http2Session::WaitForPeerSettings(std::chrono::nanoseconds timeout) {
  bool timed_out = false;
  Timer timer(loop_);
  timer.Start(timeout, [this, &timed_out] {
    timed_out = true;
    state_changed_.NotifyAll();
  });
  Status waited;
  while (!settings_received_ && !closing_ && !timed_out && waited.ok()) {
    waited = co_await state_changed_.Wait();
  }
  timer.Cancel();
  if (!waited.ok()) co_return waited;
  if (closing_) co_return close_reason_;
  if (!settings_received_) {
    co_return DeadlineExceededError("no HTTP/2 SETTINGS from " + peer_ + " within " +
                                    std::to_string(timeout.count() / 1000000) + " ms");
  }
  co_return OkStatus();
}

Task<Status> Http2Session::Ping(std::chrono::nanoseconds timeout) {
  if (closing_) co_return UnavailableError("connection is closed: " + close_reason_.message());
  const uint64_t id = ++next_ping_id_;
  uint8_t opaque[8];
  std::memcpy(opaque, &id, sizeof opaque);
  if (nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, opaque) != 0) {
    co_return InternalError("nghttp2_submit_ping failed");
  }
  pending_pings_.push_back(id);
  WakeWriter();
  auto is_pending = [this, id] {
    return std::find(pending_pings_.begin(), pending_pings_.end(), id) != pending_pings_.end();
  };
  bool timed_out = false;
  Timer timer(loop_);
  timer.Start(timeout, [this, &timed_out] {
    timed_out = true;
    ping_cond_.NotifyAll();
  });
  Status waited;
  while (is_pending() && !timed_out && !closing_ && waited.ok())
    waited = co_await ping_cond_.Wait();
  const bool acked = !is_pending();
  std::erase(pending_pings_, id);
  if (acked) co_return OkStatus();
  if (!waited.ok()) co_return waited;
  if (closing_) co_return UnavailableError("connection closed: " + close_reason_.message());
  co_return DeadlineExceededError("PING to " + peer_ + " not acknowledged within " +
                                  std::to_string(timeout.count() / 1000000) + " ms");
}

void Http2Session::OnPingAck(const uint8_t opaque[8]) {
  uint64_t id = 0;
  std::memcpy(&id, opaque, sizeof id);
  auto it = std::find(pending_pings_.begin(), pending_pings_.end(), id);
  if (it == pending_pings_.end()) return;
  pending_pings_.erase(it);
  ++pings_acked_;
  ping_cond_.NotifyAll();
}

Http2Stream* Http2Session::OnBeginRequest(int32_t /*stream_id*/) { return nullptr; }

void Http2Session::OnRequestNotSent(int32_t /*stream_id*/, int /*lib_error_code*/) {}

}  // namespace uxds::http2::detail
