// Server: a gRPC server on one listening TCP socket (plaintext or TLS).
//
//   auto server = Server::Listen(loop, SocketAddress::Loopback4(0), registry, {});
//   group.Spawn((*server)->Serve());
//   ...
//   co_await (*server)->Shutdown(std::chrono::seconds(5));  // Serve() then returns
//
// Every accepted connection is a ServerConnection in the server's TaskGroup.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <unordered_set>

#include "http2/server_connection.h"
#include "http2/server_options.h"
#include "http2/service_registry.h"
#include "runtime/socket_address.h"
#include "runtime/tcp_socket.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2 {

class Server {
 public:
  // Binds and listens (port 0 picks a free port).
  static StatusOr<std::unique_ptr<Server>> Listen(Loop& loop, const SocketAddress& address,
                                                  std::shared_ptr<const ServiceRegistry> registry,
                                                  ServerOptions options = {});
  // Shutdown() must have completed, or Serve() returned, before this.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return listener_->port(); }
  const SocketAddress& local_address() const { return listener_->local_address(); }

  // Accepts and serves connections until Shutdown(); returns when every
  // connection has ended. Cancelling the awaiting task closes every
  // connection at once.
  Task<void> Serve();
  // Stops accepting, drains every connection (ServerConnection::Drain with
  // `grace`) and waits until all have closed and Serve() has returned.
  Task<void> Shutdown(std::chrono::milliseconds grace);

  size_t connection_count() const { return live_.size(); }
  // Connections closed at accept because max_connections were being served.
  uint64_t refused_connections() const { return refused_connections_; }

 private:
  Server(Loop& loop, std::unique_ptr<TcpListener> listener,
         std::shared_ptr<const ServiceRegistry> registry, ServerOptions options);
  Task<void> ServeConnection(std::unique_ptr<TcpSocket> socket);

  Loop& loop_;
  std::unique_ptr<TcpListener> listener_;
  const std::shared_ptr<const ServiceRegistry> registry_;
  const ServerOptions options_;
  TaskGroup connections_;
  std::unordered_set<ServerConnection*> live_;
  size_t accepted_ = 0;  // connections being served, handshakes included
  uint64_t refused_connections_ = 0;
  std::optional<std::chrono::milliseconds> drain_grace_;  // set by Shutdown()
  // Serve() is still running: Shutdown() waits for it to leave the listener,
  // so that the server may be destroyed as soon as Shutdown() returns.
  bool serving_ = false;
  Event serve_finished_;
};

}  // namespace uxds::http2
