// Options of a gRPC client connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "http2/grpc_framing.h"
#include "http2/http2_session.h"
#include "tls/tls_context.h"

namespace uxds::http2 {

struct ClientConnectionOptions {
  // Not an aggregate on purpose: g++ 12 miscompiles an aggregate temporary
  // passed in a co_await expression (`co_await Connect(loop, a, {})` frees
  // memory it does not own); with a user-provided constructor it is fine.
  ClientConnectionOptions() {}

  // :authority of every call; empty: the address connected to ("host:port").
  std::string authority;
  // TLS when set (scheme https); the server must negotiate ALPN "h2".
  std::shared_ptr<TlsClientContext> tls;
  // Name the server certificate must match (and SNI); empty: the host part
  // of `authority`.
  std::string tls_server_name;
  // Bounds TCP connect + TLS handshake + the server's first SETTINGS.
  std::chrono::milliseconds connect_timeout{20000};
  // PINGs every keepalive_time (0: none); the connection closes (its calls
  // UNAVAILABLE) when one is not acknowledged within keepalive_timeout.
  // gRPC servers by default answer PINGs more frequent than every 5 minutes
  // with GOAWAY ENHANCE_YOUR_CALM ("too_many_pings") unless configured to
  // permit them.
  std::chrono::milliseconds keepalive_time{0};
  std::chrono::milliseconds keepalive_timeout{20000};
  // A larger response message fails its call with RESOURCE_EXHAUSTED.
  size_t max_receive_message_size = kDefaultMaxReceiveMessageSize;
  // Flow-control window per stream (bytes the server may send ahead of us).
  uint32_t initial_stream_window_size = detail::kDefaultStreamWindowSize;
  // Response bytes the connection may hold beyond its streams' windows, so
  // a large message can complete (see http2_stream.h).
  size_t max_buffered_bytes = detail::kDefaultMaxConnectionBufferedBytes;
  // Limit on received response headers / trailers (HTTP/2 header list size).
  uint32_t max_metadata_size = detail::kDefaultMaxHeaderListSize;
  // Prepended to our own user-agent ("grpc-c++-uxds/<version>").
  std::string user_agent_prefix;
};

}  // namespace uxds::http2
