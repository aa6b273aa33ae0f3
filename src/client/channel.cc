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

using client_internal::CallHeaders;
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
  SubchannelOptions subchannel_options;
  subchannel_options.initial_backoff = impl->options.initial_backoff;
  subchannel_options.max_backoff = impl->options.max_backoff;
  subchannel_options.min_connect_timeout = impl->options.min_connect_timeout;
  impl->subchannels = SubchannelPool::Create(loop, subchannel_options);
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
  } else {
    impl->direct_cluster = impl->target.name;
    impl->routes = CompiledRoutes::Direct(impl->direct_cluster);
    impl->LinkRoutes();
    impl->resolver = std::make_unique<HostResolver>(loop);
    impl->tasks.Spawn(impl->ResolveDirect());
  }
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
  LinkRoutes();
  WakeWaiters();
  if (waiting_calls > 0) {
    Event left(loop);
    last_call_left = &left;
    (void)co_await left.Wait();  // the teardown's task is never cancelled
    last_call_left = nullptr;
  }
  co_await subchannels->Shutdown();
  // The XdsClient's LRS streams send this channel's last counts and end
  // once no channel reports to them.
  xds_client.reset();
}

Task<bool> Channel::Impl::WaitForChange(std::optional<Loop::Clock::time_point> deadline) {
  if (shutdown.started()) co_return true;
  if (deadline.has_value() && Loop::Clock::now() >= *deadline) co_return false;
  Event changed(loop);
  Timer timer(loop);
  if (deadline.has_value()) {
    timer.Start(*deadline - Loop::Clock::now(), [&changed] { changed.Set(); });
  }
  waiters.push_back(&changed);
  ++waiting_calls;
  const Status waited = co_await changed.Wait();
  std::erase(waiters, &changed);
  timer.Cancel();
  if (--waiting_calls == 0 && last_call_left != nullptr) last_call_left->Set();
  if (!waited.ok()) co_return false;
  co_return !deadline.has_value() || Loop::Clock::now() < *deadline;
}

void Channel::Impl::LinkRoutes() {
  route_clusters.clear();
  if (routes == nullptr) return;
  route_clusters.reserve(routes->clusters().size());
  for (const std::string& name : routes->clusters()) {
    auto found = clusters.find(name);
    route_clusters.push_back(found != clusters.end() ? &found->second : nullptr);
  }
}

bool Channel::Impl::PickNow(CallRequest& request, std::optional<CallRoute>& route,
                            PickedEndpoint& picked, PickMiss& miss) {
  using Next = PickMiss::Next;
  using Waiting = PickMiss::Waiting;
  if (shutdown.started()) {
    miss = {Next::kFail, UnavailableError("channel shut down")};
    return false;
  }
  if (route.has_value() && route->routes != routes) {
    // New routes: the call keeps its cluster while they still name it, else
    // it is routed by them (gRPC keeps the old cluster alive for it
    // instead).
    const std::string& name = route->routes->clusters()[route->cluster];
    std::optional<uint32_t> index = routes != nullptr ? routes->IndexOf(name) : std::nullopt;
    if (index.has_value()) {
      route->routes = routes;
      route->cluster = *index;
    } else {
      route.reset();
    }
  }
  if (!route.has_value()) {
    if (routes == nullptr) {
      // No config yet: every call waits for the first one (gRPC queues
      // them while the resolver has not returned).
      miss = config_failed ? PickMiss{Next::kWaitOrFail, config_error}
                           : PickMiss{Next::kWait, Status(), Waiting::kConfig};
      return false;
    }
    CompiledRoutes::Choice choice;
    switch (routes->Choose(request, channel_id, choice)) {
      case CompiledRoutes::Outcome::kRouted:
        break;
      case CompiledRoutes::Outcome::kNoRoute:
        miss = {Next::kFail,
                UnavailableError("no matching route found for " + std::string(request.path()))};
        return false;
      case CompiledRoutes::Outcome::kNotForwarding:
        miss = {Next::kFail, UnavailableError("matched route does not have a forwarding action")};
        return false;
    }
    route.emplace(CallRoute{routes, choice.cluster, choice.hash});
  }
  ClusterState* cluster = route_clusters[route->cluster];
  if (cluster == nullptr || cluster->lb == nullptr) {
    const std::string& name = routes->clusters()[route->cluster];
    if (cluster == nullptr && !direct_cluster.empty()) {
      // A host:port target still resolving (gRPC queues the call), or one
      // whose name did not resolve.
      miss = config_failed ? PickMiss{Next::kWaitOrFail, config_error}
                           : PickMiss{Next::kWait, UnavailableError("resolving " + name),
                                      Waiting::kResolving};
      return false;
    }
    miss = {Next::kWaitOrFail,
            cluster == nullptr
                ? UnavailableError("cluster " + name + " is not ready")
                : Status(StatusCode::kUnavailable,
                         "cluster " + name + ": " + std::string(cluster->error.message()))};
    return false;
  }
  PickArgs args;
  args.hash = route->hash;
  args.headers = request.headers();
  Subchannel* subchannel = nullptr;
  PickResult call_end;  // what CallFinished() reports when the call ends
  {
    PickScope scope(cluster->lb->picker_slot());
    const PickResult result = scope.Pick(args);
    if (result.kind == PickResult::Kind::kFail) {
      // A88: failed calls carry the cluster's resolution note.
      miss = {result.drop ? Next::kFail : Next::kWaitOrFail,
              Status(StatusCode::kUnavailable,
                     std::string(result.status->message()) + " (" + cluster->note + ")")};
      return false;
    }
    if (result.kind == PickResult::Kind::kComplete) {
      subchannel = result.endpoint->subchannel;
      call_end = result;
    }
  }
  http2::ClientConnection* connection = subchannel != nullptr ? subchannel->connection() : nullptr;
  if (connection == nullptr) {
    CallNotStarted(call_end);
    miss = {Next::kWait, Status(), Waiting::kEndpoint};
    return false;
  }
  picked.connection = connection;
  picked.pool = subchannels;
  picked.subchannel = SubchannelRef(subchannel);
  picked.call_end = call_end;
  if (call_end.call_counter != nullptr) picked.counter = call_end.call_counter->shared_from_this();
  if (call_end.locality_stats != nullptr) {
    picked.locality_stats = call_end.locality_stats->shared_from_this();
  }
  return true;
}

