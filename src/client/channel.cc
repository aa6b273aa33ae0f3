// Channel (include/uxds/client_channel.h): the XdsDependencyManager's
// configs feed one ClusterLoadBalancer per cluster the routes name; each
// call is routed, hashed, picked and run on the picked endpoint's
// connection, all on the control loop.
#include "uxds/client_channel.h"

#include <string>
#include <utility>

#include "client/channel_impl.h"
#include "client/client_stream_impl.h"
#include "uxds/log.h"
#include "xds/client/xds_client_impl.h"

namespace uxds {

using client_internal::CallRequest;
using client_internal::CompiledRoutes;
using client_internal::ParsedTarget;

namespace {

StatusOr<ParsedTarget> ParseTarget(std::string_view target) {
  ParsedTarget parsed;
  if (target.starts_with("xds:")) {
    parsed.xds = true;
    std::string_view rest = target.substr(4);
    if (rest.starts_with("//")) {
      rest.remove_prefix(2);
      const size_t slash = rest.find('/');
      if (slash == std::string_view::npos) {
        return InvalidArgumentError("xds target \"" + std::string(target) + "\" has no path");
      }
      parsed.authority = std::string(rest.substr(0, slash));
      rest.remove_prefix(slash + 1);
    }
    if (rest.empty()) {
      return InvalidArgumentError("xds target \"" + std::string(target) + "\" names no service");
    }
    parsed.name = std::string(rest);
    return parsed;
  }
  for (std::string_view scheme : {"dns:///", "dns:"}) {
    if (target.starts_with(scheme)) {
      target.remove_prefix(scheme.size());
      break;
    }
  }
  if (target.empty() || target.find(':') == std::string_view::npos) {
    return InvalidArgumentError("target \"" + std::string(target) +
                                "\" is neither xds:///name nor host:port");
  }
  parsed.name = std::string(target);
  return parsed;
}

// How the channel's LOGICAL_DNS clusters are resolved: the options' lookup,
// else the system's.
HostResolver::Lookup LookupFor(const ChannelOptions& options) {
  if (!options.resolve_host) return &HostResolver::ResolveBlocking;
  return [resolve = options.resolve_host](
             const std::string& host,
             const std::string& port) -> StatusOr<std::vector<SocketAddress>> {
    StatusOr<std::vector<std::string>> answer = resolve(host, port);
    if (!answer.ok()) return answer.status();
    std::vector<SocketAddress> addresses;
    for (const std::string& text : *answer) {
      StatusOr<SocketAddress> address = SocketAddress::Parse(text);
      if (!address.ok()) return address.status();
      addresses.push_back(*address);
    }
    return addresses;
  };
}

}  // namespace

StatusOr<std::unique_ptr<Channel>> Channel::Create(Loop& loop, std::string_view target,
                                                   ChannelOptions options) {
  StatusOr<ParsedTarget> parsed = ParseTarget(target);
  if (!parsed.ok()) return parsed.status();
  auto impl = std::make_unique<Impl>(loop, std::move(options));
  impl->target = *std::move(parsed);
  UXDS_RETURN_IF_ERROR(impl->UseCredentials());
  SubchannelOptions subchannel_options;
  subchannel_options.initial_backoff = impl->options.initial_backoff;
  subchannel_options.max_backoff = impl->options.max_backoff;
  subchannel_options.min_connect_timeout = impl->options.min_connect_timeout;
  impl->subchannels = SubchannelPool::Create(loop, subchannel_options);
  // Other loops' connections: as the subchannels', and closed on every
  // loop when their endpoint leaves.
  impl->shared->connection = subchannel_options.connection;
  impl->shared->connection.connect_timeout = subchannel_options.min_connect_timeout;
  impl->shared->backoff = {subchannel_options.initial_backoff,
                           subchannel_options.backoff_multiplier, subchannel_options.backoff_jitter,
                           subchannel_options.max_backoff};
  impl->shared->idle_timeout = impl->options.loop_connection_idle_timeout;
  impl->subchannels->SetReleaseObserver([shared = impl->shared](uint32_t index, uint64_t uid) {
    shared->NotifyEndpointLeft(index, uid);
  });
  Impl* self = impl.get();
  if (impl->target.xds) {
    if (impl->options.xds_client_pool == nullptr) {
      return InvalidArgumentError("an xds: target needs ChannelOptions::xds_client_pool");
    }
    StatusOr<std::string> listener =
        impl->options.xds_client_pool->bootstrap().ClientListenerResourceName(
            impl->target.authority, impl->target.name);
    if (!listener.ok()) return listener.status();
    StatusOr<std::shared_ptr<XdsClient>> client =
        impl->options.xds_client_pool->Get(std::string(target));
    if (!client.ok()) return client.status();
    impl->xds_client = *std::move(client);
    // A28: the data-plane authority, which picks the virtual host, is the
    // target's name.
    impl->dependencies = std::make_unique<XdsDependencyManager>(
        *impl->xds_client, *listener, impl->target.name,
        [self](StatusOr<std::shared_ptr<const XdsConfig>> update) {
          self->OnConfig(std::move(update));
        },
        LookupFor(impl->options), impl->options.min_time_between_resolutions);
    // While no config has come, other loops' calls read what the channel
    // waits for from the snapshot: a new one each time that changes.
    impl->dependencies->SetProgressObserver([self] {
      if (self->routes == nullptr && !self->config_failed) self->LinkRoutes();
    });
  } else {
    impl->direct_cluster = impl->target.name;
    impl->routes = CompiledRoutes::Direct(impl->direct_cluster);
    impl->resolver = std::make_unique<HostResolver>(loop);
    impl->tasks.Spawn(impl->ResolveDirect());
  }
  impl->LinkRoutes();  // the first snapshot: calls wait for a config
  return std::unique_ptr<Channel>(new Channel(std::move(impl)));
}

Channel::Channel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->async_gate->channel = this;
}

