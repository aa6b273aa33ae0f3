// Server: a gRPC server on one listening TCP socket (plaintext or TLS).
//
//   auto server = Server::Listen(loop, SocketAddress::Loopback4(0), registry, {});
//   group.Spawn((*server)->Serve());
//   ...
//   co_await (*server)->Shutdown(std::chrono::seconds(5));  // Serve() then returns
//
// Every accepted connection is a ServerConnection in the server's TaskGroup.
// Serve() runs the accept loop; the one teardown (ShutdownOnce) drains and
// joins the connections and waits for Serve() to leave the listener. Serve()
// returns only once that teardown, if started, has ended: whichever of
// Serve() and Shutdown() returns first, its caller may destroy the server.
#pragma once

#include <cassert>
#include <chrono>
#include <memory>
#include <optional>
#include <unordered_set>

#include "http2/server_connection.h"
#include "http2/server_options.h"
#include "http2/service_registry.h"
#include "runtime/accept_pause.h"
#include "runtime/shutdown_once.h"
#include "runtime/socket_address.h"
#include "runtime/tcp_socket.h"
#include "tls/tls_stream.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2 {

// A TLS server handshake's result (TlsStream::Accept) as gRPC can use it:
// the stream if it negotiated ALPN "h2" or none; else it is closed, and the
// error says why.
StatusOr<std::unique_ptr<ByteStream>> CheckAlpn(StatusOr<std::unique_ptr<TlsStream>> tls);

class Server {
 public:
  // Binds and listens (port 0 picks a free port). `share_port`: with
  // SO_REUSEPORT, so that servers on other loops listen on the same port
  // (give them all one options.shared_connection_quota).
  static StatusOr<std::unique_ptr<Server>> Listen(Loop& loop, const SocketAddress& address,
                                                  std::shared_ptr<const ServiceRegistry> registry,
                                                  ServerOptions options = {},
                                                  bool share_port = false);
  // A server without a listening socket: it serves the connections handed
  // to ServeAccepted() (accepted elsewhere, e.g. by another loop's
  // acceptor). Serve() returns at once; Shutdown() drains and joins them,
  // and must have returned before the server is destroyed.
  static std::unique_ptr<Server> WithoutListener(Loop& loop,
                                                 std::shared_ptr<const ServiceRegistry> registry,
                                                 ServerOptions options = {});
  // Shutdown() or the first Serve() must have returned before this (or
  // neither was ever called); the caller it
  // returned to may destroy the server at once, while other callers are
  // still queued to resume. Destroying it while the teardown runs
  // terminates the process.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // A listening server's port and address (not WithoutListener()'s).
  uint16_t port() const {
    assert(listener_ != nullptr);
    return listener_->port();
  }
  const SocketAddress& local_address() const {
    assert(listener_ != nullptr);
    return listener_->local_address();
  }

  // On the server's loop: serves `socket`, a connection accepted elsewhere
  // and now of this loop, as an accepted one (counted against
  // max_connections; closed at once once Shutdown() has started).
  void ServeAccepted(std::unique_ptr<TcpSocket> socket);

  // Accepts and serves connections until Shutdown(); returns when every
  // connection has ended and a Shutdown() under way has ended too.
  // Cancelling the awaiting task (with no Shutdown() under way) closes every
  // connection at once. Await it once: a later call returns once a
  // Shutdown() under way has ended, or at once.
  Task<void> Serve();
  // Stops accepting, drains every connection (ServerConnection::Drain with
  // `grace`) and waits until all have closed and Serve() has left the
  // listener. Any number of callers: the first call's `grace` is used, and
  // every call returns once the one teardown has ended (a call after that
  // returns at once), even if its own task is cancelled.
  Task<void> Shutdown(std::chrono::milliseconds grace);

  size_t connection_count() const { return live_.size(); }
  // Connections closed at accept because max_connections were being served.
  uint64_t refused_connections() const { return refused_connections_; }
  // Accepts that failed (EMFILE, ENFILE...), each followed by a pause.
  uint64_t accept_errors() const { return accept_pause_.accept_errors(); }
  // The request memory budget its connections share (null: none).
  const detail::RequestMemoryBudget* memory_budget() const {
    return options_.shared_memory_budget.get();
  }

 private:
  Server(Loop& loop, std::unique_ptr<TcpListener> listener,
         std::shared_ptr<const ServiceRegistry> registry, ServerOptions options);
  Task<void> AcceptUntilShutdown();
  // An accepted connection within max_connections, served from now on;
  // false (the caller closes it) when over the limit.
  bool TakeConnection(std::unique_ptr<TcpSocket>& socket);
  Task<void> ServeConnection(std::unique_ptr<TcpSocket> socket);
  // The one teardown, in ShutdownOnce's task (never cancelled).
  Task<void> Teardown();

  Loop& loop_;
  std::unique_ptr<TcpListener> listener_;  // null: WithoutListener()
  const std::shared_ptr<const ServiceRegistry> registry_;
  const ServerOptions options_;
  // Declared before connections_: a connection's end touches them.
  std::unordered_set<ServerConnection*> live_;
  uint64_t refused_connections_ = 0;
  AcceptPause accept_pause_;
  TaskGroup connections_;
  std::optional<std::chrono::milliseconds> drain_grace_;  // set by the first Shutdown()
  enum class ServeState { kNotStarted, kAccepting, kLeft };
  ServeState serve_state_ = ServeState::kNotStarted;
  // Set when Serve() has left the listener and joined the connections: the
  // teardown waits for it, so that no Serve() frame reads the server after
  // the teardown has ended.
  Event serve_left_;
  // Last: destroyed first, it checks that no teardown is still running.
  ShutdownOnce shutdown_;
};

}  // namespace uxds::http2