Task<StatusOr<Channel::Impl::PickedEndpoint>> Channel::Impl::PickAfterMiss(
    CallRequest& request, const CallOptions& options,
    std::optional<Loop::Clock::time_point> deadline, std::optional<CallRoute>& route,
    PickMiss miss) {
  const std::string_view method = request.path();
  // Why the call could not go anywhere yet: the deadline's message says it.
  Status last_failure;
  auto deadline_error = [&](std::string what) {
    if (!last_failure.ok()) what += "; last error: " + std::string(last_failure.message());
    return DeadlineExceededError(std::move(what));
  };
  while (true) {
    if (miss.next == PickMiss::Next::kFail) co_return miss.status;
    if (miss.next == PickMiss::Next::kWaitOrFail) {
      // gRPC: without wait_for_ready a call with nothing to go to fails.
      if (!options.wait_for_ready) co_return miss.status;
      last_failure = miss.status;
      const bool in_time = co_await WaitForChange(deadline);
      if (!in_time)
        co_return deadline_error("deadline exceeded waiting for " + std::string(method));
    } else {
      if (!miss.status.ok()) last_failure = miss.status;
      const bool in_time = co_await WaitForChange(deadline);
      if (!in_time) {
        switch (miss.waiting) {
          case PickMiss::Waiting::kConfig:
            co_return DeadlineExceededError(WaitingForConfig());
          case PickMiss::Waiting::kResolving:
            co_return deadline_error("deadline exceeded waiting for " + std::string(method));
          case PickMiss::Waiting::kEndpoint:
            break;
        }
        // The cluster's last failure (a connection error while it retries).
        const std::string cluster_name = route->routes->clusters()[route->cluster];
        auto now_it = clusters.find(cluster_name);
        if (now_it != clusters.end() && now_it->second.lb != nullptr &&
            !now_it->second.lb->status().ok()) {
          last_failure = now_it->second.lb->status();
        }
        co_return deadline_error("deadline exceeded while waiting for an endpoint of " +
                                 cluster_name);
      }
    }
    PickedEndpoint picked;
    if (PickNow(request, route, picked, miss)) co_return picked;
  }
}

int64_t client_internal::PickersPublished(const Channel& channel, std::string_view cluster) {
  const auto& clusters = channel.impl_->clusters;
  auto it = clusters.find(cluster);
  if (it == clusters.end() || it->second.lb == nullptr) return -1;
  return static_cast<int64_t>(it->second.lb->pickers_published());
}

namespace {

std::optional<Loop::Clock::time_point> DeadlineOf(const CallOptions& options) {
  if (!options.timeout.has_value()) return std::nullopt;
  return Loop::Clock::now() + *options.timeout;
}

}  // namespace

