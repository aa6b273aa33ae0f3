#include "http2/server_connection.h"

#include <algorithm>

#include "http2/server_session.h"

namespace uxds::http2 {

std::unique_ptr<ServerConnection> ServerConnection::Create(
    Loop& loop, std::unique_ptr<ByteStream> transport,
    std::shared_ptr<const ServiceRegistry> registry, const ServerOptions& options,
    ConnectionInfo connection_info) {
  return std::unique_ptr<ServerConnection>(
      new ServerConnection(std::make_unique<detail::ServerSession>(
          loop, std::move(transport), std::move(registry), options, std::move(connection_info))));
}

ServerConnection::ServerConnection(std::unique_ptr<detail::ServerSession> session)
    : session_(std::move(session)) {}

ServerConnection::~ServerConnection() = default;

Task<void> ServerConnection::Serve() {
  serving_ = true;
  if (!session_->closing()) {
    if (Status started = session_->Start(); !started.ok()) {
      session_->CloseNow(started);
    } else {
      session_->WatchForPreface();
      session_->ManageConnection();
      if (pending_drain_) session_->Drain(*pending_drain_);
      const Status awaited = co_await session_->closed_event().Wait();
      if (!awaited.ok()) {
        session_->CloseNow(CancelledError("serving " + session_->peer() + " was cancelled"));
      }
    }
  }
  // Structured end: nothing of this connection outlives Serve().
  co_await session_->JoinTasks();
  co_await session_->JoinHandlers();
}

void ServerConnection::Drain(std::chrono::milliseconds grace) {
  if (!serving_) {
    // As on a running session, a second Drain() can only shorten the grace.
    pending_drain_ = pending_drain_ ? std::min(*pending_drain_, grace) : grace;
    return;
  }
  session_->Drain(grace);
}

void ServerConnection::Close() {
  session_->CloseNow(
      UnavailableError("connection with " + session_->peer() + " closed by the server"));
}

bool ServerConnection::draining() const { return session_->draining() || pending_drain_; }
bool ServerConnection::closed() const { return session_->closed(); }
size_t ServerConnection::active_calls() const { return session_->active_calls(); }
Status ServerConnection::close_status() const { return session_->close_reason(); }
const std::string& ServerConnection::peer() const { return session_->peer(); }

}  // namespace uxds::http2
