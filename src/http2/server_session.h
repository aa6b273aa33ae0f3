// ServerSession: the server side of an HTTP/2 connection (internal to
// ServerConnection): validates requests, runs handlers, drains.
#pragma once

#include <chrono>
#include <memory>
#include <unordered_map>

#include "http2/http2_session.h"
#include "http2/server_options.h"
#include "http2/service_registry.h"
#include "runtime/block_cache.h"

namespace uxds::http2::detail {

// Drain: how long we wait for the PING that follows the first GOAWAY before
// sending the final one anyway.
inline constexpr std::chrono::milliseconds kDrainPingTimeout{1000};

class ServerSession final : public Http2Session {
 public:
  ServerSession(Loop& loop, std::unique_ptr<ByteStream> transport,
                std::shared_ptr<const ServiceRegistry> registry, const ServerOptions& options,
                ConnectionInfo connection_info);
  ~ServerSession() override;

  // Graceful drain (see ServerConnection::Drain). A call while draining
  // can only shorten the grace time.
  void Drain(std::chrono::milliseconds grace);
  // Closes the connection unless the client's preface and SETTINGS arrive
  // within the handshake timeout (a client that connects and stays silent).
  void WatchForPreface();
  // A9: drains the connection once it has been idle for
  // max_connection_idle, or once it is max_connection_age old (jittered).
  void ManageConnection();
  bool draining() const { return draining_; }
  const ConnectionInfo& connection_info() const { return connection_info_; }
  // Calls whose handler runs or whose stream is still open.
  size_t active_calls() const { return calls_.size(); }
  Task<void> JoinHandlers() { co_await handlers_.Join(); }

  // From Http2ServerCall.
  void OnRequestHeaders(Http2ServerCall* call);
  // Frees `call` once its handler is done and its stream closed.
  void MaybeRelease(Http2ServerCall* call);

 protected:
  Http2Stream* OnBeginRequest(int32_t stream_id) override;
  void FailAllStreams(const Status& reason) override;

 private:
  Task<void> RunHandler(Http2ServerCall* call, const Handler* handler);
  void StartDrain(std::chrono::milliseconds grace, Status reason);
  Task<void> DrainTask(std::chrono::milliseconds grace, Status reason);
  Task<void> PrefaceWatchdog();
  Task<void> ConnectionManager();

  const std::shared_ptr<const ServiceRegistry> registry_;
  const ServerOptions server_options_;
  const ConnectionInfo connection_info_;
  TaskGroup handlers_;
  // A node per call, made and freed with it: from the loop's block cache.
  using CallsByAddress =
      std::unordered_map<Http2ServerCall*, std::unique_ptr<Http2ServerCall>,
                         std::hash<Http2ServerCall*>, std::equal_to<Http2ServerCall*>,
                         uxds::detail::BlockAllocator<
                             std::pair<Http2ServerCall* const, std::unique_ptr<Http2ServerCall>>>>;
  CallsByAddress calls_;
  AsyncCondition calls_changed_;
  bool draining_ = false;
  // When calls still running are cancelled; moved earlier by a shorter
  // Drain() (calls_changed_ then wakes the drain to re-arm its timer).
  Loop::Clock::time_point drain_deadline_{};
  // Since when no call has been open (A9's idleness); meaningful while
  // calls_ is empty.
  Loop::Clock::time_point idle_since_;
};

}  // namespace uxds::http2::detail
