#include "http2/client_connection.h"

#include <algorithm>

#include "http2/client_session.h"
#include "runtime/tcp_socket.h"
#include "tls/tls_stream.h"

namespace uxds::http2 {
namespace {

// "host:port" / "[v6]:port" / "host" -> host, for certificate checks.
std::string HostOfAuthority(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close != std::string_view::npos) return std::string(authority.substr(1, close - 1));
  }
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(':') == colon) {
    return std::string(authority.substr(0, colon));
  }
  return std::string(authority);
}

std::chrono::milliseconds Remaining(Loop::Clock::time_point deadline) {
  return std::max(
      std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Loop::Clock::now()));
}

// Closes `session` for good and joins its tasks, even if the calling task is
// being cancelled.
Task<void> CloseAndJoin(detail::ClientSession& session, Status reason) {
  session.CloseNow(std::move(reason));
  co_await session.JoinTasks();
}

// Keeps a session whose ClientConnection is gone until its tasks are done.
Task<void> ReapSession(std::unique_ptr<detail::ClientSession> session) {
  const Status awaited = co_await session->closed_event().Wait();
  if (!awaited.ok()) {
    session->CloseNow(CancelledError("loop shutting down"));
  }
  co_await session->JoinTasks();
}

// Starts HTTP/2 on `transport` into `out` and waits for the server's SETTINGS.
Task<Status> StartSession(Loop& loop, std::unique_ptr<ByteStream> transport,
                          const ClientConnectionOptions& options, bool secure,
                          Loop::Clock::time_point deadline,
                          std::unique_ptr<detail::ClientSession>& out) {
  out = std::make_unique<detail::ClientSession>(loop, std::move(transport), options, secure);
  detail::ClientSession& session = *out;
  if (Status started = session.Start(); !started.ok()) {
    co_await CloseAndJoin(session, started);
    co_return started;
  }
  // gRPC waits for the server's SETTINGS before calling a connection ready:
  // it proves the peer speaks HTTP/2.
  Status failure = co_await session.WaitForPeerSettings(deadline - Loop::Clock::now());
  // SETTINGS came, so the handshake succeeded even if a GOAWAY and the close
  // followed at once (A36: a server drains the connections accepted under
  // an older Listener, one still in its handshake too). The caller gets a
  // connection that is already unusable, as gRPC's transport would be:
  // a lost connection, not a failed attempt that costs a backoff.
  if (failure.ok() || session.settings_received()) co_return OkStatus();
  co_await CloseAndJoin(session, failure);
  co_return failure;
}

}  // namespace

ClientConnection::ClientConnection(std::unique_ptr<detail::ClientSession> session)
    : session_(std::move(session)), close_(session_->loop()) {}

ClientConnection::~ClientConnection() {
  if (session_ == nullptr) return;
  if (session_->closed() && session_->tasks_done()) return;
  session_->BeginClose(UnavailableError("connection to " + session_->peer() + " destroyed"),
                       NGHTTP2_NO_ERROR);
  Loop& loop = session_->loop();
  loop.Spawn(ReapSession(std::move(session_)));
}

Task<StatusOr<std::unique_ptr<ClientConnection>>> ClientConnection::Connect(
    Loop& loop, const SocketAddress& address, ClientConnectionOptions options) {
  const auto deadline = Loop::Clock::now() + options.connect_timeout;
  if (options.authority.empty()) options.authority = address.ToString();
  StatusOr<std::unique_ptr<TcpSocket>> tcp =
      co_await TcpSocket::Connect(loop, address, options.connect_timeout);
  if (!tcp.ok()) co_return tcp.status();
  std::unique_ptr<ByteStream> transport = std::move(*tcp);
  const bool secure = options.tls != nullptr;
  if (secure) {
    std::string server_name = options.tls_server_name;
    if (server_name.empty()) server_name = HostOfAuthority(options.authority);
    StatusOr<std::unique_ptr<TlsStream>> tls = co_await TlsStream::Connect(
        std::move(transport), options.tls, server_name, Remaining(deadline));
    if (!tls.ok()) co_return tls.status();
    // gRPC requires HTTP/2 negotiated through ALPN over TLS.
    if ((*tls)->negotiated_alpn() != "h2") {
      (*tls)->Close();
      co_return UnavailableError("TLS server " + address.ToString() +
                                 " did not negotiate ALPN \"h2\"");
    }
    transport = std::move(*tls);
  }
  std::unique_ptr<detail::ClientSession> session;
  Status started =
      co_await StartSession(loop, std::move(transport), options, secure, deadline, session);
  if (!started.ok()) co_return started;
  co_return std::unique_ptr<ClientConnection>(new ClientConnection(std::move(session)));
}

