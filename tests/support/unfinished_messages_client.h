// The attacks the server's memory bounds are tested against, from a raw
// socket: a blocking nghttp2 client (on the caller's thread) that opens
// `streams` calls to `path` and sends on each, as far as the server's flow
// control allows, either one message declaring kDeclaredLength bytes that
// never gets its last byte (kUnfinished), or complete 16 KiB messages
// without end (kCompleteMessages: a handler that does not read holds them).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace uxds::testing {

class UnfinishedMessagesClient {
 public:
  static constexpr uint32_t kDeclaredLength = 4 * 1024 * 1024 - 64;  // under the 4 MiB limit

  static constexpr uint32_t kSmallMessageLength = 16 * 1024;
  enum class Body { kUnfinished, kCompleteMessages };

  explicit UnfinishedMessagesClient(std::string path, int streams = 100,
                                    Body body = Body::kUnfinished)
      : path_(std::move(path)),
        streams_(streams),
        body_(body),
        sent_per_stream_(2 * streams + 2, 0) {}
  ~UnfinishedMessagesClient();  // closes the socket
  UnfinishedMessagesClient(const UnfinishedMessagesClient&) = delete;
  UnfinishedMessagesClient& operator=(const UnfinishedMessagesClient&) = delete;

  // Connects to 127.0.0.1:`port` and sends until the server stops granting
  // credit for half a second or, with `stop`, until it is set (or the
  // connection ends). Returns false if it could not connect.
  bool Run(uint16_t port, const std::atomic<bool>* stop = nullptr);

  // Bytes of DATA the server's flow control let through.
  size_t data_sent() const { return data_sent_; }
  // Calls the server ended with grpc-status 8 (RESOURCE_EXHAUSTED); may be
  // read from another thread while Run() runs.
  int resource_exhausted() const { return resource_exhausted_.load(); }
  int streams() const { return streams_; }

 private:
  friend struct UnfinishedMessagesClientCallbacks;

  std::string path_;
  int streams_;
  Body body_;
  int fd_ = -1;
  size_t data_sent_ = 0;
  std::vector<size_t> sent_per_stream_;
  std::atomic<int> resource_exhausted_{0};
};

}  // namespace uxds::testing
