// XdsServer: a gRPC server whose listener the xDS control plane configures
// (gRFC A36); Server (at the end): a plain gRPC server.
//
//   auto registry = std::make_shared<uxds::ServiceRegistry>();
//   registry->Register("/demo.Echo/Say", uxds::MakeUnaryHandler(Say));
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
// and handlers run on the server's own loop threads (serving_loops), so a
// registry's handlers must be safe to run on several threads at once when
// there is more than one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "uxds/loop.h"
#include "uxds/server_credentials.h"
#include "uxds/service_registry.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "uxds/xds_client_pool.h"

namespace uxds {

// A duration option at or above this is infinite.
inline constexpr std::chrono::milliseconds kNoTimeLimit = std::chrono::milliseconds::max();
// The default max_connection_idle: 5 minutes. gRPC's is infinite (A9); ours
// reclaims the max_connections slot of a client that connected and then
// stayed silent, so such clients cannot keep new ones out for good. A gRPC
// client leaves gracefully on the GOAWAY and reconnects for its next call.
inline constexpr std::chrono::milliseconds kDefaultMaxConnectionIdle{300'000};
// The default request_memory_budget: 256 MiB for the whole server (split
// among its loops when it has several; see ServerOptions::loops).
inline constexpr size_t kDefaultRequestMemoryBudget = size_t{256} << 20;

struct XdsServerOptions {
  // A36: "a default grace period of 10 minutes for long-lived RPCs".
  static constexpr std::chrono::milliseconds kDefaultDrainGraceTime{600'000};
  // A36: opening the port "must be retried automatically (e.g., retry every
  // minute)".
  static constexpr std::chrono::milliseconds kDefaultBindRetryInterval{60'000};

  // Required: where the server's XdsClient comes from (key "#server").
  std::shared_ptr<XdsClientPool> xds_client_pool;
  // How accepted connections are secured (see server_credentials.h):
  // plaintext unless set; ServerCredentials::Xds(fallback) lets each filter
  // chain's xDS security config (A29) decide.
  ServerCredentials credentials;
  // The "drain grace time": how long calls on a connection being drained
  // (after a Listener update, or on "not serving") may still run.
  std::chrono::milliseconds drain_grace_time = kDefaultDrainGraceTime;
  std::chrono::milliseconds bind_retry_interval = kDefaultBindRetryInterval;
  // Called on the control thread with the listening address and OK when the
  // server starts serving, or the error that keeps it from serving. Without
  // it, every not-serving error and each return to serving is logged as a
  // warning.
  std::function<void(std::string_view listening_address, const Status& status)> serving_status;
  // Connections served at once under the current Listener (more are closed
  // at accept, without a byte). Connections draining after a Listener update
  // or on "not serving" do not count: each ends within drain_grace_time, and
  // A36 wants no connection failed because of a drain.
  size_t max_connections = 1024;
  // Connection management as gRPC servers have it (gRFC A9); the same as
  // ServerOptions' fields of these names (see there). Connections draining
  // after a Listener update keep drain_grace_time.
  std::chrono::milliseconds max_connection_idle = kDefaultMaxConnectionIdle;
  std::chrono::milliseconds max_connection_age{0};
  std::chrono::milliseconds max_connection_age_grace = kNoTimeLimit;
  // A connection whose HTTP/2 preface and SETTINGS have not arrived within
  // this is closed.
  std::chrono::milliseconds handshake_timeout{10'000};
  // The same as ServerOptions::request_memory_budget, shared by the
  // connections of the current Listener and those still draining.
  size_t request_memory_budget = kDefaultRequestMemoryBudget;
  // Loops serving connections, each on a thread of its own with its own
  // listening socket (SO_REUSEPORT when more than one, so the kernel spreads
  // new connections over them); handlers run on the loop of their
  // connection. 0: one per CPU; at most 1024. Every loop serves under the
  // same Listener version, drains and shuts down with the others.
  // max_connections bounds the server as a whole; request_memory_budget is
  // split evenly among the loops (each loop's connections share its part,
  // at least twice the largest request message or the whole budget).
  size_t serving_loops = 1;
};

class XdsServer {
 public:
  // `listening_address` is "IP:port" ("0.0.0.0:8080", "[::]:8080"); port 0
  // (an ephemeral port) is refused, as A36 allows. Fails with a clear error
  // when the address is invalid, the pool is missing, or the bootstrap has no
  // server_listener_resource_name_template. Control thread only.
  static StatusOr<std::unique_ptr<XdsServer>> Create(
      std::string_view listening_address, std::shared_ptr<const ServiceRegistry> registry,
      XdsServerOptions options);
  // Shutdown() must have returned (to any of its callers: the others may
  // still be queued to resume). Destroying it while the teardown runs
  // terminates the process.
  ~XdsServer();
  XdsServer(const XdsServer&) = delete;
  XdsServer& operator=(const XdsServer&) = delete;

  // Starts watching the Listener. Never fails for want of configuration:
  // the serving-status callback tells why the server is not serving yet.
  void Start();
  // Stops watching, closes the listening socket, drains every connection
  // (calls in flight get `grace`, also on a connection already draining
  // under a longer drain_grace_time), and waits until all have ended. May be
  // awaited by several tasks at once: one teardown (the first call's
  // `grace`), and every call returns once it has ended, even if its own
  // task is cancelled; a call after that returns at once.
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

// A plain gRPC server (no xDS): one listening TCP socket on a Loop, serving
// a ServiceRegistry over HTTP/2.
//
//   auto server = uxds::Server::Listen(loop, "127.0.0.1:0", registry);  // 0: a free port
//   loop.Spawn((*server)->Serve());
//   ... (*server)->port() ...
//   co_await (*server)->Shutdown(std::chrono::seconds(5));  // Serve() then returns
//
// Threads: create, Serve() and Shutdown() on `loop`'s thread. Handlers run
// there too, and, with ServerOptions::loops > 1, on the server's other loop
// threads: a registry's handlers must then be safe to run on several
// threads at once.
struct ServerOptions {
  // Connections served at once; more are closed at accept, without a byte.
  size_t max_connections = 1024;
  // SETTINGS_MAX_CONCURRENT_STREAMS: calls at once per connection.
  uint32_t max_concurrent_streams = 100;
  // A larger request message fails its call with RESOURCE_EXHAUSTED.
  size_t max_receive_message_size = 4 * 1024 * 1024;
  // Server-initiated PINGs (0: none); an unanswered one closes the
  // connection, cancelling its calls.
  std::chrono::milliseconds keepalive_time{0};
  // Connection management as gRPC servers have it (gRFC A9); 0: never.
  // A connection with no call open for max_connection_idle (since it
  // started or its last call ended) is drained: GOAWAY, then closed. This
  // frees its max_connections slot; keepalive PINGs do not keep it busy.
  std::chrono::milliseconds max_connection_idle = kDefaultMaxConnectionIdle;
  // A connection is drained (GOAWAY) once this old, +-10 % of random jitter.
  std::chrono::milliseconds max_connection_age{0};
  // How long calls in flight on a connection drained for its age or
  // idleness may still run before they are cancelled and it closes
  // (kNoTimeLimit: until they end).
  std::chrono::milliseconds max_connection_age_grace = kNoTimeLimit;
  // A connection whose HTTP/2 preface and SETTINGS have not arrived within
  // this is closed (a client that connects and stays silent).
  std::chrono::milliseconds handshake_timeout{10'000};
  // One bound on the request bytes all connections hold: messages not yet
  // read by handlers, messages still arriving, and the flow-control credit
  // granted beyond HTTP/2's initial 64 KiB. Past it, a connection holding
  // more than its share gets no more credit (so its peer stops sending)
  // until handlers read, and the largest call of the biggest holder is
  // ended RESOURCE_EXHAUSTED, so the server never stalls for good.
  // With several loops each loop bounds its own share (see `loops`).
  // 0: no server-wide bound (each connection still has its own).
  size_t request_memory_budget = kDefaultRequestMemoryBudget;
  // Loops serving connections: the Loop given to Listen() and loops - 1
  // more, each on a thread the server starts, with its own listening socket
  // on the same port (SO_REUSEPORT when more than one, so the kernel
  // spreads new connections over them). Handlers run on the loop of their
  // connection. 0: one per CPU; at most 1024. max_connections bounds the
  // server as a whole; request_memory_budget is split evenly among the
  // loops (each share at least twice max_receive_message_size, or the
  // whole budget).
  size_t loops = 1;
};

class Server {
 public:
  // Binds and listens on "IP:port" ("127.0.0.1:8080", "[::]:0"); port 0
  // picks a free port. INVALID_ARGUMENT naming the address when it is not
  // one; the bind's errno when it fails.
  static StatusOr<std::unique_ptr<Server>> Listen(Loop& loop, std::string_view address,
                                                  std::shared_ptr<const ServiceRegistry> registry,
                                                  ServerOptions options = {});
  // Shutdown() or the first Serve() must have returned before this (or
  // neither was ever called); the caller it
  // returned to may destroy the server at once, even while other callers
  // are still queued to resume.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The port listened on (the one picked, for port 0).
  uint16_t port() const;
  // Accepts and serves connections until Shutdown(); returns when every
  // connection has ended and a Shutdown() under way has ended. Await it
  // once.
  Task<void> Serve();
  // Stops accepting, drains every connection (GOAWAY; calls in flight get
  // `grace`, then are cancelled) and waits until all have ended and Serve()
  // has left the listener. May be awaited by several tasks at once: one
  // drain (the first call's `grace`), and every call returns once it has
  // ended; a call after that returns at once.
  Task<void> Shutdown(std::chrono::milliseconds grace);

  // How many loops serve (ServerOptions::loops, 0 resolved).
  size_t loop_count() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uxds