Channel::~Channel() {
  // A closure still queued for the loop must not find a freed channel.
  impl_->async_gate->channel = nullptr;
}

Task<void> Channel::Shutdown() {
  // Nothing of the channel is read once the teardown has ended: the first
  // caller to return may destroy it under the others.
  Impl* impl = impl_.get();
  // Calls of other threads arriving from now on fail UNAVAILABLE, also
  // before the teardown's task has started.
  impl->async_gate->channel = nullptr;
  co_await impl->shutdown.Run([impl] { return impl->TearDown(); });
}

Task<void> Channel::Impl::TearDown() {
  // Calls from other threads: a closure arriving from now on fails its
  // call at once; the ones running end CANCELLED (each `done` runs).
  async_gate->channel = nullptr;
  co_await async_calls.CancelAndJoin();
  co_await tasks.CancelAndJoin();
  if (dependencies != nullptr) co_await dependencies->Shutdown();
  dependencies.reset();
  clusters.clear();
  routes = nullptr;
  LinkRoutes();  // a closed snapshot: every loop's calls fail from now on
  WakeWaiters();
  if (waiting_calls > 0) {
    Event left(loop);
    last_call_left = &left;
    (void)co_await left.Wait();  // the teardown's task is never cancelled
    last_call_left = nullptr;
  }
  // The cluster trees the older snapshots own go before the subchannels:
  // a loop reads a snapshot only inside a pick, so this ends soon.
  reclaim_timer.Cancel();
  while (shared->snapshots.Reclaim() > 0) {
    (void)co_await SleepUntil(loop, Loop::Clock::now() + std::chrono::milliseconds(1));
  }
  co_await subchannels->Shutdown();
  // The XdsClient's LRS streams send this channel's last counts and end
  // once no channel reports to them.
  xds_client.reset();
}

Task<bool> Channel::Impl::WaitForChange(std::optional<Loop::Clock::time_point> deadline) {
  if (shutdown.started()) co_return true;
  ++waiting_calls;
  const bool in_time = co_await client_internal::WaitForWake(loop, waiters, deadline);
  if (--waiting_calls == 0 && last_call_left != nullptr) last_call_left->Set();
  co_return in_time;
}

