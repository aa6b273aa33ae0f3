// uxds::Server: the public face of the HTTP/2 server (http2::Server).
#include "http2/server.h"

#include "runtime/socket_address.h"
#include "uxds/server.h"

namespace uxds {

static_assert(kDefaultRequestMemoryBudget == http2::detail::kDefaultRequestMemoryBudget);

// The public default is the transport's.
static_assert(ServerOptions{}.max_receive_message_size == http2::kDefaultMaxReceiveMessageSize);
static_assert(kDefaultMaxConnectionIdle == http2::kDefaultMaxConnectionIdle);
static_assert(kNoTimeLimit == http2::kNoTimeLimit);

StatusOr<std::unique_ptr<Server>> Server::Listen(Loop& loop, std::string_view address,
                                                 std::shared_ptr<const ServiceRegistry> registry,
                                                 ServerOptions options) {
  if (registry == nullptr) return InvalidArgumentError("Server: registry is null");
  StatusOr<SocketAddress> parsed = SocketAddress::Parse(address);
  if (!parsed.ok()) return parsed.status();  // names the address
  http2::ServerOptions http2_options;
  http2_options.max_connections = options.max_connections;
  http2_options.max_concurrent_streams = options.max_concurrent_streams;
  http2_options.max_receive_message_size = options.max_receive_message_size;
  http2_options.keepalive_time = options.keepalive_time;
  http2_options.max_connection_idle = options.max_connection_idle;
  http2_options.max_connection_age = options.max_connection_age;
  http2_options.max_connection_age_grace = options.max_connection_age_grace;
  http2_options.handshake_timeout = options.handshake_timeout;
  http2_options.request_memory_budget = options.request_memory_budget;
  StatusOr<std::unique_ptr<http2::Server>> server =
      http2::Server::Listen(loop, *parsed, std::move(registry), std::move(http2_options));
  if (!server.ok()) return server.status();
  return std::unique_ptr<Server>(new Server(*std::move(server)));
}

Server::Server(std::unique_ptr<http2::Server> server) : server_(std::move(server)) {}

Server::~Server() = default;

uint16_t Server::port() const { return server_->port(); }

Task<void> Server::Serve() { return server_->Serve(); }

Task<void> Server::Shutdown(std::chrono::milliseconds grace) { return server_->Shutdown(grace); }

}  // namespace uxds