Task<StatusOr<std::unique_ptr<ClientConnection>>> ClientConnection::Start(
    Loop& loop, std::unique_ptr<ByteStream> transport, ClientConnectionOptions options,
    bool secure) {
  const auto deadline = Loop::Clock::now() + options.connect_timeout;
  if (options.authority.empty()) options.authority = transport->PeerName();
  std::unique_ptr<detail::ClientSession> session;
  Status started =
      co_await StartSession(loop, std::move(transport), options, secure, deadline, session);
  if (!started.ok()) co_return started;
  co_return std::unique_ptr<ClientConnection>(new ClientConnection(std::move(session)));
}

std::unique_ptr<ClientCall> ClientConnection::StartCall(
    std::string path, const Metadata& metadata, std::optional<Loop::Clock::time_point> deadline) {
  return session_->StartCall(std::move(path), metadata, deadline);
}

bool ClientConnection::usable() const { return session_->usable(); }
bool ClientConnection::closed() const { return session_->closed(); }
Status ClientConnection::close_status() const { return session_->close_reason(); }
Event& ClientConnection::closed_event() { return session_->closed_event(); }
uint64_t ClientConnection::pings_acked() const { return session_->pings_acked(); }
const std::string& ClientConnection::peer() const { return session_->peer(); }
Loop& ClientConnection::loop() const { return session_->loop(); }

Task<Status> ClientConnection::WaitUntilUnusable() {
  while (session_->usable() && !session_->closed()) {
    const Status woke = co_await session_->state_changed().Wait();
    if (!woke.ok()) co_return woke;
  }
  co_return OkStatus();
}

Task<Status> ClientConnection::Ping(std::chrono::milliseconds timeout) {
  co_return co_await session_->Ping(timeout);
}

Task<void> ClientConnection::Close() {
  // Returns on what its join recorded: the connection may be gone by then.
  co_await close_.Run([this] { return CloseAndJoinTasks(); });
}

Task<void> ClientConnection::CloseAndJoinTasks() {
  session_->BeginClose(
      UnavailableError("connection to " + session_->peer() + " closed by the application"),
      NGHTTP2_NO_ERROR);
  // Not cancellable here; the linger timer bounds the flush of GOAWAY.
  const Status awaited = co_await session_->closed_event().Wait();
  (void)awaited;
  co_await session_->JoinTasks();
}

Task<StatusOr<std::string>> UnaryCall(ClientConnection& connection, std::string path,
                                      std::string_view request, const Metadata& metadata,
                                      std::optional<Loop::Clock::time_point> deadline,
                                      ClientCall::Delivery* delivery) {
  std::unique_ptr<ClientCall> call = connection.StartCall(std::move(path), metadata, deadline);
  const Status written = co_await call->Write(request);
  if (written.ok()) (void)co_await call->WritesDone();
  std::optional<std::string> response = co_await call->Read();
  std::optional<std::string> extra;
  if (response) extra = co_await call->Read();
  Status status = co_await call->Finish();
  if (delivery != nullptr) *delivery = call->delivery();
  if (!status.ok()) co_return status;
  if (!response) co_return InternalError("unary call to " + call->path() + " returned no message");
  if (extra) {
    co_return InternalError("unary call to " + call->path() + " returned more than one message");
  }
  co_return std::move(*response);
}

}  // namespace uxds::http2
