// XdsServer: a gRPC server whose listener the xDS control plane configures
// (gRFC A36).
//
//   auto registry = std::make_shared<uxds::http2::ServiceRegistry>();
//   registry->Register("/demo.Echo/Say", uxds::http2::MakeUnaryHandler(Say));
//   uxds::XdsServerOptions options;
//   options.xds_client_pool = pool;  // its XdsClient is the pool's "#server"
//   options.serving_status = [](std::string_view address, const uxds::Status& s) { ... };
//   auto server = uxds::XdsServer::Create("0.0.0.0:8080", registry, options);
//   (*server)->Start();
//   ...
//   co_await (*server)->Shutdown();
//
// What the server does (A36):
//  - It watches the Listener named by the bootstrap's
//    server_listener_resource_name_template, every "%s" replaced by the
//    listening "IP:port" ("0.0.0.0:8080", "[::]:8080").
//  - It listen()s only once the first good configuration is there. Later,
//    while not serving, it accepts connections and closes them without
//    sending a byte.
//  - A port in use is "not serving"; the bind is retried every
//    bind_retry_interval.
//  - A Listener whose address:port_value differs from the listening address
//    is "not serving".
//  - Transient control-plane failures keep the configuration in use. Data
//    errors (a deleted or NACKed Listener) stop serving only when the
//    XdsClient drops the resource (A88: the fail_on_data_errors server
//    feature).
//  - Each connection is served under the most specific filter chain of its
//    Listener (FilterChainMatch), else the default chain, else it is closed
//    without a byte.
//  - Each RPC is routed by its :authority and path through the chain's
//    RouteConfiguration (inline or RDS); only routes with
//    non_forwarding_action reach a handler, everything else fails with
//    UNAVAILABLE.
//  - A new Listener version drains the connections accepted under the old
//    one (two-phase GOAWAY, closed after the drain grace time); an RDS
//    update applies to existing connections without draining.
//
// Threads: create, Start() and Shutdown() the server on the pool's loop (the
// control thread), where the serving-status callback runs too. Connections
// and handlers run on the server's own loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "uxds/status.h"
#include "uxds/task.h"
#include "uxds/xds_client_pool.h"

namespace uxds {

namespace http2 {
class ServiceRegistry;
}

struct XdsServerOptions {
  // A36: "a default grace period of 10 minutes for long-lived RPCs".
  static constexpr std::chrono::milliseconds kDefaultDrainGraceTime{600'000};
  // A36: opening the port "must be retried automatically (e.g., retry every
  // minute)".
  static constexpr std::chrono::milliseconds kDefaultBindRetryInterval{60'000};

  // Required: where the server's XdsClient comes from (key "#server").
  std::shared_ptr<XdsClientPool> xds_client_pool;
  // The "drain grace time": how long calls on a connection being drained
  // (after a Listener update, or on "not serving") may still run.
  std::chrono::milliseconds drain_grace_time = kDefaultDrainGraceTime;
  std::chrono::milliseconds bind_retry_interval = kDefaultBindRetryInterval;
  // Called on the control thread with the listening address and OK when the
  // server starts serving, or the error that keeps it from serving. Without
  // it, every not-serving error and each return to serving is logged as a
  // warning.
  std::function<void(std::string_view listening_address, const Status& status)> serving_status;
  // Connections served at once (more are closed at accept, without a byte).
  size_t max_connections = 1024;
};

class XdsServer {
 public:
  // `listening_address` is "IP:port" ("0.0.0.0:8080", "[::]:8080"); port 0
  // (an ephemeral port) is refused, as A36 allows. Fails with a clear error
  // when the address is invalid, the pool is missing, or the bootstrap has no
  // server_listener_resource_name_template. Control thread only.
  static StatusOr<std::unique_ptr<XdsServer>> Create(
      std::string_view listening_address, std::shared_ptr<const http2::ServiceRegistry> registry,
      XdsServerOptions options);
  // Shutdown() must have completed.
  ~XdsServer();
  XdsServer(const XdsServer&) = delete;
  XdsServer& operator=(const XdsServer&) = delete;

  // Starts watching the Listener. Never fails for want of configuration:
  // the serving-status callback tells why the server is not serving yet.
  void Start();
  // Stops watching, closes the listening socket, drains every connection
  // (calls in flight get `grace`), and waits until all have ended.
  Task<void> Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  // "IP:port" as the Listener name and the address check use it.
  const std::string& listening_address() const;
  // The Listener resource name watched.
  const std::string& listener_resource_name() const;

  struct Impl;

 private:
  explicit XdsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uxds
