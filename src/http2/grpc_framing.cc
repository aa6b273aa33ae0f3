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

Status GrpcDeframer::Feed(std::string_view data, std::deque<std::string>& out) {
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
      // Nothing reserved for the declared length: five bytes from a peer
      // must not make us allocate 4 MiB. The body grows as bytes arrive.
      body_.clear();
    }
    const size_t take = std::min(body_length_ - body_.size(), data.size());
    if (body_.size() < kReserveDeclaredLengthAfter &&
        body_.size() + take >= kReserveDeclaredLengthAfter) {
      // Grown by doubling, a 10 MB message is copied again and again, each
      // time into fresh pages and in one go: tens of milliseconds on the
      // loop for the last copies. Once the peer has really sent this much,
      // the rest of the declared length is reserved, so the message is
      // copied once more (at this size) and never again; the reserved
      // memory stays virtual until bytes fill it.
      body_.reserve(body_length_);
    }
    body_.append(data.data(), take);
    data.remove_prefix(take);
    if (body_.size() == body_length_) {
      out.push_back(std::move(body_));
      body_ = std::string();
      header_filled_ = 0;
      body_length_ = 0;
    }
  }
  return OkStatus();
}

}  // namespace uxds::http2
