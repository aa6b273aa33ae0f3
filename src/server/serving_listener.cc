#include "server/serving_listener.h"

#include <utility>

#include "http2/server.h"

namespace uxds::server {

namespace {

// After the grace time, what a drained connection may still take to flush
// and close before Shutdown() cancels it.
constexpr std::chrono::milliseconds kShutdownBackstop{2'000};

ServingListenerOptions WithSharedBounds(ServingListenerOptions options) {
  options.connection_options =
      http2::ShareConnectionQuota(http2::ShareMemoryBudget(std::move(options.connection_options)));
  return options;
}

}  // namespace

ServingListener::ServingListener(Loop& loop, SocketAddress address, ServingListenerOptions options,
                                 std::function<void(Status)> on_bind_status)
    : loop_(loop),
      address_(std::move(address)),
      options_(WithSharedBounds(std::move(options))),
      on_bind_status_(std::move(on_bind_status)),
      accept_task_(loop),
      accept_pause_(loop, "xDS-enabled server on " + address_.ToString()),
      connections_(loop),
      shutdown_(loop) {}

ServingListener::~ServingListener() = default;

void ServingListener::Apply(std::shared_ptr<const ServingConfig> config) {
  if (shutdown_.started()) return;
  config_ = std::move(config);
  ++generation_;
  DrainOlderConnections();
  if (!started_) {
    // A36: no listen() before the first good configuration.
    started_ = true;
    accept_task_.Spawn(BindAndAccept());
  }
}

void ServingListener::StopServing() {
  if (shutdown_.started()) return;
  config_ = nullptr;
  ++generation_;
  // A36: "'Not serving' requires existing connections to be closed, but
  // already-started RPCs should not fail": a two-phase GOAWAY drain.
  DrainOlderConnections();
}

void ServingListener::DrainOlderConnections() {
  // Every connection counted against max_connections was accepted under an
  // older generation: it drains now and no longer counts.
  options_.connection_options.shared_connection_quota->Give(serving_);
  serving_ = 0;
  for (const auto& [connection, generation] : live_) {
    if (generation < generation_ && !connection->draining()) {
      connection->Drain(options_.drain_grace_time);
    }
  }
}

Task<void> ServingListener::BindAndAccept() {
  // A port still held by a process killed a moment ago (TcpListener::
  // kAddressInUseGrace) is tried again soon, without a not-serving report;
  // on this loop, without blocking it.
  const Loop::Clock::time_point in_use_until = Loop::Clock::now() + TcpListener::kAddressInUseGrace;
  while (listener_ == nullptr) {
    StatusOr<std::unique_ptr<TcpListener>> bound =
        TcpListener::Bind(loop_, address_, 1024, std::chrono::milliseconds(0), options_.share_port);
    if (bound.ok()) {
      listener_ = *std::move(bound);
      on_bind_status_(Status());
      break;
    }
    if (bound.status().code() == StatusCode::kAlreadyExists && Loop::Clock::now() < in_use_until) {
      const Status slept = co_await SleepFor(loop_, std::chrono::milliseconds(5));
      if (!slept.ok()) co_return;
      continue;
    }
    // A36: "If entering 'not serving' mode, opening the port must be retried
    // automatically (e.g., retry every minute)."
    on_bind_status_(Status(StatusCode::kUnavailable, "cannot listen on " + address_.ToString() +
                                                         ": " + bound.status().message()));
    // Bound to a variable first: g++ 12.2 miscompiles a co_await in an if.
    const Status slept = co_await SleepFor(loop_, options_.bind_retry_interval);
    if (!slept.ok()) co_return;
  }
  while (true) {
    StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener_->Accept();
    if (!socket.ok()) {
      if (socket.status().code() == StatusCode::kCancelled) co_return;
      // EMFILE, ENFILE: out of descriptors. Wait for a connection to end
      // (or a short pause) rather than spin; the rest wait in the backlog.
      const Status paused = co_await accept_pause_.AfterAcceptError(socket.status());
      if (!paused.ok()) co_return;
      continue;
    }
    std::shared_ptr<const http2::ServiceRegistry> registry;
    std::shared_ptr<const DownstreamTls> tls;
    http2::detail::ConnectionQuota& quota = *options_.connection_options.shared_connection_quota;
    // Connections draining after a Listener update do not count: A36 "Draining
    // must not cause the server to spuriously fail RPCs or connections", and
    // each ends within the drain grace time. The count is the server's, over
    // all its loops.
    bool counted = false;
    ConnectionAddresses addresses;
    if (config_ != nullptr) {
      counted = quota.TryTake();
      if (!counted) accept_pause_.Refused(quota.limit());
    }
    if (counted) {
      addresses = {(*socket)->local_address(), (*socket)->peer_address()};
      // A29: the chain, and so the security, is chosen before the
      // handshake.
      if (const FilterChain* chain = config_->matcher->Select(addresses)) {
        registry = config_->RegistryFor(*chain);
        tls = config_->TlsFor(*chain);
      }
    }
    if (registry == nullptr) {
      // A36: not serving, or no filter chain (and no default one): close
      // "without any bytes being sent".
      if (counted) quota.Give();
      (*socket)->Close();
      continue;
    }
    accept_pause_.Accepted();
    ++serving_;
    ConnectionInfo info{.local = addresses.local.ToIpEndpoint(),
                        .peer = addresses.peer.ToIpEndpoint()};
    connections_.Spawn(ServeConnection(*std::move(socket), std::move(info), std::move(registry),
                                       std::move(tls), generation_));
  }
}

Task<void> ServingListener::ServeConnection(std::unique_ptr<TcpSocket> socket, ConnectionInfo info,
                                            std::shared_ptr<const http2::ServiceRegistry> registry,
                                            std::shared_ptr<const DownstreamTls> tls,
                                            uint64_t generation) {
  struct Served {
    ServingListener& listener;
    uint64_t generation;
    // Counted only while its generation is the current one.
    ~Served() {
      if (generation == listener.generation_) {
        --listener.serving_;
        listener.options_.connection_options.shared_connection_quota->Give();
      }
      listener.accept_pause_.ConnectionEnded();
    }
  } served{*this, generation};
  std::unique_ptr<ByteStream> transport = std::move(socket);
  if (tls != nullptr) {
    // A29: the context of the chain's newest certificates; connections
    // already open keep theirs. A chain with no usable certificates, or a
    // failed handshake, closes the connection.
    StatusOr<std::shared_ptr<TlsServerContext>> context = co_await tls->Context(loop_);
    if (!context.ok()) co_return;
    StatusOr<std::unique_ptr<TlsStream>> accepted = co_await TlsStream::Accept(
        std::move(transport), *std::move(context), options_.connection_options.handshake_timeout);
    // A41: RBAC authorizes calls on the client certificate's identities.
    if (accepted.ok()) info.tls = (*accepted)->peer();
    StatusOr<std::unique_ptr<ByteStream>> secured = http2::CheckAlpn(std::move(accepted));
    if (!secured.ok()) co_return;
    transport = *std::move(secured);
  }
  std::unique_ptr<http2::ServerConnection> connection =
      http2::ServerConnection::Create(loop_, std::move(transport), std::move(registry),
                                      options_.connection_options, std::move(info));
  live_.emplace(connection.get(), generation);
  if (shutdown_grace_) {
    connection->Drain(*shutdown_grace_);
  } else if (generation < generation_) {
    connection->Drain(options_.drain_grace_time);
  }
  co_await connection->Serve();
  live_.erase(connection.get());
}

Task<void> ServingListener::Shutdown(std::chrono::milliseconds grace) {
  if (!shutdown_.started()) shutdown_grace_ = grace;
  // Returns on what its join recorded: the listener may be gone by then.
  co_await shutdown_.Run([this] { return Teardown(); });
}

Task<void> ServingListener::Teardown() {
  config_ = nullptr;
  if (listener_ != nullptr) listener_->Close();
  accept_task_.Cancel();
  // Also bounds a connection already draining after a Listener update: its
  // drain grace time (10 min by default) is cut to the shutdown's grace.
  for (const auto& [connection, generation] : live_) connection->Drain(*shutdown_grace_);
  co_await accept_task_.Join();
  Timer backstop(loop_);
  backstop.Start(*shutdown_grace_ + kShutdownBackstop, [this] { connections_.Cancel(); });
  co_await connections_.Join();
}

}  // namespace uxds::server
