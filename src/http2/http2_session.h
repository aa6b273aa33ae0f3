// Http2Session: one HTTP/2 connection on nghttp2, driven by coroutines.
//
// Three tasks per connection, all in the session's TaskGroup:
//   reader     ByteStream::Read -> nghttp2_session_mem_recv
//   writer     nghttp2_session_mem_send -> ByteStream::Write, woken on demand
//   keepalive  PING every keepalive_time (when enabled)
// nghttp2 callbacks run inside mem_recv / mem_send and only record state on
// the streams and wake waiters (AsyncCondition resumes on a later loop turn),
// so no application code ever runs inside nghttp2.
//
// Closing has two steps: BeginClose() fails every stream at once and queues
// GOAWAY; the writer flushes it and CloseNow() closes the transport and
// cancels the tasks. A linger timer bounds the flush for a peer that stopped
// reading. The owner then awaits JoinTasks().
#pragma once

#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http2/async_condition.h"
#include "http2/grpc_framing.h"
#include "http2/request_memory_budget.h"
#include "runtime/byte_stream.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2::detail {

class Http2Stream;

// Stream flow-control window we advertise: the most a peer may send on one
// stream before the application reads.
inline constexpr uint32_t kDefaultStreamWindowSize = 256 * 1024;
// SETTINGS_MAX_HEADER_LIST_SIZE we advertise and enforce (gRPC's hard limit
// on received metadata is 16 KiB by default).
inline constexpr uint32_t kDefaultMaxHeaderListSize = 16 * 1024;
// Received message bytes (complete and partial) that one connection may
// hold for its streams beyond each stream's window: room for a message up to
// the 4 MiB receive limit to complete while the application is reading.
inline constexpr size_t kDefaultMaxConnectionBufferedBytes = 16 * 1024 * 1024;
// How long a closing connection may take to flush its final frames.
inline constexpr std::chrono::milliseconds kCloseLinger{1000};

struct Http2SessionOptions {
  size_t max_receive_message_size = kDefaultMaxReceiveMessageSize;
  uint32_t initial_stream_window_size = kDefaultStreamWindowSize;
  uint32_t max_header_list_size = kDefaultMaxHeaderListSize;
  uint32_t max_concurrent_streams = 0;  // 0: not advertised (clients)
  size_t max_buffered_bytes = kDefaultMaxConnectionBufferedBytes;
  std::chrono::milliseconds keepalive_time{0};  // 0: no keepalive PINGs
  std::chrono::milliseconds keepalive_timeout{20000};
  // Server: the budget this connection shares with the server's others
  // (null: connection credit is returned as soon as bytes arrive).
  std::shared_ptr<RequestMemoryBudget> memory_budget;
};

class Http2Session : private RequestMemoryBudget::Member {
 public:
  enum class Role { kClient, kServer };

  Http2Session(Loop& loop, std::unique_ptr<ByteStream> transport, Role role,
               const Http2SessionOptions& options);
  // The tasks must have been joined (JoinTasks()).
  virtual ~Http2Session();
  Http2Session(const Http2Session&) = delete;
  Http2Session& operator=(const Http2Session&) = delete;

  // Creates the nghttp2 session, queues our SETTINGS and starts the tasks.
  Status Start();

  Loop& loop() const { return loop_; }
  nghttp2_session* nghttp2() const { return session_; }
  const Http2SessionOptions& options() const { return options_; }
  const std::string& peer() const { return peer_; }
  Role role() const { return role_; }

  // Received message bytes all streams hold for the application (complete
  // messages not yet read, and messages still arriving).
  size_t buffered_bytes() const { return buffered_bytes_; }

  // Makes the writer run mem_send again (after a submit or resume).
  void WakeWriter() {
    // Recorded, so a wake while the writer itself runs is not lost.
    writer_wake_pending_ = true;
    writer_cond_.NotifyAll();
  }

  // Starts closing: fails every stream with `reason`, queues GOAWAY with
  // `goaway_error_code` (unless GOAWAY handling already ended the session)
  // and closes once it is flushed. Idempotent: the first reason stays.
  void BeginClose(Status reason, uint32_t goaway_error_code);
  // Closes the transport now and cancels the tasks.
  void CloseNow(Status reason);
  bool closing() const { return closing_; }
  bool closed() const { return closed_; }
  // Why the connection closed (or is closing); OK while open.
  const Status& close_reason() const { return close_reason_; }
  Event& closed_event() { return closed_event_; }

  bool settings_received() const { return settings_received_; }
  bool goaway_received() const { return goaway_received_; }
  int32_t goaway_last_stream_id() const { return goaway_last_stream_id_; }
  uint64_t pings_acked() const { return pings_acked_; }
  // Notified when SETTINGS or GOAWAY arrive and when the session closes.
  AsyncCondition& state_changed() { return state_changed_; }

