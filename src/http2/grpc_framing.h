// gRPC length-prefixed message framing (PROTOCOL-HTTP2: Length-Prefixed-Message).
//
//   Compressed-Flag (1 byte, 0 or 1) | Message-Length (4 bytes, big endian) | Message
//
// uxds negotiates no message compression: it never sends grpc-encoding, so a
// received message with the Compressed-Flag set is a protocol error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/status.h"

namespace uxds::http2 {

inline constexpr size_t kGrpcFrameHeaderSize = 5;
// gRPC's default limit on a received message (GRPC_DEFAULT_MAX_RECV_MESSAGE_LENGTH).
inline constexpr size_t kDefaultMaxReceiveMessageSize = 4 << 20;

// The largest message the 4-byte Message-Length can carry.
inline constexpr size_t kMaxGrpcFrameMessageSize = UINT32_MAX;

// Appends the 5-byte prefix and `message` to `out` (uncompressed).
// RESOURCE_EXHAUSTED, with `out` unchanged, for a message over
// kMaxGrpcFrameMessageSize.
Status AppendGrpcFrame(std::string& out, std::string_view message);

// Received messages in arrival order: a vector and the index of its
// front. Unlike a std::deque, which allocates its map and a block when it
// is made (twice per call), an empty queue holds no memory, and a call's
// one message costs one small allocation. Consumed slots are dropped
// once they are over half of the vector, so a stream read one message
// behind its writer stays bounded.
class MessageQueue {
 public:
  bool empty() const { return head_ == messages_.size(); }
  size_t size() const { return messages_.size() - head_; }
  std::string& operator[](size_t i) { return messages_[head_ + i]; }
  std::string& front() { return messages_[head_]; }
  void push_back(std::string message) { messages_.push_back(std::move(message)); }
  // Takes the front message out.
  std::string pop_front();
  // Empties the queue; a vector grown past a few slots (a burst of small
  // messages) is freed rather than kept for the stream's lifetime.
  void clear();
  // Consumed and unconsumed slots held (for tests).
  size_t slots() const { return messages_.size(); }
  size_t capacity() const { return messages_.capacity(); }

 private:
  std::vector<std::string> messages_;
  size_t head_ = 0;
};

// Splits a byte stream (DATA frame payloads, cut anywhere) into messages.
//
// Feed() appends every completed message to `out`. The first framing error
// (oversize message: RESOURCE_EXHAUSTED; compressed or invalid flag:
// INTERNAL) is returned, and is returned again by every later Feed(): the
// stream it came from is unusable.
class GrpcDeframer {
 public:
  explicit GrpcDeframer(size_t max_message_size = kDefaultMaxReceiveMessageSize)
      : max_message_size_(max_message_size) {}

  Status Feed(std::string_view data, MessageQueue& out);
  // A message that arrives in several pieces is kept in pieces of at least
  // this size (or its rest), then joined once complete (see Feed).
  static constexpr size_t kPieceSize = 4 * 1024;

  // True while a message has been started but not completed: at end of
  // stream that is a truncated message.
  bool has_partial_message() const { return header_filled_ > 0; }
  // Bytes of the message still arriving (prefix included).
  size_t partial_size() const { return header_filled_ + body_received_; }
  // What the message still arriving holds in memory: its prefix and the
  // capacity of its pieces (a piece is allocated ahead of the bytes that
  // fill it).
  size_t partial_capacity() const { return header_filled_ + pieces_capacity_; }
  const Status& error() const { return error_; }
  // Drops the message still arriving and makes `reason` the error every
  // later Feed() returns.
  void Abandon(Status reason);
  size_t max_message_size() const { return max_message_size_; }

 private:
  size_t max_message_size_;
  Status error_;
  uint8_t header_[kGrpcFrameHeaderSize] = {};
  size_t header_filled_ = 0;  // 0..5; 5 while the body is being collected
  size_t body_length_ = 0;
  size_t body_received_ = 0;
  std::vector<std::string> body_pieces_;
  size_t pieces_capacity_ = 0;
};

}  // namespace uxds::http2
