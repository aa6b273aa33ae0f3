// uxds::Server: the public face of the HTTP/2 server (http2::Server), on
// one loop or several.
#include "http2/server.h"

#include <utility>
#include <vector>

#include "runtime/shutdown_once.h"
#include "runtime/socket_address.h"
#include "server/serving_loops.h"
#include "uxds/server.h"

namespace uxds {

static_assert(kDefaultRequestMemoryBudget == http2::detail::kDefaultRequestMemoryBudget);

// The public default is the transport's.
static_assert(ServerOptions{}.max_receive_message_size == http2::kDefaultMaxReceiveMessageSize);
static_assert(kDefaultMaxConnectionIdle == http2::kDefaultMaxConnectionIdle);
static_assert(kNoTimeLimit == http2::kNoTimeLimit);

namespace {

// On extra loop i: its server's drain, then the server itself (its
// Shutdown() has returned, so it may go at once, even while its Serve() is
// still queued to resume).
Task<void> ShutdownOnItsLoop(std::unique_ptr<http2::Server> server,
                             std::chrono::milliseconds grace) {
  co_await server->Shutdown(grace);
  server.reset();
}

}  // namespace

// One http2::Server per loop, all listening on one port: `home` on the
// caller's loop, `extra[i]` on the server's own loop thread i.
struct Server::Impl {
  explicit Impl(Loop& loop) : home_loop(loop), shutdown(loop) {}
  // The one teardown of every loop's server, in `shutdown`'s task on the
  // home loop (never cancelled).
  Task<void> Teardown(std::chrono::milliseconds grace);

  Loop& home_loop;
  std::unique_ptr<http2::Server> home;
  std::unique_ptr<server::ServingLoops> extra_loops;  // null for one loop
  // extra[i] serves on extra loop i; created here, destroyed there by the
  // teardown.
  std::vector<std::unique_ptr<http2::Server>> extra;
  bool extras_serving = false;
  // Last: destroyed first, it checks that no teardown is still running.
  ShutdownOnce shutdown;
};

StatusOr<std::unique_ptr<Server>> Server::Listen(Loop& loop, std::string_view address,
                                                 std::shared_ptr<const ServiceRegistry> registry,
                                                 ServerOptions options) {
  if (registry == nullptr) return InvalidArgumentError("Server: registry is null");
  StatusOr<SocketAddress> parsed = SocketAddress::Parse(address);
  if (!parsed.ok()) return parsed.status();  // names the address
  const size_t loop_count = server::LoopCountFor(options.loops);
  http2::ServerOptions http2_options;
  http2_options.max_connections = options.max_connections;
  http2_options.max_concurrent_streams = options.max_concurrent_streams;
  http2_options.max_receive_message_size = options.max_receive_message_size;
  http2_options.keepalive_time = options.keepalive_time;
  http2_options.max_connection_idle = options.max_connection_idle;
  http2_options.max_connection_age = options.max_connection_age;
  http2_options.max_connection_age_grace = options.max_connection_age_grace;
  http2_options.handshake_timeout = options.handshake_timeout;
  // The budget is loop-confined: each loop's connections share their part.
  // max_connections is one count for every loop.
  http2_options.request_memory_budget =
      options.request_memory_budget == 0
          ? 0
          : std::max<size_t>(1, options.request_memory_budget / loop_count);
  http2_options = http2::ShareConnectionQuota(std::move(http2_options));
  const bool share_port = loop_count > 1;

  auto impl = std::make_unique<Impl>(loop);
  StatusOr<std::unique_ptr<http2::Server>> home =
      http2::Server::Listen(loop, *parsed, registry, http2_options, share_port);
  if (!home.ok()) return home.status();
  impl->home = *std::move(home);
  if (loop_count > 1) {
    StatusOr<std::unique_ptr<server::ServingLoops>> extra_loops =
        server::ServingLoops::Start(loop_count - 1);
    if (!extra_loops.ok()) return extra_loops.status();
    impl->extra_loops = *std::move(extra_loops);
    // The port the first socket got (port 0 picks one), for every other.
    const SocketAddress bound = impl->home->local_address();
    for (size_t i = 0; i + 1 < loop_count; ++i) {
      // Not serving yet: no task of its loop refers to it, so a failure
      // here destroys it (and the rest) on this thread safely.
      StatusOr<std::unique_ptr<http2::Server>> extra = http2::Server::Listen(
          impl->extra_loops->loop(i), bound, registry, http2_options, share_port);
      if (!extra.ok()) return extra.status();
      impl->extra.push_back(*std::move(extra));
    }
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() = default;

uint16_t Server::port() const { return impl_->home->port(); }

size_t Server::loop_count() const { return 1 + impl_->extra.size(); }

Task<void> Server::Serve() {
  Impl* impl = impl_.get();
  if (!impl->extras_serving && !impl->shutdown.started() && impl->extra_loops != nullptr) {
    impl->extras_serving = true;
    // Each serves on its own loop until the teardown shuts it down there;
    // the teardown's posts come after these on each loop.
    for (size_t i = 0; i < impl->extra.size(); ++i) {
      Loop* loop = &impl->extra_loops->loop(i);
      http2::Server* server = impl->extra[i].get();
      loop->Post([loop, server] { loop->Spawn(server->Serve()); });
    }
  }
  co_await impl->home->Serve();
  // The home loop's server has stopped (a Shutdown(), or this task was
  // cancelled): the others stop too, at once unless a Shutdown() asked for
  // a grace time. Returns on what its join recorded: our caller may
  // destroy the server as soon as we return.
  co_await impl->shutdown.Run([impl] { return impl->Teardown(std::chrono::milliseconds(0)); });
}

Task<void> Server::Shutdown(std::chrono::milliseconds grace) {
  Impl* impl = impl_.get();
  co_await impl->shutdown.Run([impl, grace] { return impl->Teardown(grace); });
}

Task<void> Server::Impl::Teardown(std::chrono::milliseconds grace) {
  // Every loop drains at the same time: the extra loops' servers are
  // handed to their loops (and destroyed there) while the home one drains.
  TaskGroup extras(home_loop);
  if (extra_loops != nullptr) {
    auto released = std::make_shared<std::vector<http2::Server*>>();
    for (auto& server : extra) released->push_back(server.release());
    extra.clear();
    extras.Spawn(server::RunOnEach(home_loop, extra_loops->loops(), [released, grace](size_t i) {
      return ShutdownOnItsLoop(std::unique_ptr<http2::Server>((*released)[i]), grace);
    }));
  }
  co_await home->Shutdown(grace);
  co_await extras.Join();
}

}  // namespace uxds
