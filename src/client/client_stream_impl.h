// ClientStream::Impl: the HTTP/2 call a streaming pick started, what it
// owns until it ends (its subchannel, so that a config update that drops
// the endpoint does not end it, as a gRPC call holds its connected
// subchannel), and its claim on the cluster's max_requests (A32).
#pragma once

#include <memory>
#include <string>

#include "http2/client_call.h"
#include "lb/call_counter.h"
#include "lb/subchannel.h"
#include "uxds/channel.h"
#include "uxds/client_channel.h"

namespace uxds {

struct ClientStream::Impl {
  Impl() = default;
  ~Impl() {
    call.reset();  // before the connection it runs on may go
    ReleaseCounter();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void ReleaseCounter() {
    if (counter != nullptr) CallEnded(std::exchange(counter, nullptr).get());
  }

  // Members in the order they must outlive each other.
  std::shared_ptr<SubchannelPool> pool;
  SubchannelRef subchannel;
  // Null once released (or when the cluster counts no calls).
  std::shared_ptr<CallCounter> counter;
  std::string peer;
  std::unique_ptr<http2::ClientCall> call;
};

}  // namespace uxds