  // Waits for the peer's first SETTINGS frame, which proves it speaks HTTP/2:
  // OK; DEADLINE_EXCEEDED after `timeout`; the close reason if the
  // connection closes first; CANCELLED.
  Task<Status> WaitForPeerSettings(std::chrono::nanoseconds timeout);

  // Sends a PING and waits for its ACK: OK, DEADLINE_EXCEEDED after
  // `timeout`, UNAVAILABLE if the connection closes, CANCELLED.
  Task<Status> Ping(std::chrono::nanoseconds timeout);

  // The DATA source for a stream's request or response body: pulls from the
  // stream's outgoing buffer (Http2Stream::ReadSendData).
  static nghttp2_data_provider StreamDataProvider();

  // Spawns `task` into the session's group (cancelled when it closes).
  void SpawnTask(Task<void> task) { tasks_.Spawn(std::move(task)); }
  Task<void> JoinTasks() { co_await tasks_.Join(); }
  bool tasks_done() const { return tasks_.size() == 0; }

 protected:
  // Server: a request's HEADERS began on a new stream; returns the stream
  // object (owned by the subclass) or nullptr to refuse it.
  virtual Http2Stream* OnBeginRequest(int32_t stream_id);
  // Client: nghttp2 dropped a request before its HEADERS went out.
  virtual void OnRequestNotSent(int32_t stream_id, int lib_error_code);
  virtual void OnGoAwayReceived() {}
  // A stream closed (after its object was told).
  virtual void OnAnyStreamClosed() {}
  // Fail every live stream: the connection is gone. Called once.
  virtual void FailAllStreams(const Status& reason) = 0;
  // The reason reported when nghttp2 ends the session on its own terms
  // (GOAWAY exchanged, no streams left), e.g. "drained".
  void set_end_reason(Status reason) { end_reason_ = std::move(reason); }

 private:
  friend struct Http2SessionCallbacks;

  Task<void> ReadLoop();
  Task<void> WriteLoop();
  Task<void> KeepaliveLoop();
  Status SessionEndReason() const;
  void OnPingAck(const uint8_t opaque[8]);

  Loop& loop_;
  std::unique_ptr<ByteStream> transport_;
  const Role role_;
  const Http2SessionOptions options_;
  const std::string peer_;
  nghttp2_session* session_ = nullptr;
  TaskGroup tasks_;
  AsyncCondition writer_cond_;
  AsyncCondition state_changed_;
  AsyncCondition ping_cond_;
  Event closed_event_;
  Timer linger_timer_;

  bool closing_ = false;
  bool closed_ = false;
  Status close_reason_;
  bool settings_received_ = false;
  // Stream flow-control accounting (Http2Stream::UpdateBuffered): what
  // `stream` holds went from `before` to `after` bytes, of which its message
  // still arriving from `unfinished_before` to `unfinished_after`.
  friend class Http2Stream;
  void AdjustBuffered(Http2Stream* stream, size_t before, size_t after, size_t unfinished_before,
                      size_t unfinished_after);
  // With a memory budget (server): what this connection holds is charged to
  // it, and the connection credit its peer used is returned only while it
  // has room (see RequestMemoryBudget).
  void ChargeBudget();
  void ReturnOwedConnectionCredit();
  void ReleaseBudget();
  void OnBudgetRoom() override;
  size_t held_bytes() const override { return budget_held_; }
  size_t abandonable_bytes() const override { return buffered_bytes_; }
  void AbandonLargestCall(const Status& reason) override;
  bool budget_joined_ = false;
  bool writer_wake_pending_ = false;  // WakeWriter() since the writer last looked
  bool in_nghttp2_ = false;           // inside nghttp2_session_mem_recv or mem_send
  size_t budget_held_ = 0;            // charged to the budget
  size_t budget_unfinished_ = 0;
  size_t owed_connection_credit_ = 0;  // received, not yet returned
  size_t window_growth_ = 0;           // connection window beyond HTTP/2's initial one
  size_t used_since_window_growth_ = 0;
  size_t unfinished_bytes_ = 0;
  std::vector<Http2Stream*> holding_streams_;  // holding received bytes
  void WaitForConnectionCredit(Http2Stream* stream);
  void ForgetCreditWaiter(Http2Stream* stream);
  size_t buffered_bytes_ = 0;
  std::vector<Http2Stream*> credit_waiters_;
  // Streams whose DATA is in the batch being gathered or written; told once
  // the transport has taken the whole batch (Http2Stream::OnBatchWritten).
  void NoteDataInBatch(Http2Stream* stream) { batch_streams_.push_back(stream); }
  void ForgetBatchStream(Http2Stream* stream);
  std::vector<Http2Stream*> batch_streams_;
  bool goaway_received_ = false;
  int32_t goaway_last_stream_id_ = 0;
  uint32_t goaway_error_code_ = 0;
  std::string last_protocol_error_;
  Status end_reason_;
  uint64_t next_ping_id_ = 0;
  uint64_t pings_acked_ = 0;
  std::vector<uint64_t> pending_pings_;
};

}  // namespace uxds::http2::detail
