#include "http2/server.h"

#include "tls/tls_stream.h"

namespace uxds::http2 {

StatusOr<std::unique_ptr<ByteStream>> CheckAlpn(StatusOr<std::unique_ptr<TlsStream>> tls) {
  if (!tls.ok()) return tls.status();
  // gRPC speaks HTTP/2 only: a client that negotiated something else is
  // refused (one that negotiated nothing may still send the preface).
  const std::string alpn = (*tls)->negotiated_alpn();
  if (!alpn.empty() && alpn != "h2") {
    (*tls)->Close();
    return UnavailableError("TLS client negotiated ALPN \"" + alpn + "\", not \"h2\"");
  }
  return std::unique_ptr<ByteStream>(*std::move(tls));
}

StatusOr<std::unique_ptr<Server>> Server::Listen(Loop& loop, const SocketAddress& address,
                                                 std::shared_ptr<const ServiceRegistry> registry,
                                                 ServerOptions options, bool share_port) {
  StatusOr<std::unique_ptr<TcpListener>> listener =
      TcpListener::Bind(loop, address, 1024, TcpListener::kAddressInUseGrace, share_port);
  if (!listener.ok()) return listener.status();
  return std::unique_ptr<Server>(
      new Server(loop, std::move(*listener), std::move(registry), std::move(options)));
}

std::unique_ptr<Server> Server::WithoutListener(Loop& loop,
                                                std::shared_ptr<const ServiceRegistry> registry,
                                                ServerOptions options) {
  return std::unique_ptr<Server>(
      new Server(loop, nullptr, std::move(registry), std::move(options)));
}

Server::Server(Loop& loop, std::unique_ptr<TcpListener> listener,
               std::shared_ptr<const ServiceRegistry> registry, ServerOptions options)
    : loop_(loop),
      listener_(std::move(listener)),
      registry_(std::move(registry)),
      options_(ShareConnectionQuota(ShareMemoryBudget(std::move(options)))),
      accept_pause_(loop, listener_ != nullptr
                              ? "server on " + listener_->local_address().ToString()
                              : std::string("server of handed-over connections")),
      connections_(loop),
      serve_left_(loop),
      shutdown_(loop) {}

Server::~Server() = default;

Task<void> Server::Serve() {
  if (listener_ != nullptr && serve_state_ == ServeState::kNotStarted && !shutdown_.started()) {
    serve_state_ = ServeState::kAccepting;
    co_await AcceptUntilShutdown();
    serve_state_ = ServeState::kLeft;
    serve_left_.Set();
  }
  // A teardown under way may still be reading the server: our caller may
  // destroy it once we return, so we return after the teardown, on what our
  // join recorded.
  if (shutdown_.started()) co_await shutdown_.Run([this] { return Teardown(); });
}

Task<void> Server::AcceptUntilShutdown() {
  while (!shutdown_.started()) {
    StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener_->Accept();
    if (shutdown_.started()) break;
    if (!socket.ok()) {
      if (socket.status().code() == StatusCode::kCancelled) break;
      // EMFILE, ENFILE: out of descriptors. Wait for a connection to end
      // (or a short pause) rather than spin; the rest wait in the backlog.
      const Status awaited = co_await accept_pause_.AfterAcceptError(socket.status());
      if (!awaited.ok()) break;
      continue;
    }
    if (!TakeConnection(*socket)) (*socket)->Close();  // over the limit: closed without a byte
  }
  if (!shutdown_.started()) {
    // Our task was cancelled, not shut down: end every connection now.
    listener_->Close();
    connections_.Cancel();
  }
  co_await connections_.Join();
}

bool Server::TakeConnection(std::unique_ptr<TcpSocket>& socket) {
  // Counted from here to the connection's end, whichever way it ends
  // (handshakes included), against a count the server's loops share.
  if (!options_.shared_connection_quota->TryTake()) {
    ++refused_connections_;
    accept_pause_.Refused(options_.shared_connection_quota->limit());
    return false;
  }
  accept_pause_.Accepted();
  connections_.Spawn(ServeConnection(std::move(socket)));
  return true;
}

void Server::ServeAccepted(std::unique_ptr<TcpSocket> socket) {
  // The teardown, or a cancelled Serve(), joins the connections it finds:
  // none may start after it.
  const bool joined = shutdown_.started() || serve_state_ == ServeState::kLeft;
  if (joined || !TakeConnection(socket)) socket->Close();
}

Task<void> Server::ServeConnection(std::unique_ptr<TcpSocket> socket) {
  // Counted from accept to the end, whichever way it ends.
  struct Served {
    detail::ConnectionQuota& quota;
    AcceptPause& pause;
    ~Served() {
      quota.Give();
      pause.ConnectionEnded();
    }
  } served{*options_.shared_connection_quota, accept_pause_};
  ConnectionInfo info{.local = socket->local_address().ToIpEndpoint(),
                      .peer = socket->peer_address().ToIpEndpoint()};
  std::unique_ptr<ByteStream> transport = std::move(socket);
  if (options_.tls) {
    StatusOr<std::unique_ptr<TlsStream>> accepted =
        co_await TlsStream::Accept(std::move(transport), options_.tls, options_.handshake_timeout);
    if (accepted.ok()) info.tls = (*accepted)->peer();
    StatusOr<std::unique_ptr<ByteStream>> tls = CheckAlpn(std::move(accepted));
    if (!tls.ok()) co_return;  // the handshake failed: nothing to serve
    transport = *std::move(tls);
  }
  std::unique_ptr<ServerConnection> connection =
      ServerConnection::Create(loop_, std::move(transport), registry_, options_, std::move(info));
  live_.insert(connection.get());
  // Accepted while shutting down: tell the client with a GOAWAY.
  if (drain_grace_) connection->Drain(*drain_grace_);
  co_await connection->Serve();
  live_.erase(connection.get());
}

Task<void> Server::Shutdown(std::chrono::milliseconds grace) {
  if (!shutdown_.started()) drain_grace_ = grace;
  co_await shutdown_.Run([this] { return Teardown(); });
}

Task<void> Server::Teardown() {
  if (listener_ != nullptr) listener_->Close();
  for (ServerConnection* connection : live_) connection->Drain(*drain_grace_);
  // Drains end themselves after the grace time; this bounds TLS handshakes
  // still in progress and peers that stop reading during the final flush.
  Timer backstop(loop_);
  backstop.Start(*drain_grace_ + 2 * detail::kCloseLinger, [this] { connections_.Cancel(); });
  co_await connections_.Join();
  // Serve() wakes from its closed listener on a later turn and joins the
  // connections too; it reads the server until it has left.
  if (serve_state_ == ServeState::kAccepting) {
    const Status left = co_await serve_left_.Wait();
    (void)left;  // the teardown's task is never cancelled
  }
}

}  // namespace uxds::http2
