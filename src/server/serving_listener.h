// ServingListener: the serving-loop half of an xDS-enabled server (A36). It
// owns the listening socket and every connection:
//  - it binds only when the first configuration arrives, and retries a
//    failed bind (a port in use) every bind_retry_interval;
//  - each accepted connection is matched to a filter chain of the current
//    configuration and served with that chain's registry; no chain, or no
//    configuration ("not serving"), closes it without sending a byte;
//  - a new configuration, or "not serving", drains every connection
//    accepted under an older one (two-phase GOAWAY, closed after the grace
//    time) while the listening socket stays open;
//  - max_connections bounds the connections of the current configuration:
//    draining ones do not keep new connections out;
//  - Shutdown(grace) drains every connection within `grace`, shortening a
//    drain already under way.
//
// Serving loop only; the control thread reaches it through Loop::Post.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "http2/server_connection.h"
#include "http2/server_options.h"
#include "runtime/accept_pause.h"
#include "runtime/shutdown_once.h"
#include "runtime/socket_address.h"
#include "runtime/tcp_socket.h"
#include "server/serving_config.h"
#include "uxds/loop.h"

namespace uxds::server {

struct ServingListenerOptions {
  std::chrono::milliseconds drain_grace_time{600'000};
  std::chrono::milliseconds bind_retry_interval{60'000};
  http2::ServerOptions connection_options;
  // SO_REUSEPORT: the listeners of the server's other loops bind the same
  // port.
  bool share_port = false;
};

class ServingListener {
 public:
  // `on_bind_status` (called on the serving loop) gets OK once the socket
  // listens, or the error of each failed bind.
  ServingListener(Loop& loop, SocketAddress address, ServingListenerOptions options,
                  std::function<void(Status)> on_bind_status);
  // Shutdown() must have returned (to any of its callers: the others may
  // still be queued to resume). Destroying it while the teardown runs
  // terminates the process.
  ~ServingListener();
  ServingListener(const ServingListener&) = delete;
  ServingListener& operator=(const ServingListener&) = delete;

  // Serve new connections with `config`; drain the older ones. The first
  // call starts binding.
  void Apply(std::shared_ptr<const ServingConfig> config);
  // A36 "not serving": drain every connection; accept and close new ones.
  void StopServing();
  // Closes the listening socket, drains every connection with `grace` (one
  // already draining under a longer grace too) and waits until all have
  // ended. Any number of callers: one teardown (the first call's `grace`),
  // and every call returns once it has ended (a call after that returns at
  // once), even if its own task is cancelled.
  Task<void> Shutdown(std::chrono::milliseconds grace);

  size_t connection_count() const { return live_.size(); }

 private:
  Task<void> BindAndAccept();
  Task<void> ServeConnection(std::unique_ptr<TcpSocket> socket, ConnectionInfo info,
                             std::shared_ptr<const http2::ServiceRegistry> registry,
                             std::shared_ptr<const DownstreamTls> tls, uint64_t generation);
  // Drains every connection accepted under a generation before `generation_`.
  void DrainOlderConnections();
  // The one teardown, in ShutdownOnce's task (never cancelled).
  Task<void> Teardown();

  Loop& loop_;
  const SocketAddress address_;
  const ServingListenerOptions options_;
  std::function<void(Status)> on_bind_status_;
  std::unique_ptr<TcpListener> listener_;
  std::shared_ptr<const ServingConfig> config_;  // null: not serving
  uint64_t generation_ = 0;                      // bumped by Apply / StopServing
  bool started_ = false;
  std::optional<std::chrono::milliseconds> shutdown_grace_;  // set by the first Shutdown()
  TaskGroup accept_task_;
  // Declared before connections_: their ends wake it.
  AcceptPause accept_pause_;
  TaskGroup connections_;
  // Connections accepted under generation_ and not yet ended: what
  // max_connections bounds. Connections of older generations are draining
  // and not counted.
  size_t serving_ = 0;
  // Live connections and the generation each was accepted under.
  std::map<http2::ServerConnection*, uint64_t> live_;
  // Last: destroyed first, it checks that no teardown is still running.
  ShutdownOnce shutdown_;
};

}  // namespace uxds::server
