// ByteStream: a connected, ordered byte stream (TCP, or TLS over TCP).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds {

class ByteStream {
 public:
  virtual ~ByteStream() = default;

  // Reads at least one and at most buf.size() bytes; 0 means the peer closed
  // its side. At most one Read() may be pending at a time, and it may run
  // concurrently with one Write().
  virtual Task<StatusOr<size_t>> Read(std::span<uint8_t> buf) = 0;
  // Writes all of `data` (or fails). At most one Write() pending at a time.
  virtual Task<Status> Write(std::span<const uint8_t> data) = 0;
  // Ends our sending side (TLS: close_notify, then TCP FIN) after pending data.
  virtual Task<Status> ShutdownWrite() = 0;
  // Cancels pending operations (they complete with CANCELLED) and closes the
  // connection. Idempotent; never suspends. The object must outlive the
  // completion of its pending operations.
  virtual void Close() = 0;

  // "127.0.0.1:443" style, for logs and error messages.
  virtual std::string PeerName() const = 0;
};

}  // namespace uxds
