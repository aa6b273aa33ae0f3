#include "uxds/server.h"

#include <utility>

#include "http2/service_registry.h"
#include "runtime/socket_address.h"
#include "server/server_config_watcher.h"
#include "server/serving_listener.h"
#include "server/serving_status_reporter.h"
#include "uxds/loop.h"

namespace uxds {

struct XdsServer::Impl {
  explicit Impl(Loop& control) : control_loop(control) {}
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
  bool shut_down = false;
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
  if (impl_->started || impl_->shut_down) return;
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
  if (impl_->shut_down) co_return;
  impl_->shut_down = true;
  impl_->watcher.reset();
  impl_->reporter->Close();
  // The listener shuts down on its own loop, is destroyed there once its
  // tasks are done, and the control thread hears of it through an Event.
  auto done = std::make_shared<Event>(impl_->control_loop);
  Loop* control = &impl_->control_loop;
  Loop* serving = &impl_->serving_thread->loop();
  server::ServingListener* listener = impl_->listener.release();
  serving->Post([serving, control, listener, grace, done] {
    auto run = [](Loop* serving, Loop* control, server::ServingListener* listener,
                  std::chrono::milliseconds grace, std::shared_ptr<Event> done) -> Task<void> {
      co_await listener->Shutdown(grace);
      // Destroyed from a posted function, once this coroutine has finished.
      serving->Post([listener, control, done] {
        delete listener;
        control->Post([done] { done->Set(); });
      });
    };
    serving->Spawn(run(serving, control, listener, grace, done));
  });
  const Status waited = co_await done->Wait();
  (void)waited;
  impl_->client.reset();
}

const std::string& XdsServer::listening_address() const { return impl_->listening_address; }
const std::string& XdsServer::listener_resource_name() const { return impl_->listener_name; }

}  // namespace uxds
