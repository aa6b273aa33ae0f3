#include "uxds/server.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "http2/service_registry.h"
#include "runtime/shutdown_once.h"
#include "runtime/socket_address.h"
#include "server/server_config_watcher.h"
#include "server/serving_listener.h"
#include "server/serving_loops.h"
#include "server/serving_status_reporter.h"
#include "uxds/loop.h"

namespace uxds {

namespace {

// On serving loop i: the listener's teardown, then the listener itself (its
// Shutdown() has returned, so it may go at once).
Task<void> ShutdownListener(std::unique_ptr<server::ServingListener> listener,
                            std::chrono::milliseconds grace) {
  co_await listener->Shutdown(grace);
  listener.reset();
}

// A36: the serving state changes on every serving loop first; `report`
// runs (posted to the control loop) once the last loop has made the change,
// so "not serving" means no loop serves a new connection any more.
void OnEveryLoop(const std::vector<Loop*>& loops, std::function<void(size_t)> change,
                 std::function<void()> report) {
  auto remaining = std::make_shared<std::atomic<size_t>>(loops.size());
  auto shared_change = std::make_shared<const std::function<void(size_t)>>(std::move(change));
  auto shared_report = std::make_shared<const std::function<void()>>(std::move(report));
  for (size_t i = 0; i < loops.size(); ++i) {
    loops[i]->Post([i, remaining, shared_change, shared_report] {
      (*shared_change)(i);
      // acq_rel: the last loop's report comes after every loop's change.
      if (remaining->fetch_sub(1, std::memory_order_acq_rel) == 1) (*shared_report)();
    });
  }
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
  // Connections and handlers run here, on every loop.
  std::unique_ptr<server::ServingLoops> serving;
  // listeners[i] lives on serving loop i; created here, destroyed there.
  std::vector<std::unique_ptr<server::ServingListener>> listeners;
  // Control thread; shared with what the serving loop posts back.
  std::shared_ptr<server::ServingStatusReporter> reporter;
  std::unique_ptr<server::ServerConfigWatcher> watcher;
  // A29: whether chains' xDS security config applies (xDS credentials),
  // and how the chains without one are secured (null: plaintext).
  bool xds_security = false;
  std::shared_ptr<const server::DownstreamTls> fallback_tls;
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
  bool xds_security = false;
  StatusOr<std::shared_ptr<const server::DownstreamTls>> fallback_tls =
      server::FallbackTlsOf(options.credentials, xds_security);
  if (!fallback_tls.ok()) return fallback_tls.status();
  const std::string canonical = address->ToString();
  StatusOr<std::string> listener_name =
      options.xds_client_pool->bootstrap().ServerListenerResourceName(canonical);
  if (!listener_name.ok()) return listener_name.status();
  StatusOr<std::shared_ptr<XdsClient>> client =
      options.xds_client_pool->Get(XdsClientPool::kServerKey);
  if (!client.ok()) return client.status();
  const size_t loop_count = server::LoopCountFor(options.serving_loops);
  if (options.serving_loops > server::kMaxServingLoops) {
    return InvalidArgumentError(
        "XdsServerOptions.serving_loops: " + std::to_string(options.serving_loops) +
        " is more than " + std::to_string(server::kMaxServingLoops));
  }
  StatusOr<std::unique_ptr<server::ServingLoops>> serving = server::ServingLoops::Start(loop_count);
  if (!serving.ok()) return serving.status();

  auto impl = std::make_unique<Impl>(options.xds_client_pool->loop());
  impl->address = *address;
  impl->listening_address = canonical;
  impl->listener_name = *std::move(listener_name);
  impl->registry = std::move(registry);
  impl->options = std::move(options);
  impl->client = *std::move(client);
  impl->serving = *std::move(serving);
  impl->xds_security = xds_security;
  impl->fallback_tls = *std::move(fallback_tls);
  impl->reporter = std::make_shared<server::ServingStatusReporter>(
      impl->listening_address, impl->options.serving_status, loop_count);
  server::ServingListenerOptions listener_options;
  listener_options.drain_grace_time = impl->options.drain_grace_time;
  listener_options.bind_retry_interval = impl->options.bind_retry_interval;
  listener_options.connection_options.max_connections = impl->options.max_connections;
  listener_options.connection_options.max_connection_idle = impl->options.max_connection_idle;
  listener_options.connection_options.max_connection_age = impl->options.max_connection_age;
  listener_options.connection_options.max_connection_age_grace =
      impl->options.max_connection_age_grace;
  listener_options.connection_options.handshake_timeout = impl->options.handshake_timeout;
  // Each loop's connections share their part of the budget (it is
  // loop-confined); max_connections is one count for all loops.
  listener_options.connection_options.request_memory_budget =
      server::LoopShareOfBudget(impl->options.request_memory_budget, loop_count,
                                listener_options.connection_options.max_receive_message_size);
  listener_options.connection_options =
      http2::ShareConnectionQuota(std::move(listener_options.connection_options));
  // One listening socket per loop, not one acceptor: see serving_loops.h.
  listener_options.share_port = loop_count > 1;
  // Bind results travel back to the control thread, where the reporter lives.
  Loop* control = &impl->control_loop;
  std::shared_ptr<server::ServingStatusReporter> reporter = impl->reporter;
  for (size_t i = 0; i < loop_count; ++i) {
    impl->listeners.push_back(std::make_unique<server::ServingListener>(
        impl->serving->loop(i), impl->address, listener_options,
        [control, reporter, i](Status status) {
          control->Post([reporter, i, status = std::move(status)]() mutable {
            reporter->SetBindStatus(i, std::move(status));
          });
        }));
  }
  return std::unique_ptr<XdsServer>(new XdsServer(std::move(impl)));
}

XdsServer::XdsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

XdsServer::~XdsServer() {
  impl_->watcher.reset();
  // The serving threads stop and join here; Shutdown() has already ended
  // everything that ran on them.
  impl_->serving.reset();
}

void XdsServer::Start() {
  if (impl_->started || impl_->shutdown.started()) return;
  impl_->started = true;
  Impl& impl = *impl_;
  const std::vector<Loop*>& loops = impl.serving->loops();
  std::vector<server::ServingListener*> listeners;
  for (const auto& listener : impl.listeners) listeners.push_back(listener.get());
  server::ServerConfigWatcher::Callbacks callbacks;
  // The serving state changes on the serving loops first; the status is
  // reported once it has, so "not serving" means no connection gets served.
  Loop* control = &impl.control_loop;
  std::shared_ptr<server::ServingStatusReporter> reporter = impl.reporter;
  auto report_config_status = [control, reporter](Status status) {
    control->Post([reporter, status = std::move(status)]() mutable {
      reporter->SetConfigStatus(std::move(status));
    });
  };
  callbacks.apply = [loops, listeners,
                     report_config_status](std::shared_ptr<const server::ServingConfig> config) {
    // One immutable version, shared read-only by every loop.
    OnEveryLoop(
        loops, [listeners, config](size_t i) { listeners[i]->Apply(config); },
        [report_config_status] { report_config_status(Status()); });
  };
  // Connections on every loop read the table; it publishes each version
  // by swapping one pointer.
  callbacks.update_routes = [](std::shared_ptr<server::RouteTable> table,
                               StatusOr<std::shared_ptr<const RouteConfigResource>> routes) {
    table->Set(std::move(routes));
  };
  callbacks.not_serving = [loops, listeners, report_config_status](Status reason) {
    OnEveryLoop(
        loops, [listeners](size_t i) { listeners[i]->StopServing(); },
        [report_config_status, reason] { report_config_status(reason); });
  };
  // A29: only xDS credentials let the control plane secure a chain.
  callbacks.tls_for =
      [xds_security = impl.xds_security, fallback = impl.fallback_tls,
       pool = impl.options.xds_client_pool](
          const FilterChain& chain) -> std::shared_ptr<const server::DownstreamTls> {
    if (!xds_security || !chain.downstream_tls_context.has_value()) return fallback;
    return server::DownstreamTls::FromXds(pool->bootstrap(), *chain.downstream_tls_context,
                                          chain.name);
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
  // Each listener shuts down on its own loop and is destroyed there; the
  // control thread hears when all have.
  auto released = std::make_shared<std::vector<server::ServingListener*>>();
  for (auto& listener : listeners) released->push_back(listener.release());
  listeners.clear();
  co_await server::RunOnEach(control_loop, serving->loops(), [released, grace](size_t i) {
    return ShutdownListener(std::unique_ptr<server::ServingListener>((*released)[i]), grace);
  });
  client.reset();
}

const std::string& XdsServer::listening_address() const { return impl_->listening_address; }
const std::string& XdsServer::listener_resource_name() const { return impl_->listener_name; }

}  // namespace uxds
