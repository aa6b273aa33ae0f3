// Routing and picking a call against a CallSnapshot, and the queued pick,
// shared by the channel's own loop and the other loops that call it.
#include "client/call_snapshot.h"

#include <string>
#include <utility>

#include "client/client_stream_impl.h"
#include "lb/call_counter.h"
#include "xds/lrs/load_stats.h"

namespace uxds::client_internal {

using Next = PickMiss::Next;
using Waiting = PickMiss::Waiting;

const SnapshotCluster* RouteCall(const CallSnapshot& snapshot, CallRequest& request,
                                 std::optional<CallRoute>& route, PickMiss& miss) {
  if (snapshot.closed) {
    miss = {Next::kFail, UnavailableError("channel shut down")};
    return nullptr;
  }
  const std::shared_ptr<const CompiledRoutes>& routes = snapshot.routes;
  std::optional<Loop::Clock::time_point> stream_deadline;  // A31: a routed call's
  bool faults_decided = false;                             // A33: a routed call's
  if (routes == nullptr) {
    // No config (yet, or after an A74 error): every call waits for one
    // (gRPC queues them while the resolver has not returned), a routed
    // call keeping its route (and its A31 deadline) until routes come.
    miss = snapshot.config_failed ? PickMiss{Next::kWaitOrFail, snapshot.config_error}
                                  : PickMiss{Next::kWait, Status(), Waiting::kConfig};
    return nullptr;
  }
  if (route.has_value() && route->generation != routes->generation()) {
    // New routes: the call keeps its cluster while they still name it, else
    // it is routed by them (gRPC keeps the old cluster alive for it
    // instead). It is found by the channel's id for it: a cluster the
    // channel keeps no state for (id 0, never so for an xDS config or a
    // host:port target) is routed again.
    std::optional<uint32_t> index = snapshot.IndexOfCluster(route->cluster_id);
    if (index.has_value()) {
      route->generation = routes->generation();
      route->cluster = *index;
      route->pinned.reset();
    } else {
      stream_deadline = route->stream_deadline;
      faults_decided = route->faults_decided;
      route.reset();
    }
  }
  if (!route.has_value()) {
    CompiledRoutes::Choice choice;
    switch (routes->Choose(request, snapshot.channel_id, choice)) {
      case CompiledRoutes::Outcome::kRouted:
        break;
      case CompiledRoutes::Outcome::kNoRoute:
        miss = {Next::kFail,
                UnavailableError("no matching route found for " + std::string(request.path()))};
        return nullptr;
      case CompiledRoutes::Outcome::kNotForwarding:
        miss = {Next::kFail, UnavailableError("matched route does not have a forwarding action")};
        return nullptr;
    }
    route.emplace(CallRoute{routes->generation(), choice.cluster,
                            snapshot.clusters[choice.cluster].id, choice.hash, nullptr,
                            stream_deadline, faults_decided || choice.faults != nullptr});
    // A31: the route caps the call's duration from now (its config
    // selection); the application's deadline still holds if earlier.
    if (!stream_deadline.has_value() && choice.max_stream_duration.count() > 0) [[unlikely]] {
      route->stream_deadline =
          Loop::Clock::now() +
          std::chrono::duration_cast<Loop::Clock::duration>(choice.max_stream_duration);
    }
    // A33: the fault filters act once per call, when it is first routed,
    // before its pick (gRPC's filter runs before the LB pick).
    if (choice.faults != nullptr && !faults_decided) [[unlikely]] {
      if (std::optional<InjectedFault> fault = DecideFaults(*choice.faults, request.metadata())) {
        miss = PickMiss{Next::kFault, Status(), Waiting::kConfig, std::move(fault)};
        return nullptr;
      }
    }
  }
  const SnapshotCluster& cluster = snapshot.clusters[route->cluster];
  if (cluster.lb != nullptr) return &cluster;
  const std::string& name = routes->clusters()[route->cluster];
  if (snapshot.direct) {
    // A host:port target still resolving (gRPC queues the call), or one
    // whose name did not resolve.
    miss = snapshot.config_failed
               ? PickMiss{Next::kWaitOrFail, snapshot.config_error}
               : PickMiss{Next::kWait, UnavailableError("resolving " + name), Waiting::kResolving};
    return nullptr;
  }
  miss = {Next::kWaitOrFail,
          cluster.error.ok()
              ? UnavailableError("cluster " + name + " is not ready")
              : Status(StatusCode::kUnavailable,
                       "cluster " + name + ": " + std::string(cluster.error.message()))};
  return nullptr;
}

std::optional<uint32_t> CallSnapshot::IndexOfCluster(uint64_t id) const {
  if (id == 0) return std::nullopt;
  for (size_t i = 0; i < clusters.size(); ++i) {
    if (clusters[i].id == id) return static_cast<uint32_t>(i);
  }
  return std::nullopt;
}

void PinRoute(const CallSnapshot& snapshot, std::optional<CallRoute>& route) {
  if (!route.has_value() || route->pinned != nullptr || snapshot.routes == nullptr) return;
  if (route->generation == snapshot.routes->generation()) route->pinned = snapshot.routes;
}

PickResult PickInCluster(const SnapshotCluster& cluster, const PickScope& scope,
                         const CallRoute& route, CallRequest& request, PickMiss& miss,
                         const EndpointMask* unreachable) {
  PickArgs args;
  args.hash = route.hash;
  args.metadata = request.metadata();
  args.unreachable = unreachable;
  PickResult result = scope.Pick(args);
  switch (result.kind) {
    case PickResult::Kind::kComplete:
      return result;
    case PickResult::Kind::kFail:
      // A88: failed calls carry the cluster's resolution note.
      miss = {result.drop ? Next::kFail : Next::kWaitOrFail,
              Status(StatusCode::kUnavailable,
                     std::string(result.status->message()) + " (" + cluster.note + ")")};
      return result;
    case PickResult::Kind::kQueue:
      break;
  }
  miss = {Next::kWait, Status(), Waiting::kEndpoint};
  return result;
}

void PickedEndpoint::CountIn(const PickResult& result) {
  call_end = result;
  if (result.locality_stats != nullptr) {
    locality_stats = result.locality_stats->shared_from_this();
  }
}

Task<StatusOr<PickedEndpoint>> CallPicker::PickAfterMiss(
    CallRequest& request, bool wait_for_ready, std::optional<Loop::Clock::time_point> deadline,
    std::optional<CallRoute>& route, PickMiss miss) {
  const std::string_view method = request.path();
  // Why the call could not go anywhere yet: the deadline's message says it.
  Status last_failure;
  auto deadline_error = [&](std::string what) {
    if (!last_failure.ok()) what += "; last error: " + std::string(last_failure.message());
    return DeadlineExceededError(std::move(what));
  };
  // A31: once routed, the route's max_stream_duration may end it sooner.
  auto call_deadline = [&] { return route.has_value() ? route->Deadline(deadline) : deadline; };
  while (true) {
    if (miss.next == Next::kFault) [[unlikely]] {
      const Status injected = co_await InjectFault(*miss.fault, call_deadline());
      miss.fault.reset();  // A33: the fault is over (delayed, or aborted now)
      if (!injected.ok()) co_return injected;
      PickedEndpoint picked;
      if (PickNow(request, route, picked, miss)) co_return picked;
      continue;
    }
    if (miss.next == Next::kFail) co_return miss.status;
    if (miss.next == Next::kWaitOrFail) {
      // gRPC: without wait_for_ready a call with nothing to go to fails.
      if (!wait_for_ready) co_return miss.status;
      last_failure = miss.status;
      const bool in_time = co_await WaitForChange(call_deadline());
      if (!in_time)
        co_return deadline_error("deadline exceeded waiting for " + std::string(method));
    } else {
      if (!miss.status.ok()) last_failure = miss.status;
      const bool in_time = co_await WaitForChange(call_deadline());
      if (!in_time) {
        switch (miss.waiting) {
          case Waiting::kConfig:
            co_return DeadlineExceededError(WaitingForConfig());
          case Waiting::kResolving:
            co_return deadline_error("deadline exceeded waiting for " + std::string(method));
          case Waiting::kEndpoint:
            break;
        }
        // The cluster's last failure (a connection error while it retries).
        if (Status failure = ClusterFailure(*route); !failure.ok()) last_failure = failure;
        co_return deadline_error("deadline exceeded while waiting for an endpoint of " +
                                 route->cluster_name());
      }
    }
    PickedEndpoint picked;
    if (PickNow(request, route, picked, miss)) co_return picked;
  }
}

Task<Status> CallPicker::InjectFault(const InjectedFault& fault,
                                     std::optional<Loop::Clock::time_point> deadline) {
  if (fault.delay().count() > 0) {
    // A33: "injecting delay before sending any traffic for an RPC". The
    // wait is the channel's (a shutdown ends it); a config change wakes it
    // early, so it waits again until the delay is over.
    const Loop::Clock::time_point delay_end =
        Loop::Clock::now() + std::chrono::duration_cast<Loop::Clock::duration>(fault.delay());
    // A cancelled call's waits end at once from then on: it must stop
    // here rather than wait again.
    const CancelState* cancel = co_await CurrentCancelState();
    while (Loop::Clock::now() < delay_end) {
      if (Closing()) co_return UnavailableError("channel shut down");
      if (cancel != nullptr && cancel->cancelled()) {
        co_return CancelledError("call cancelled during the injected delay");
      }
      if (deadline.has_value() && Loop::Clock::now() >= *deadline) break;
      (void)co_await WaitForChange(deadline.has_value() ? std::min(*deadline, delay_end)
                                                        : delay_end);
    }
    if (deadline.has_value() && Loop::Clock::now() >= *deadline) {
      co_return DeadlineExceededError("deadline exceeded during the injected delay");
    }
  }
  co_return fault.abort();
}

Task<bool> WaitForWake(Loop& loop, std::vector<Event*>& waiters,
                       std::optional<Loop::Clock::time_point> deadline) {
  if (deadline.has_value() && Loop::Clock::now() >= *deadline) co_return false;
  Event changed(loop);
  Timer timer(loop);
  if (deadline.has_value()) {
    timer.Start(*deadline - Loop::Clock::now(), [&changed] { changed.Set(); });
  }
  waiters.push_back(&changed);
  const Status waited = co_await changed.Wait();
  std::erase(waiters, &changed);
  timer.Cancel();
  if (!waited.ok()) co_return false;
  co_return !deadline.has_value() || Loop::Clock::now() < *deadline;
}

std::optional<Loop::Clock::time_point> DeadlineOf(const CallOptions& options) {
  if (!options.timeout.has_value()) return std::nullopt;
  return Loop::Clock::now() + *options.timeout;
}

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
}  // namespace

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