// A6 transparent retry: an attempt the server application cannot have seen
// is started again through a new pick, within the call's deadline and
// without backoff. One that never left this client (the connection had
// received GOAWAY or closed, or closed before the stream's HEADERS were
// written) any number of times: each such attempt waits for I/O or for a
// new pick, so this cannot spin. One the server's HTTP/2 layer refused
// (REFUSED_STREAM, or above a GOAWAY's last stream id) once per call, as
// gRPC does.
namespace {

constexpr int kMaxRefusedAttemptRetries = 1;

// Whether a failed attempt that got as far as `delivery` is started again;
// counts the retries of refused attempts in `refused_retries`.
bool RetryTransparently(http2::ClientCall::Delivery delivery, int& refused_retries,
                        std::optional<Loop::Clock::time_point> deadline) {
  using Delivery = http2::ClientCall::Delivery;
  if (deadline.has_value() && Loop::Clock::now() >= *deadline) return false;
  if (delivery == Delivery::kNotSent) return true;
  if (delivery == Delivery::kRefused && refused_retries < kMaxRefusedAttemptRetries) {
    ++refused_retries;
    return true;
  }
  return false;
}

}  // namespace

Task<StatusOr<UnaryResponse>> Channel::UnaryCall(std::string method, std::string request,
                                                 CallOptions options) {
  const std::optional<Loop::Clock::time_point> deadline = DeadlineOf(options);
  // What routing reads of the call: views of its method and metadata.
  const CallHeaders headers(options.metadata);
  CallRequest call_request(method, headers.headers());
  std::optional<Impl::CallRoute> route;  // A6: a retry keeps the call's route
  int refused_retries = 0;
  Status failure;
  while (true) {
    Impl::PickedEndpoint picked;
    if (Impl::PickMiss miss; !impl_->PickNow(call_request, route, picked, miss)) {
      // Nothing READY at once: the slow path, where the pick may wait.
      StatusOr<Impl::PickedEndpoint> waited =
          co_await impl_->PickAfterMiss(call_request, options, deadline, route, std::move(miss));
      if (!waited.ok()) {
        failure = waited.status();
        break;
      }
      picked = *std::move(waited);
    }
    // The request stays here: a refused attempt is replayed from it.
    http2::ClientCall::Delivery delivery = http2::ClientCall::Delivery::kMaybeProcessed;
    StatusOr<std::string> response = co_await http2::UnaryCall(
        *picked.connection, method, request, options.metadata, deadline, &delivery);
    if (response.ok()) {
      CallFinished(picked.call_end, true);
      co_return UnaryResponse{*std::move(response), picked.peer()};
    }
    if (RetryTransparently(delivery, refused_retries, deadline)) {
      // The attempt reached no backend's application: no call to count.
      CallNotStarted(picked.call_end);
      continue;
    }
    CallFinished(picked.call_end, false);
    failure = response.status();
    break;
  }
  // A call that fails at once still lets the loop turn: a caller that calls
  // again at once in a loop must not starve the tasks (a subchannel's
  // reconnection, its backoff timer) that would let calls succeed again.
  co_await impl_->loop.Yield();
  co_return failure;
}

Task<StatusOr<std::unique_ptr<ClientStream>>> Channel::StartStream(std::string method,
                                                                   CallOptions options) {
  const std::optional<Loop::Clock::time_point> deadline = DeadlineOf(options);
  const CallHeaders headers(options.metadata);
  CallRequest call_request(method, headers.headers());
  std::optional<Impl::CallRoute> route;  // A6: a retry keeps the call's route
  int refused_retries = 0;
  while (true) {
    Impl::PickedEndpoint picked;
    if (Impl::PickMiss miss; !impl_->PickNow(call_request, route, picked, miss)) {
      StatusOr<Impl::PickedEndpoint> waited =
          co_await impl_->PickAfterMiss(call_request, options, deadline, route, std::move(miss));
      if (!waited.ok()) {
        co_await impl_->loop.Yield();  // as UnaryCall's failures
        co_return waited.status();
      }
      picked = *std::move(waited);
    }
    std::unique_ptr<http2::ClientCall> call =
        picked.connection->StartCall(method, options.metadata, deadline);
    // A6: a stream that could not start on the picked connection is picked
    // again. Once returned, the stream's messages are the application's to
    // send, and a refused stream fails UNAVAILABLE (not replayed).
    if (call->finished() && RetryTransparently(call->delivery(), refused_retries, deadline)) {
      CallNotStarted(picked.call_end);
      continue;
    }
    auto impl = std::make_unique<ClientStream::Impl>();
    impl->peer = picked.peer();
    impl->pool = std::move(picked.pool);
    impl->subchannel = std::move(picked.subchannel);
    impl->call_end = picked.call_end;
    impl->counter = std::move(picked.counter);
    impl->locality_stats = std::move(picked.locality_stats);
    impl->call = std::move(call);
    co_return std::make_unique<ClientStream>(std::move(impl));
  }
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
