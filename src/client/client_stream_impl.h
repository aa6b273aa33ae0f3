// ClientStream::Impl: the HTTP/2 call a streaming pick started, what it
// owns until it ends (its subchannel, so that a config update that drops
// the endpoint does not end it, as a gRPC call holds its connected
// subchannel), and its claim on the cluster's max_requests (A32).
#pragma once

#include <memory>
#include <string>

#include "client/call_snapshot.h"
#include "http2/client_call.h"
#include "lb/call_counter.h"
#include "lb/subchannel.h"
#include "uxds/channel.h"
#include "uxds/client_channel.h"
#include "xds/lrs/load_stats.h"

namespace uxds {

struct ClientStream::Impl {
  Impl() = default;
  ~Impl() {
    call.reset();  // before the connection it runs on may go
    ReleaseCall(false);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Ends the call's A32 count and counts it in its locality's load report
  // (A42), once.
  void ReleaseCall(bool ok) {
    if (std::exchange(released, true)) return;
    CallFinished(call_end, ok);
    locality_stats.reset();
  }

  // Members in the order they must outlive each other.
  SubchannelPool::CallHold pool;
  SubchannelRef subchannel;
  // A call on another loop's connection: that loop's LoopChannel state
  // (which owns the connection) outlives the claim on it.
  std::shared_ptr<void> keep_alive;
  client_internal::LoopConnectionUse use;
  PickResult call_end;  // what ReleaseCall() reports
  bool released = false;
  // Keeps the locality call_end counts in alive until the call ends (null
  // when the cluster reports no load); its A32 counter lives while the
  // call is counted in it.
  std::shared_ptr<LocalityLoadStats> locality_stats;
  std::string peer;
  std::unique_ptr<http2::ClientCall> call;
};

}  // namespace uxds
