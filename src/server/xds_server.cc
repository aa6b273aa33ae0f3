#include "uxds/server.h"

#include <utility>

#include "http2/service_registry.h"
#include "runtime/shutdown_once.h"
#include "runtime/socket_address.h"
#include "server/server_config_watcher.h"
#include "server/serving_listener.h"
#include "server/serving_status_reporter.h"
#include "uxds/loop.h"

namespace uxds {

namespace {

// On the serving loop: the listener's teardown, then the listener itself
// (its Shutdown() has returned, so it may go at once), then word to the
// control thread.
Task<void> ShutdownListener(std::unique_ptr<server::ServingListener> listener,
                            std::chrono::milliseconds grace, Loop* control,
                            std::shared_ptr<Event> done) {
  co_await listener->Shutdown(grace);
  listener.reset();
  control->Post([done] { done->Set(); });
}

}  // namespace

struct XdsServer::Impl {
  explicit Impl(Loop& control) : control_loop(control), shutdown(control) {}
  // The one teardown, in `shutdown`'s task on the control loop (never
  // cancelled).
  Task<void> Teardown(std::chrono::milliseconds grace);

  Loop& control_loop;
  SocketAddress address;
  std::string listening_address;
  std::string listener_name;
  std::shared_ptr<const http2::ServiceRegistry> registry;
  XdsServerOptions options;
  std::shared_ptr<XdsClient> client;
  // Connections and handlers run here.
  std::unique_ptr<LoopThread> serving_thread;
  // Lives on the serving loop; created here, destroyed there.
  std::unique_ptr<server::ServingListener> listener;
  // Control thread; shared with what the serving loop posts back.
  std::shared_ptr<server::ServingStatusReporter> reporter;
  std::unique_ptr<server::ServerConfigWatcher> watcher;
  bool started = false;
  // Last: destroyed first, it checks that no teardown is still running.
  ShutdownOnce shutdown;
};

StatusOr<std::unique_ptr<XdsServer>> XdsServer::Create(
    std::string_view listening_address, std::shared_ptr<const http2::ServiceRegistry> registry,
    XdsServerOptions options) {
  if (options.xds_client_pool == nullptr) {
    return InvalidArgumentError(
        "XdsServerOptions.xds_client_pool: an xDS-enabled server needs one");
  }
  if (registry == nullptr) return InvalidArgumentError("XdsServer: registry is null");
  StatusOr<SocketAddress> address = SocketAddress::Parse(listening_address);
  if (!address.ok()) {
    return InvalidArgumentError("listening address \"" + std::string(listening_address) +
                                "\": " + address.status().message());
  }
  // A36: "XdsServer will not support ephemeral ports".
  if (address->port() == 0) {
    return InvalidArgumentError("listening address \"" + std::string(listening_address) +
                                "\": an xDS-enabled server needs a fixed port, not 0");
  }
  const std::string canonical = address->ToString();
  StatusOr<std::string> listener_name =
      options.xds_client_pool->bootstrap().ServerListenerResourceName(canonical);
  if (!listener_name.ok()) return listener_name.status();
  StatusOr<std::shared_ptr<XdsClient>> client =
      options.xds_client_pool->Get(XdsClientPool::kServerKey);
  if (!client.ok()) return client.status();
  StatusOr<std::unique_ptr<LoopThread>> serving_thread = LoopThread::Start();
  if (!serving_thread.ok()) return serving_thread.status();

  auto impl = std::make_unique<Impl>(options.xds_client_pool->loop());
  impl->address = *address;
  impl->listening_address = canonical;
  impl->listener_name = *std::move(listener_name);
  impl->registry = std::move(registry);
  impl->options = std::move(options);
  impl->client = *std::move(client);
  impl->serving_thread = *std::move(serving_thread);
  impl->reporter = std::make_shared<server::ServingStatusReporter>(impl->listening_address,
                                                                   impl->options.serving_status);
  server::ServingListenerOptions listener_options;
  listener_options.drain_grace_time = impl->options.drain_grace_time;
  listener_options.bind_retry_interval = impl->options.bind_retry_interval;
  listener_options.connection_options.max_connections = impl->options.max_connections;
  listener_options.connection_options.max_connection_idle = impl->options.max_connection_idle;
  listener_options.connection_options.max_connection_age = impl->options.max_connection_age;
  listener_options.connection_options.max_connection_age_grace =
      impl->options.max_connection_age_grace;
  listener_options.connection_options.handshake_timeout = impl->options.handshake_timeout;
  listener_options.connection_options.request_memory_budget = impl->options.request_memory_budget;
  // Bind results travel back to the control thread, where the reporter lives.
  Loop* control = &impl->control_loop;
  std::shared_ptr<server::ServingStatusReporter> reporter = impl->reporter;
  impl->listener = std::make_unique<server::ServingListener>(
      impl->serving_thread->loop(), impl->address, listener_options,
      [control, reporter](Status status) {
        control->Post([reporter, status = std::move(status)]() mutable {
          reporter->SetBindStatus(std::move(status));
        });
      });
  return std::unique_ptr<XdsServer>(new XdsServer(std::move(impl)));
}

XdsServer::XdsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

XdsServer::~XdsServer() {
  impl_->watcher.reset();
  // The serving thread stops and joins here; Shutdown() has already ended
  // everything that ran on it.
  impl_->serving_thread.reset();
}

void XdsServer::Start() {
  if (impl_->started || impl_->shutdown.started()) return;
  impl_->started = true;
  Impl& impl = *impl_;
  Loop* serving = &impl.serving_thread->loop();
  server::ServingListener* listener = impl.listener.get();
  server::ServerConfigWatcher::Callbacks callbacks;
  // The serving state changes on the serving loop first; the status is
  // reported once it has, so "not serving" means no connection gets served.
  Loop* control = &impl.control_loop;
  std::shared_ptr<server::ServingStatusReporter> reporter = impl.reporter;
  auto report_config_status = [control, reporter](Status status) {
    control->Post([reporter, status = std::move(status)]() mutable {
      reporter->SetConfigStatus(std::move(status));
    });
  };
  callbacks.apply = [serving, listener,
                     report_config_status](std::shared_ptr<const server::ServingConfig> config) {
    serving->Post([listener, config = std::move(config), report_config_status]() mutable {
      listener->Apply(std::move(config));
      report_config_status(Status());
    });
  };
  callbacks.update_routes = [serving](std::shared_ptr<server::RouteTable> table,
                                      StatusOr<std::shared_ptr<const RouteConfigResource>> routes) {
    serving->Post([table = std::move(table), routes = std::move(routes)]() mutable {
      table->routes = std::move(routes);
    });
  };
  callbacks.not_serving = [serving, listener, report_config_status](Status reason) {
    serving->Post([listener, reason = std::move(reason), report_config_status]() mutable {
      listener->StopServing();
      report_config_status(std::move(reason));
    });
  };
  impl.watcher = std::make_unique<server::ServerConfigWatcher>(*impl.client, impl.listener_name,
                                                               impl.listening_address,
                                                               impl.registry, std::move(callbacks));
}

Task<void> XdsServer::Shutdown(std::chrono::milliseconds grace) {
  Impl* impl = impl_.get();
  // Returns on what its join recorded: the server may be gone by then.
  co_await impl->shutdown.Run([impl, grace] { return impl->Teardown(grace); });
}

Task<void> XdsServer::Impl::Teardown(std::chrono::milliseconds grace) {
  watcher.reset();
  reporter->Close();
  // The listener shuts down on its own loop and is destroyed there; the
  // control thread hears of it through an Event.
  auto done = std::make_shared<Event>(control_loop);
  Loop* control = &control_loop;
  Loop* serving = &serving_thread->loop();
  server::ServingListener* released = listener.release();
  serving->Post([serving, control, released, grace, done] {
    serving->Spawn(
        ShutdownListener(std::unique_ptr<server::ServingListener>(released), grace, control, done));
  });
  const Status waited = co_await done->Wait();
  (void)waited;  // the teardown's task is never cancelled
  client.reset();
}

const std::string& XdsServer::listening_address() const { return impl_->listening_address; }
const std::string& XdsServer::listener_resource_name() const { return impl_->listener_name; }

}  // namespace uxds
