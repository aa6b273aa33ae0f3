// ClientStream::Impl: the HTTP/2 call a streaming pick started, and the
// pick's claim on its cluster's max_requests (A32) until the call ends.
#pragma once

#include <memory>
#include <string>

#include "http2/client_call.h"
#include "uxds/channel.h"
#include "uxds/client_channel.h"

namespace uxds {

struct ClientStream::Impl {
  Impl(std::unique_ptr<http2::ClientCall> call, std::string peer, CallCounter* counter)
      : call(std::move(call)), peer(std::move(peer)), counter(counter) {}
  ~Impl() { ReleaseCounter(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void ReleaseCounter() {
    if (counter != nullptr) CallEnded(std::exchange(counter, nullptr));
  }

  std::unique_ptr<http2::ClientCall> call;
  const std::string peer;
  CallCounter* counter;
};

}  // namespace uxds
