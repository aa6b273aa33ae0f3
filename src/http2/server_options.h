// Options of a gRPC server connection (and of Server, which applies them to
// every connection it accepts).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "http2/grpc_framing.h"
#include "http2/http2_session.h"
#include "tls/tls_context.h"

namespace uxds::http2 {

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
  // Flow-control window per stream (request bytes a client may send ahead
  // of the handler's reads).
  uint32_t initial_stream_window_size = detail::kDefaultStreamWindowSize;
  // Limit on received request headers (HTTP/2 header list size).
  uint32_t max_metadata_size = detail::kDefaultMaxHeaderListSize;
};

}  // namespace uxds::http2
