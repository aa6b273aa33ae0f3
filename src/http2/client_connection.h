// ClientConnection: a gRPC client connection (HTTP/2 over TCP or TLS).
//
//   auto conn = co_await ClientConnection::Connect(loop, address, options);
//   auto call = (*conn)->StartCall("/pkg.Service/Method");
//   co_await call->Write(request); co_await call->WritesDone();
//   while (auto response = co_await call->Read()) ...;
//   Status status = co_await call->Finish();
//   co_await (*conn)->Close();
//
// Everything runs on the loop the connection was made on. The connection's
// reader, writer and keepalive tasks live in its own TaskGroup; Close()
// cancels and joins them. Destroying a connection that is still open closes
// it in the background (its tasks are then joined by the Loop); destroying
// it while a Close() is still running terminates the process.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http2/client_call.h"
#include "http2/client_connection_options.h"
#include "http2/metadata.h"
#include "runtime/byte_stream.h"
#include "runtime/shutdown_once.h"
#include "runtime/socket_address.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2 {

namespace detail {
class ClientSession;
}

class ClientConnection {
 public:
  // TCP connect, TLS handshake when options.tls is set, HTTP/2 preface, and
  // the server's SETTINGS, all within options.connect_timeout. UNAVAILABLE
  // when refused / the handshake fails / the peer is not an HTTP/2 server,
  // DEADLINE_EXCEEDED on timeout, CANCELLED when the calling task is.
  static Task<StatusOr<std::unique_ptr<ClientConnection>>> Connect(Loop& loop,
                                                                   const SocketAddress& address,
                                                                   ClientConnectionOptions options);
  // HTTP/2 over a transport the caller connected (and secured: `secure`
  // selects the :scheme). options.tls is ignored here.
  static Task<StatusOr<std::unique_ptr<ClientConnection>>> Start(
      Loop& loop, std::unique_ptr<ByteStream> transport, ClientConnectionOptions options,
      bool secure);

  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // A new call. Never null: when the connection is closed or got GOAWAY, the
  // call has already finished with UNAVAILABLE; invalid metadata finishes it
  // with INTERNAL, a past deadline with DEADLINE_EXCEEDED.
  std::unique_ptr<ClientCall> StartCall(
      std::string path, const Metadata& metadata = {},
      std::optional<Loop::Clock::time_point> deadline = std::nullopt);

  // Not closed and no GOAWAY received: StartCall() will start a real call.
  bool usable() const;
  bool closed() const;
  // Why the connection closed; OK while it is open.
  Status close_status() const;
  // Set once the connection is closed (transport gone, calls failed).
  Event& closed_event();
  // Waits until usable() is false: a GOAWAY arrived or the connection
  // closed. OK then; CANCELLED when the calling task is cancelled first.
  Task<Status> WaitUntilUnusable();
  // Round trip of one PING: OK when acknowledged; DEADLINE_EXCEEDED after
  // `timeout`; UNAVAILABLE when the connection closes first.
  Task<Status> Ping(std::chrono::milliseconds timeout);
  // PINGs acknowledged so far (keepalive and Ping()).
  uint64_t pings_acked() const;
  // GOAWAY (NO_ERROR) after pending frames, then close; every open call ends
  // UNAVAILABLE. Joins the connection's tasks. Any number of callers: one
  // close, and every call returns once it has ended (a call after that
  // returns at once), even if its own task is cancelled; the caller it
  // returns to may destroy the connection at once. The flush of GOAWAY is
  // bounded by detail::kCloseLinger.
  Task<void> Close();

  // "127.0.0.1:443" style.
  const std::string& peer() const;
  Loop& loop() const;

 private:
  explicit ClientConnection(std::unique_ptr<detail::ClientSession> session);
  // The one close, in ShutdownOnce's task (never cancelled).
  Task<void> CloseAndJoinTasks();

  std::unique_ptr<detail::ClientSession> session_;
  ShutdownOnce close_;
};

// One request, one response. The response message, or the call's status
// when that is not OK (INTERNAL when an OK call returned no message or more
// than one). When `delivery` is set, it receives how far a failed call got
// (ClientCall::delivery(): whether it may be started elsewhere).
Task<StatusOr<std::string>> UnaryCall(
    ClientConnection& connection, std::string path, std::string_view request,
    const Metadata& metadata = {}, std::optional<Loop::Clock::time_point> deadline = std::nullopt,
    ClientCall::Delivery* delivery = nullptr);

}  // namespace uxds::http2
