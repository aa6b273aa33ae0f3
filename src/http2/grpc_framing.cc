#include "http2/grpc_framing.h"

#include <algorithm>

namespace uxds::http2 {

Status AppendGrpcFrame(std::string& out, std::string_view message) {
  if (message.size() > kMaxGrpcFrameMessageSize) {
    return ResourceExhaustedError("message of " + std::to_string(message.size()) +
                                  " bytes exceeds the gRPC frame limit of " +
                                  std::to_string(kMaxGrpcFrameMessageSize) + " bytes");
  }
  const auto length = static_cast<uint32_t>(message.size());
  const char header[kGrpcFrameHeaderSize] = {
      0,  // Compressed-Flag: identity
      static_cast<char>(length >> 24),
      static_cast<char>(length >> 16),
      static_cast<char>(length >> 8),
      static_cast<char>(length),
  };
  out.reserve(out.size() + sizeof(header) + message.size());
  out.append(header, sizeof(header));
  out.append(message);
  return OkStatus();
}

void MessageQueue::clear() {
  constexpr size_t kKeptSlots = 16;
  if (messages_.capacity() > kKeptSlots) {
    std::vector<std::string>().swap(messages_);
  } else {
    messages_.clear();
  }
  head_ = 0;
}

std::string MessageQueue::pop_front() {
  std::string message = std::move(messages_[head_]);
  if (++head_ == messages_.size()) {
    clear();
  } else if (head_ >= 16 && head_ * 2 >= messages_.size()) {
    messages_.erase(messages_.begin(), messages_.begin() + static_cast<ptrdiff_t>(head_));
    head_ = 0;
  }
  return message;
}

Status GrpcDeframer::Feed(std::string_view data, MessageQueue& out) {
  if (!error_.ok()) return error_;
  while (!data.empty()) {
    if (header_filled_ < kGrpcFrameHeaderSize) {
      const size_t take = std::min(kGrpcFrameHeaderSize - header_filled_, data.size());
      std::copy_n(data.data(), take, header_ + header_filled_);
      header_filled_ += take;
      data.remove_prefix(take);
      if (header_filled_ < kGrpcFrameHeaderSize) break;

      const uint8_t flag = header_[0];
      body_length_ = (size_t{header_[1]} << 24) | (size_t{header_[2]} << 16) |
                     (size_t{header_[3]} << 8) | size_t{header_[4]};
      // PROTOCOL-HTTP2: "If the Message-Encoding header is omitted then the
      // Compressed-Flag must be 0"; we never negotiate an encoding.
      if (flag == 1) {
        error_ = InternalError("received a compressed message but no grpc-encoding was negotiated");
        return error_;
      }
      if (flag != 0) {
        error_ = InternalError("invalid Compressed-Flag " + std::to_string(flag) +
                               " in a gRPC message prefix");
        return error_;
      }
      if (body_length_ > max_message_size_) {
        // The wording gRPC C++ uses, so logs read the same across peers.
        error_ = ResourceExhaustedError("received message larger than max (" +
                                        std::to_string(body_length_) + " vs. " +
                                        std::to_string(max_message_size_) + ")");
        return error_;
      }
      // Nothing is reserved for the declared length: five bytes from a peer
      // must not make us allocate 4 MiB.
      body_received_ = 0;
      body_pieces_.clear();
    }
    const size_t take = std::min(body_length_ - body_received_, data.size());
    if (body_received_ == 0 && take == body_length_) {
      // The whole body is here (the common case): one allocation, exact.
      out.push_back(std::string(data.substr(0, take)));
      data.remove_prefix(take);
      header_filled_ = 0;
      body_length_ = 0;
      continue;
    }
    // Otherwise it is kept in pieces, each allocated for what has arrived
    // (at least kPieceSize, which later bytes then fill), and joined once
    // complete: held memory stays what has arrived (what the connection's
    // flow-control accounting counts), without a buffer grown by doubling
    // and the copies and freed blocks that leaves behind. The price is one
    // more copy of a message that spans several DATA frames.
    for (std::string_view bytes = data.substr(0, take); !bytes.empty();) {
      if (body_pieces_.empty() || body_pieces_.back().size() == body_pieces_.back().capacity()) {
        std::string piece;
        piece.reserve(std::min(body_length_ - body_received_, std::max(bytes.size(), kPieceSize)));
        pieces_capacity_ += piece.capacity();
        body_pieces_.push_back(std::move(piece));
      }
      std::string& piece = body_pieces_.back();
      const size_t n = std::min(bytes.size(), piece.capacity() - piece.size());
      piece.append(bytes.data(), n);
      body_received_ += n;
      bytes.remove_prefix(n);
    }
    data.remove_prefix(take);
    if (body_received_ == body_length_) {
      if (body_pieces_.size() == 1) {
        out.push_back(std::move(body_pieces_.front()));  // already its size
      } else {
        // Each piece is freed once copied, so the message and its pieces
        // overlap only while it is being joined.
        std::string message;
        message.reserve(body_length_);
        for (std::string& piece : body_pieces_) {
          message += piece;
          std::string().swap(piece);
        }
        out.push_back(std::move(message));
      }
      body_pieces_.clear();
      body_pieces_.shrink_to_fit();
      pieces_capacity_ = 0;
      body_received_ = 0;
      header_filled_ = 0;
      body_length_ = 0;
    }
  }
  return OkStatus();
}

void GrpcDeframer::Abandon(Status reason) {
  error_ = std::move(reason);
  header_filled_ = 0;
  body_length_ = 0;
  body_received_ = 0;
  std::vector<std::string>().swap(body_pieces_);
  pieces_capacity_ = 0;
}

}  // namespace uxds::http2
