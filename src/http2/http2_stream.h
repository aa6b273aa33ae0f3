// Http2Stream: what client and server calls share about one HTTP/2 stream —
// the outgoing byte buffer that nghttp2 pulls DATA from, and the incoming
// gRPC messages with receive flow control.
//
// Flow control: automatic WINDOW_UPDATE is off. The connection window is
// returned as soon as bytes arrive (so one slow stream cannot stall the
// others), or, on a server with a memory budget, as soon as the budget has
// room (RequestMemoryBudget). A stream's window is returned only while the stream holds less
// than a window's worth of received bytes (complete messages not yet read
// plus the message still arriving), with one exception: a single message
// larger than the window, with nothing unread before it, keeps getting
// credit while the whole connection holds less than max_buffered_bytes. So
// one connection holds at most about streams x window + max_buffered_bytes,
// however many large messages its peer starts, and a reader that stops
// reading stops its peer after about one window.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http2/async_condition.h"
#include "http2/grpc_framing.h"
#include "runtime/block_cache.h"
#include "uxds/status.h"

namespace uxds::http2::detail {

class Http2Session;

// Write() returns once at most this many bytes of the stream are still
// waiting for nghttp2 (and so for the peer's flow-control window).
inline constexpr size_t kSendBufferHighWater = 64 * 1024;

class Http2Stream {
 public:
  Http2Stream(const Http2Stream&) = delete;
  Http2Stream& operator=(const Http2Stream&) = delete;

  // A stream is made and freed with every call, on its loop: from the
  // loop thread's block cache (the destructor is virtual, so a delete
  // through the base passes the whole object's size).
  static void* operator new(size_t size) { return uxds::detail::AllocateBlock(size); }
  static void operator delete(void* stream, size_t size) noexcept {
    uxds::detail::FreeBlock(stream, size);
  }

  int32_t stream_id() const { return stream_id_; }

 protected:
  Http2Stream(Http2Session* session, size_t max_receive_message_size);
  virtual ~Http2Stream();

  // --- Events from nghttp2 callbacks. Implementations record state and wake
  // waiters; they never run application code.
  virtual void OnHeader(uint8_t category, std::string_view name, std::string_view value) = 0;
  virtual void OnHeadersComplete(uint8_t category, bool end_stream) = 0;
  // END_STREAM on a DATA frame.
  virtual void OnDataEndStream() = 0;
  // The deframer rejected the incoming bytes (oversize, compressed).
  virtual void OnReceiveError(Status status) = 0;
  // nghttp2 closed the stream; `error_code` is the RST_STREAM code (0 for a
  // normal close). The object may be destroyed inside this call.
  virtual void OnStreamClose(uint32_t error_code) = 0;
  // The connection is gone; `session_` is about to be cleared.
  virtual void OnSessionClosed(const Status& reason) = 0;
  // The outgoing buffer is empty and EndSending() was called: sets the
  // DATA flags of the last frame (default: END_STREAM).
  virtual void OnSendEnd(uint32_t* data_flags);
  // A HEADERS frame with END_STREAM went out on this stream.
  virtual void OnFinalHeadersSent() {}

  // --- For subclasses.
  // Frames `message` into the outgoing buffer and lets nghttp2 pull it;
  // RESOURCE_EXHAUSTED (nothing queued) for a message too large to frame.
  Status QueueMessage(std::string_view message);
  // No more messages: END_STREAM (or trailers) once the buffer drains.
  void EndSending();
  size_t send_pending() const { return send_buffer_.size() - send_offset_; }
  // Bytes queued since the stream began, and how many of them the transport
  // has taken (written to the socket, or to TLS on its way there): equal
  // once the last queued message is on the wire. Until then it may be held
  // back by the peer's flow-control window or by MAX_CONCURRENT_STREAMS.
  uint64_t queued_total() const { return queued_total_; }
  uint64_t written_total() const { return written_total_; }
  void DiscardSendBuffer();

  bool has_received_message() const { return !received_.empty(); }
  // Takes the next complete message and returns its bytes to the stream's
  // flow-control window.
  std::string PopReceivedMessage();
  void DiscardReceived();
  // Frees the message still arriving, if any; every later byte is dropped
  // and `reason` is the deframer's error. True if there was one.
  bool DropPartialMessage(const Status& reason);
  size_t received_bytes() const { return received_bytes_; }
  // The session is going away from this stream: stop counting its bytes.
  void ForgetSession();

  // RST_STREAM with `error_code` if nghttp2 still has the stream open.
  void ResetStream(uint32_t error_code);
  // nghttp2 now holds a pointer to us as the stream's user data.
  void AttachToNghttp2(int32_t stream_id);
  // Clears the nghttp2 stream's pointer to us (before we go away, or when
  // the session closes and may still flush frames of this stream).
  void DetachFromNghttp2();
  // Called by the session's DATA source callback.
  ssize_t ReadSendData(uint8_t* buf, size_t length, uint32_t* data_flags);

  Loop& loop_;
  Http2Session* session_;  // null once the connection is gone
  int32_t stream_id_ = -1;
  bool stream_closed_ = false;  // nghttp2 closed the stream, or it never opened
  bool attached_ = false;       // nghttp2's stream user data points to us
  bool send_ended_ = false;     // EndSending() called
  GrpcDeframer deframer_;
  // Woken when a message or the end of the call arrives.
  AsyncCondition read_cond_;
  // Woken when the outgoing buffer drains below the high-water mark, when
  // queued bytes reach the wire, or when the stream ends.
  AsyncCondition write_cond_;

 private:
  friend class Http2Session;
  friend struct Http2SessionCallbacks;
  void OnData(const uint8_t* data, size_t length);
  // The transport took the batch holding every byte pulled so far.
  void OnBatchWritten();
  void ReturnCredit();
  // Tells the session how many received bytes this stream now holds.
  void UpdateBuffered();
  // The server's memory budget needs room: drops what the stream holds
  // (and every later byte) and ends the call with `reason`.
  void AbandonForMemory(Status reason);

  std::string send_buffer_;
  size_t send_offset_ = 0;
  uint64_t queued_total_ = 0;
  uint64_t pulled_total_ = 0;  // copied into DATA frames by nghttp2
  uint64_t written_total_ = 0;
  bool in_write_batch_ = false;
  MessageQueue received_;
  size_t received_bytes_ = 0;        // framed size of the messages in received_
  size_t uncredited_bytes_ = 0;      // received but not yet returned to the window
  size_t accounted_bytes_ = 0;       // what the session counts for this stream
  size_t accounted_unfinished_ = 0;  // of those, the message still arriving
  bool waiting_for_connection_credit_ = false;
};

}  // namespace uxds::http2::detail