Task<StatusOr<UnaryResponse>> RunUnaryCall(CallPicker& picker, Loop& loop, std::string method,
                                           std::string request, CallOptions options) {
  const std::optional<Loop::Clock::time_point> deadline = DeadlineOf(options);
  // What routing reads of the call: its method and metadata, in place.
  CallRequest call_request(method, options.metadata);
  std::optional<CallRoute> route;  // A6: a retry keeps the call's route
  int refused_retries = 0;
  Status failure;
  while (true) {
    PickedEndpoint picked;
    if (PickMiss miss; !picker.PickNow(call_request, route, picked, miss)) {
      // Nothing READY at once: the slow path, where the pick may wait.
      StatusOr<PickedEndpoint> waited = co_await picker.PickAfterMiss(
          call_request, options.wait_for_ready, deadline, route, std::move(miss));
      if (!waited.ok()) {
        failure = waited.status();
        break;
      }
      picked = *std::move(waited);
    }
    // The request stays here: a refused attempt is replayed from it.
    http2::ClientCall::Delivery delivery = http2::ClientCall::Delivery::kMaybeProcessed;
    const std::optional<Loop::Clock::time_point> call_deadline = route->Deadline(deadline);
    StatusOr<std::string> response = co_await http2::UnaryCall(
        *picked.connection, method, request, options.metadata, call_deadline, &delivery);
    if (response.ok()) {
      CallFinished(picked.call_end, true);
      co_return UnaryResponse{*std::move(response), picked.peer()};
    }
    if (RetryTransparently(delivery, refused_retries, call_deadline)) {
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
  co_await loop.Yield();
  co_return failure;
}

Task<StatusOr<std::unique_ptr<ClientStream>>> RunStartStream(CallPicker& picker, Loop& loop,
                                                             std::string method,
                                                             CallOptions options,
                                                             std::shared_ptr<void> keep_alive) {
  const std::optional<Loop::Clock::time_point> deadline = DeadlineOf(options);
  CallRequest call_request(method, options.metadata);
  std::optional<CallRoute> route;  // A6: a retry keeps the call's route
  int refused_retries = 0;
  while (true) {
    PickedEndpoint picked;
    if (PickMiss miss; !picker.PickNow(call_request, route, picked, miss)) {
      StatusOr<PickedEndpoint> waited = co_await picker.PickAfterMiss(
          call_request, options.wait_for_ready, deadline, route, std::move(miss));
      if (!waited.ok()) {
        co_await loop.Yield();  // as RunUnaryCall's failures
        co_return waited.status();
      }
      picked = *std::move(waited);
    }
    const std::optional<Loop::Clock::time_point> call_deadline = route->Deadline(deadline);
    std::unique_ptr<http2::ClientCall> call =
        picked.connection->StartCall(method, options.metadata, call_deadline);
    // A6: a stream that could not start on the picked connection is picked
    // again. Once returned, the stream's messages are the application's to
    // send, and a refused stream fails UNAVAILABLE (not replayed).
    if (call->finished() && RetryTransparently(call->delivery(), refused_retries, call_deadline)) {
      CallNotStarted(picked.call_end);
      continue;
    }
    auto impl = std::make_unique<ClientStream::Impl>();
    impl->peer = picked.peer();
    impl->keep_alive = std::move(keep_alive);
    impl->use = std::move(picked.use);
    impl->pool = std::move(picked.pool);
    impl->subchannel = std::move(picked.subchannel);
    impl->call_end = picked.call_end;
    impl->locality_stats = std::move(picked.locality_stats);
    impl->call = std::move(call);
    co_return std::make_unique<ClientStream>(std::move(impl));
  }
}

}  // namespace uxds::client_internal