void Channel::Impl::LinkRoutes() {
  auto snapshot = std::make_unique<client_internal::CallSnapshot>();
  snapshot->routes = routes;
  snapshot->closed = shutdown.started();
  snapshot->config_failed = config_failed;
  snapshot->config_error = config_error;
  snapshot->direct = !direct_cluster.empty();
  snapshot->channel_id = channel_id;
  if (dependencies != nullptr) snapshot->waiting_for = dependencies->WaitingFor();
  if (routes != nullptr) {
    snapshot->clusters.reserve(routes->clusters().size());
    for (const std::string& name : routes->clusters()) {
      client_internal::SnapshotCluster& entry = snapshot->clusters.emplace_back();
      auto found = clusters.find(name);
      if (found == clusters.end()) continue;
      entry.id = found->second.id;
      entry.lb = found->second.lb;
      entry.error = found->second.error;
      entry.note = found->second.note;
    }
  }
  shared->snapshots.Publish(snapshot.release());
  ScheduleReclaim();
}

void Channel::Impl::ScheduleReclaim() {
  if (shared->snapshots.retired() == 0 || reclaim_timer.pending()) return;
  // As ClusterLoadBalancer batches its pickers' reclamation: a config
  // burst costs one scan of the readers.
  reclaim_timer.Start(std::chrono::milliseconds(1), [this] {
    shared->snapshots.Reclaim();
    ScheduleReclaim();
  });
}

bool Channel::Impl::PickNow(CallRequest& request, std::optional<CallRoute>& route,
                            PickedEndpoint& picked, PickMiss& miss) {
  if (shutdown.started()) {
    miss = {PickMiss::Next::kFail, UnavailableError("channel shut down")};
    return false;
  }
  PickScope snapshot_scope(shared->snapshots);
  const auto& snapshot =
      *static_cast<const client_internal::CallSnapshot*>(snapshot_scope.picker());
  if (PickIn(snapshot, request, route, picked, miss)) return true;
  client_internal::PinRoute(snapshot, route);
  return false;
}

bool Channel::Impl::PickIn(const client_internal::CallSnapshot& snapshot, CallRequest& request,
                           std::optional<CallRoute>& route, PickedEndpoint& picked,
                           PickMiss& miss) {
  const client_internal::SnapshotCluster* cluster =
      client_internal::RouteCall(snapshot, request, route, miss);
  if (cluster == nullptr) return false;
  // The endpoint, and the subchannel it names, live while this scope does.
  PickScope scope(cluster->lb->picker_slot());
  const PickResult result = client_internal::PickInCluster(*cluster, scope, *route, request, miss);
  if (result.kind != PickResult::Kind::kComplete) return false;
  Subchannel* subchannel = result.endpoint->subchannel;
  http2::ClientConnection* connection = subchannel != nullptr ? subchannel->connection() : nullptr;
  if (connection == nullptr) {
    CallNotStarted(result);
    miss = {PickMiss::Next::kWait, Status(), PickMiss::Waiting::kEndpoint};
    return false;
  }
  picked.connection = connection;
  picked.peer_address = &subchannel->address();
  picked.pool = SubchannelPool::CallHold(subchannels.get());
  picked.subchannel = SubchannelRef(subchannel);
  picked.CountIn(result);
  return true;
}

Status Channel::Impl::ClusterFailure(const CallRoute& route) const {
  auto it = clusters.find(route.cluster_name());
  if (it == clusters.end() || it->second.lb == nullptr) return Status();
  return it->second.lb->status();
}

int64_t client_internal::PickersPublished(const Channel& channel, std::string_view cluster) {
  const auto& clusters = channel.impl_->clusters;
  auto it = clusters.find(cluster);
  if (it == clusters.end() || it->second.lb == nullptr) return -1;
  return static_cast<int64_t>(it->second.lb->pickers_published());
}

