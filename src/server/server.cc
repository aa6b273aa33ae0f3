// uxds::Server: the public face of the HTTP/2 server (http2::Server), on
// one loop or several.
#include "http2/server.h"

#include <string>
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

// One extra loop's server and what its loop knows of it. The http2::Server
// is created and destroyed on that loop's thread; the home loop only hands
// the struct over.
struct ExtraServer {
  explicit ExtraServer(Loop& loop) : loop(loop), serve_left(loop) {}
  Loop& loop;
  std::unique_ptr<http2::Server> server;
  // Set (on the home thread, before the post that starts it) when Serve()
  // runs on this loop; the teardown then waits for `serve_left`, so that
  // the server outlives its Serve() frame whatever order the loop runs
  // the two in.
  bool serving = false;
  Event serve_left;
};

namespace {

// On the extra loop: serves until the teardown shuts the server down.
Task<void> ServeOnItsLoop(ExtraServer* extra) {
  co_await extra->server->Serve();
  extra->serve_left.Set();
}

// On the extra loop: its server's drain, then, once its Serve() has left,
// the server itself.
Task<void> ShutdownOnItsLoop(std::unique_ptr<ExtraServer> extra, std::chrono::milliseconds grace) {
  co_await extra->server->Shutdown(grace);
  if (extra->serving) {
    const Status left = co_await extra->serve_left.Wait();
    (void)left;  // the teardown's tasks are never cancelled
  }
  extra.reset();
}

}  // namespace

// One http2::Server per loop, all listening on one port: `home` on the
// caller's loop, extra[i] on the server's own loop thread i.
struct Server::Impl {
  explicit Impl(Loop& loop) : home_loop(loop), serve_left(loop), shutdown(loop) {}
  // The one teardown of every loop's server, in `shutdown`'s task on the
  // home loop (never cancelled).
  Task<void> Teardown(std::chrono::milliseconds grace);
  // Destroys each extra server on its own loop (a failed Listen()).
  void DestroyExtrasOnTheirLoops();

  Loop& home_loop;
  std::unique_ptr<http2::Server> home;
  std::unique_ptr<server::ServingLoops> extra_loops;  // null for one loop
  // extra[i] lives on extra loop i; the teardown hands each to its loop.
  std::vector<std::unique_ptr<ExtraServer>> extra;
  size_t loop_count = 1;
  enum class ServeState { kNotStarted, kServing, kLeft };
  ServeState serve_state = ServeState::kNotStarted;
  // Set when Serve() has come back from the home server: the teardown
  // waits for it, so that no Serve() frame reads the server after the
  // teardown has ended (the caller of Shutdown() may then destroy it).
  Event serve_left;
  // Last: destroyed first, it checks that no teardown is still running.
  ShutdownOnce shutdown;
};

void Server::Impl::DestroyExtrasOnTheirLoops() {
  // An extra's listening socket is registered with its running loop (its
  // epoll set): it goes on that loop's thread, never on this one.
  for (size_t i = 0; i < extra.size(); ++i) {
    extra_loops->RunSync(i, [&] { extra[i].reset(); });
  }
  extra.clear();
}

StatusOr<std::unique_ptr<Server>> Server::Listen(Loop& loop, std::string_view address,
                                                 std::shared_ptr<const ServiceRegistry> registry,
                                                 ServerOptions options) {
  if (registry == nullptr) return InvalidArgumentError("Server: registry is null");
  StatusOr<SocketAddress> parsed = SocketAddress::Parse(address);
  if (!parsed.ok()) return parsed.status();  // names the address
  const size_t loop_count = server::LoopCountFor(options.loops);
  if (options.loops > server::kMaxServingLoops) {
    return InvalidArgumentError("ServerOptions.loops: " + std::to_string(options.loops) +
                                " is more than " + std::to_string(server::kMaxServingLoops));
  }
  http2::ServerOptions http2_options;
  http2_options.max_connections = options.max_connections;
  http2_options.max_concurrent_streams = options.max_concurrent_streams;
  http2_options.max_receive_message_size = options.max_receive_message_size;
  http2_options.keepalive_time = options.keepalive_time;
  http2_options.max_connection_idle = options.max_connection_idle;
  http2_options.max_connection_age = options.max_connection_age;
  http2_options.max_connection_age_grace = options.max_connection_age_grace;
  http2_options.handshake_timeout = options.handshake_timeout;
  http2_options.request_memory_budget = server::LoopShareOfBudget(
      options.request_memory_budget, loop_count, options.max_receive_message_size);
  http2_options = http2::ShareConnectionQuota(std::move(http2_options));
  // One listening socket per loop, not one acceptor: see serving_loops.h.
  const bool share_port = loop_count > 1;

  auto impl = std::make_unique<Impl>(loop);
  impl->loop_count = loop_count;
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
      // Made on its own loop's thread, as it will be destroyed there.
      Loop& extra_loop = impl->extra_loops->loop(i);
      auto extra = std::make_unique<ExtraServer>(extra_loop);
      Status listened;
      impl->extra_loops->RunSync(i, [&] {
        StatusOr<std::unique_ptr<http2::Server>> server =
            http2::Server::Listen(extra_loop, bound, registry, http2_options, share_port);
        if (server.ok()) {
          extra->server = *std::move(server);
        } else {
          listened = server.status();
        }
      });
      if (!listened.ok()) {
        impl->DestroyExtrasOnTheirLoops();
        return listened;
      }
      impl->extra.push_back(std::move(extra));
    }
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() = default;

uint16_t Server::port() const { return impl_->home->port(); }

size_t Server::loop_count() const { return impl_->loop_count; }

Task<void> Server::Serve() {
  Impl* impl = impl_.get();
  if (impl->serve_state == Impl::ServeState::kNotStarted && !impl->shutdown.started()) {
    impl->serve_state = Impl::ServeState::kServing;
    for (std::unique_ptr<ExtraServer>& extra : impl->extra) {
      extra->serving = true;
      ExtraServer* on_loop = extra.get();
      extra->loop.Post([on_loop] { on_loop->loop.Spawn(ServeOnItsLoop(on_loop)); });
    }
    co_await impl->home->Serve();
    impl->serve_state = Impl::ServeState::kLeft;
    impl->serve_left.Set();
    // The home loop's server has stopped (a Shutdown(), or this task was
    // cancelled): the other loops stop too, at once unless a Shutdown()
    // asked for a grace time.
    co_await impl->shutdown.Run([impl] { return impl->Teardown(std::chrono::milliseconds(0)); });
    co_return;
  }
  // Returns on what its join recorded: our caller may destroy the server
  // as soon as we return.
  if (impl->shutdown.started()) {
    co_await impl->shutdown.Run([impl] { return impl->Teardown(std::chrono::milliseconds(0)); });
  }
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
    auto released = std::make_shared<std::vector<ExtraServer*>>();
    for (std::unique_ptr<ExtraServer>& server : extra) released->push_back(server.release());
    extra.clear();
    extras.Spawn(server::RunOnEach(home_loop, extra_loops->loops(), [released, grace](size_t i) {
      return ShutdownOnItsLoop(std::unique_ptr<ExtraServer>((*released)[i]), grace);
    }));
  }
  co_await home->Shutdown(grace);
  co_await extras.Join();
  if (serve_state == ServeState::kServing) {
    const Status left = co_await serve_left.Wait();
    (void)left;  // the teardown's task is never cancelled
  }
}

}  // namespace uxds
