// ServerConnection: serves gRPC on one accepted connection (TCP, or TLS the
// caller already handshook). Server uses it for every connection it
// accepts; the xDS-enabled server accepts and matches filter chains itself,
// then serves each connection with the registry of its chain, and drains
// connections one by one when their chain changes.
//
//   auto conn = ServerConnection::Create(loop, std::move(stream), registry, options);
//   group.Spawn(conn->Serve());   // keep `conn` alive until Serve() returns
//   ... conn->Drain(grace);        // later, from any task on the same loop
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "http2/server_options.h"
#include "http2/service_registry.h"
#include "runtime/byte_stream.h"
#include "uxds/connection_info.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2 {

namespace detail {
class ServerSession;
}

class ServerConnection {
 public:
  // `connection_info` is what calls report as ServerCall::connection().
  static std::unique_ptr<ServerConnection> Create(Loop& loop, std::unique_ptr<ByteStream> transport,
                                                  std::shared_ptr<const ServiceRegistry> registry,
                                                  const ServerOptions& options,
                                                  ConnectionInfo connection_info = {});
  // Serve() must have returned (or never have been called).
  ~ServerConnection();
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  // Runs the connection until it ends: the client goes away, a protocol
  // error, Close(), a finished Drain(), or cancellation of the awaiting task
  // (which closes at once). Returns after every handler and internal task
  // has finished and the transport is closed. Await it exactly once.
  Task<void> Serve();

  // Graceful drain: GOAWAY with the maximum stream id, a PING round trip,
  // GOAWAY with the last accepted stream id; calls in flight may finish
  // within `grace`, then the rest are cancelled and the connection closes.
  // On a connection already draining, only a shorter `grace` (counted from
  // now) changes anything: the drain then ends by it.
  void Drain(std::chrono::milliseconds grace);
  // Closes now: open calls are cancelled.
  void Close();

  bool draining() const;
  bool closed() const;
  // Calls with a running handler or an open stream.
  size_t active_calls() const;
  // Why the connection ended; OK while it runs.
  Status close_status() const;
  const std::string& peer() const;

 private:
  explicit ServerConnection(std::unique_ptr<detail::ServerSession> session);
  std::unique_ptr<detail::ServerSession> session_;
  bool serving_ = false;
  std::optional<std::chrono::milliseconds> pending_drain_;  // Drain() before Serve()
};

}  // namespace uxds::http2