Task<StatusOr<UnaryResponse>> Channel::UnaryCall(std::string method, std::string request,
                                                 CallOptions options) {
  StatusOr<UnaryResponse> reply = co_await client_internal::RunUnaryCall(
      *impl_, impl_->loop, std::move(method), std::move(request), std::move(options));
  co_return reply;
}

Task<StatusOr<std::unique_ptr<ClientStream>>> Channel::StartStream(std::string method,
                                                                   CallOptions options) {
  StatusOr<std::unique_ptr<ClientStream>> stream = co_await client_internal::RunStartStream(
      *impl_, impl_->loop, std::move(method), std::move(options), nullptr);
  co_return stream;
}

namespace {

// A call the teardown cancelled fails CANCELLED, whatever error the
// cancellation surfaced as inside it (a pick's wait, a connection's read).
template <typename T>
StatusOr<T> CancelledIfShuttingDown(StatusOr<T> result, CancelState* cancel) {
  if (!result.ok() && cancel != nullptr && cancel->cancelled()) {
    return CancelledError("the channel is shutting down");
  }
  return result;
}

// On the channel's loop: one call of another thread's, its result to `done`.
Task<void> RunUnaryForAnotherThread(Channel& channel, std::string method, std::string request,
                                    CallOptions options,
                                    std::function<void(StatusOr<UnaryResponse>)> done) {
  StatusOr<UnaryResponse> reply =
      co_await channel.UnaryCall(std::move(method), std::move(request), std::move(options));
  // Bound to a variable first: g++ 12.2 miscompiles some co_await operands.
  CancelState* cancel = co_await CurrentCancelState();
  done(CancelledIfShuttingDown(std::move(reply), cancel));
}

Task<void> RunStartStreamForAnotherThread(
    Channel& channel, std::string method, CallOptions options,
    std::function<void(StatusOr<std::unique_ptr<ClientStream>>)> done) {
  StatusOr<std::unique_ptr<ClientStream>> stream =
      co_await channel.StartStream(std::move(method), std::move(options));
  CancelState* cancel = co_await CurrentCancelState();
  done(CancelledIfShuttingDown(std::move(stream), cancel));
}

Status ChannelShutDown() { return UnavailableError("the channel is shut down"); }

// An empty callback is the caller's mistake: said in the log, never a throw
// through the loop's queue of posted closures.
template <typename Done>
bool HasCallback(const Done& done, const char* api) {
  if (done) return true;
  Log(LogSeverity::kError, std::string("Channel::") + api + ": no callback given; call dropped");
  return false;
}

}  // namespace

void Channel::UnaryCallAsync(std::string method, std::string request, CallOptions options,
                             std::function<void(StatusOr<UnaryResponse>)> done) {
  if (!HasCallback(done, "UnaryCallAsync")) return;
  // The gate, not the channel, travels: the closure may run after the
  // channel is gone.
  impl_->loop.Post([gate = impl_->async_gate, method = std::move(method),
                    request = std::move(request), options = std::move(options),
                    done = std::move(done)]() mutable {
    if (gate->channel == nullptr) {
      done(ChannelShutDown());
      return;
    }
    Channel& channel = *gate->channel;
    channel.impl_->async_calls.Spawn(RunUnaryForAnotherThread(
        channel, std::move(method), std::move(request), std::move(options), std::move(done)));
  });
}

void Channel::StartStreamAsync(std::string method, CallOptions options,
                               std::function<void(StatusOr<std::unique_ptr<ClientStream>>)> done) {
  if (!HasCallback(done, "StartStreamAsync")) return;
  impl_->loop.Post([gate = impl_->async_gate, method = std::move(method),
                    options = std::move(options), done = std::move(done)]() mutable {
    if (gate->channel == nullptr) {
      done(ChannelShutDown());
      return;
    }
    Channel& channel = *gate->channel;
    channel.impl_->async_calls.Spawn(RunStartStreamForAnotherThread(
        channel, std::move(method), std::move(options), std::move(done)));
  });
}

}  // namespace uxds
