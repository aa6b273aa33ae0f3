// Options of a gRPC server connection (and of Server, which applies them to
// every connection it accepts).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "http2/connection_quota.h"
#include "http2/grpc_framing.h"
#include "http2/http2_session.h"
#include "http2/request_memory_budget.h"
#include "tls/tls_context.h"

namespace uxds::http2 {

// A duration option at or above this is infinite (gRPC's "infinity"): a
// drain grace of kNoTimeLimit lets calls in flight run to their end.
inline constexpr std::chrono::milliseconds kNoTimeLimit = std::chrono::milliseconds::max();
// A9 has max_connection_idle infinite by default; ours reclaims the slot
// (max_connections) of a connection that has had no call for 5 minutes:
// otherwise clients that connect and stay silent after SETTINGS hold every
// slot for good and new clients are refused. A gRPC client goes away
// gracefully on the GOAWAY and reconnects when it next has a call, so an
// idle client pays one reconnection per 5 minutes at most.
inline constexpr std::chrono::milliseconds kDefaultMaxConnectionIdle{300'000};

struct ServerOptions {
  // Server: TLS on every accepted connection when set. (ServerConnection
  // takes an already secured transport and ignores this.)
  std::shared_ptr<TlsServerContext> tls;
  // Bounds the TLS handshake (Server) and the wait for the client's HTTP/2
  // preface and SETTINGS (every connection).
  std::chrono::milliseconds handshake_timeout{10000};
  // A larger request message fails its call with RESOURCE_EXHAUSTED.
  size_t max_receive_message_size = kDefaultMaxReceiveMessageSize;
  // Server-initiated PINGs (0: none); an unanswered one closes the
  // connection, cancelling its calls.
  std::chrono::milliseconds keepalive_time{0};
  std::chrono::milliseconds keepalive_timeout{20000};
  // SETTINGS_MAX_CONCURRENT_STREAMS (grpc-go's default). With the stream
  // window it bounds what one connection can make us buffer:
  // max_concurrent_streams x initial_stream_window_size + max_buffered_bytes.
  uint32_t max_concurrent_streams = 100;
  // Request bytes one connection may hold beyond its streams' windows, so a
  // large message can complete (at least max_receive_message_size).
  size_t max_buffered_bytes = detail::kDefaultMaxConnectionBufferedBytes;
  // Server: connections served at once; one accepted beyond it is closed
  // at once, without a byte.
  size_t max_connections = 1024;
  // gRFC A9 (server-side connection management), 0 meaning never:
  //  - max_connection_idle: a connection with no call open for this long
  //    (counted from its start or its last call's end) is drained: GOAWAY,
  //    then closed. Keepalive PINGs do not make a connection busy.
  //  - max_connection_age: a connection is drained after this long, +-10 %
  //    of random jitter (A9: "to spread out connection storms").
  //  - max_connection_age_grace: how long calls in flight on a connection
  //    drained for its age or idleness may still run before they are
  //    cancelled and it closes (kNoTimeLimit: until they end, as in gRPC).
  std::chrono::milliseconds max_connection_idle = kDefaultMaxConnectionIdle;
  std::chrono::milliseconds max_connection_age{0};
  std::chrono::milliseconds max_connection_age_grace = kNoTimeLimit;
  // Flow-control window per stream (request bytes a client may send ahead
  // of the handler's reads).
  uint32_t initial_stream_window_size = detail::kDefaultStreamWindowSize;
  // Limit on received request headers (HTTP/2 header list size).
  uint32_t max_metadata_size = detail::kDefaultMaxHeaderListSize;
  // One bound on the request bytes all connections hold, with the
  // connection-level credit their peers have (see RequestMemoryBudget);
  // 0: none. Server and the xDS-enabled server's listener share one budget
  // among their connections; a ServerConnection made alone has its own.
  size_t request_memory_budget = detail::kDefaultRequestMemoryBudget;
  // The shared budget itself (set by ShareMemoryBudget).
  std::shared_ptr<detail::RequestMemoryBudget> shared_memory_budget;
  // Server and the xDS-enabled server's listener: the max_connections count
  // their loops share (set by ShareConnectionQuota; one per server, however
  // many loops it accepts on).
  std::shared_ptr<detail::ConnectionQuota> shared_connection_quota;
};

// Gives `options` the budget its connections will share, once.
inline ServerOptions ShareMemoryBudget(ServerOptions options) {
  if (options.request_memory_budget > 0 && options.shared_memory_budget == nullptr) {
    options.shared_memory_budget =
        std::make_shared<detail::RequestMemoryBudget>(options.request_memory_budget);
  }
  return options;
}

// Gives `options` the max_connections count its loops will share, once.
inline ServerOptions ShareConnectionQuota(ServerOptions options) {
  if (options.shared_connection_quota == nullptr) {
    options.shared_connection_quota =
        std::make_shared<detail::ConnectionQuota>(options.max_connections);
  }
  return options;
}

}  // namespace uxds::http2
