// LoopChannel (include/uxds/client_channel.h): calls from another loop,
// routed and picked against the channel's published snapshot, each run on
// this loop's own connection to the picked endpoint. The ownership rules
// between the loops are in src/client/loop_channel_impl.h.
#include <algorithm>
#include <utility>

#include "client/channel_impl.h"
#include "client/loop_channel_impl.h"

namespace uxds {

using client_internal::CallRequest;
using client_internal::CallRoute;
using client_internal::CallSnapshot;
using client_internal::LoopConnection;
using client_internal::LoopConnectionUse;
using client_internal::PickedEndpoint;
using client_internal::PickMiss;

namespace client_internal {

void ChannelShared::NotifyChange() {
  std::lock_guard lock(mu);
  for (const std::shared_ptr<LoopChannel::Impl>& share : shares) {
    // One wake in flight per share: a burst of changes costs one closure.
    if (share->wake_posted.exchange(true, std::memory_order_acq_rel)) continue;
    share->loop.Post([weak = std::weak_ptr<LoopChannel::Impl>(share)] {
      if (auto s = weak.lock()) {
        // A read-modify-write, so that a NotifyChange() that saw the flag
        // set is ordered before this clear, and its snapshot before the
        // picks the woken calls make.
        s->wake_posted.exchange(false, std::memory_order_acq_rel);
        s->WakeWaiters();
      }
    });
  }
}

void ChannelShared::NotifyEndpointLeft(uint32_t index, uint64_t uid) {
  std::lock_guard lock(mu);
  for (const std::shared_ptr<LoopChannel::Impl>& share : shares) {
    share->loop.Post([weak = std::weak_ptr<LoopChannel::Impl>(share), index, uid] {
      if (auto s = weak.lock()) s->EndpointLeft(index, uid);
    });
  }
}

LoopConnectionUse::LoopConnectionUse(LoopConnection* connection) : connection_(connection) {
  ++connection_->uses;
  ++connection_->started;
}

LoopConnectionUse::~LoopConnectionUse() {
  if (connection_ == nullptr) return;
  if (--connection_->uses == 0 && connection_->retired) {
    connection_->owner->MaybeFree(connection_);
  }
}

}  // namespace client_internal

namespace {

void Unregister(client_internal::ChannelShared& shared, const LoopChannel::Impl* share) {
  std::lock_guard lock(shared.mu);
  std::erase_if(shared.shares, [&](const auto& s) { return s.get() == share; });
}

}  // namespace

std::unique_ptr<LoopChannel> Channel::OnLoop(Loop& loop) {
  auto share = std::make_shared<LoopChannel::Impl>(loop, impl_->shared);
  {
    std::lock_guard lock(impl_->shared->mu);
    impl_->shared->shares.push_back(share);
  }
  return std::make_unique<LoopChannel>(std::move(share));
}

LoopChannel::LoopChannel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

LoopChannel::~LoopChannel() {
  // Without a Shutdown() (a caller's mistake), at least the channel's loop
  // stops posting to this one.
  Unregister(*impl_->shared, impl_.get());
}

Loop& LoopChannel::loop() const { return impl_->loop; }

size_t LoopChannel::connections() const {
  size_t open = 0;
  auto count = [&](const std::unique_ptr<LoopConnection>& c) {
    if (c != nullptr && c->connection != nullptr && !c->connection->closed()) ++open;
  };
  std::for_each(impl_->by_index.begin(), impl_->by_index.end(), count);
  std::for_each(impl_->retired.begin(), impl_->retired.end(), count);
  return open;
}

Task<StatusOr<UnaryResponse>> LoopChannel::UnaryCall(std::string method, std::string request,
                                                     CallOptions options) {
  Impl* impl = impl_.get();
  // After Shutdown() began, at once: the handle may be destroyed as soon as
  // Shutdown() returns.
  if (impl->closing) co_return UnavailableError("channel handle shut down");
  ++impl->calls_inside;
  StatusOr<UnaryResponse> reply = co_await client_internal::RunUnaryCall(
      *impl, impl->loop, std::move(method), std::move(request), std::move(options));
  if (--impl->calls_inside == 0 && impl->last_call_left != nullptr) impl->last_call_left->Set();
  co_return reply;
}

Task<StatusOr<std::unique_ptr<ClientStream>>> LoopChannel::StartStream(std::string method,
                                                                       CallOptions options) {
  Impl* impl = impl_.get();
  if (impl->closing) co_return UnavailableError("channel handle shut down");
  ++impl->calls_inside;
  // The stream keeps this loop's state (its connection's owner) alive.
  StatusOr<std::unique_ptr<ClientStream>> stream = co_await client_internal::RunStartStream(
      *impl, impl->loop, std::move(method), std::move(options), impl_);
  if (--impl->calls_inside == 0 && impl->last_call_left != nullptr) impl->last_call_left->Set();
  co_return stream;
}

Task<void> LoopChannel::Shutdown() {
  Impl* impl = impl_.get();
  co_await impl->shutdown.Run([impl] { return impl->TearDown(); });
}

Task<void> LoopChannel::Impl::TearDown() {
  // From here the channel's loop posts nothing more to this one.
  Unregister(*shared, this);
  closing = true;
  idle_sweep.Cancel();
  WakeWaiters();  // queued calls fail
  co_await connects.CancelAndJoin();
  for (std::unique_ptr<LoopConnection>& c : by_index) {
    if (c != nullptr) Retire(std::move(c));
  }
  by_index.clear();
  // Connections still carrying calls: closing them ends the calls
  // (UNAVAILABLE); each is freed when its last call has let go of it.
  for (const std::unique_ptr<LoopConnection>& c : retired) {
    if (c->connection != nullptr) {
      // The claim keeps the connection until this close has returned,
      // whatever the calls on it do meanwhile.
      closes.Spawn(
          [](LoopConnectionUse /*claim*/, http2::ClientConnection* connection) -> Task<void> {
            co_await connection->Close();
          }(LoopConnectionUse(c.get()), c->connection.get()));
    }
  }
  // Calls that began before `closing` was set end (their connections are
  // closing), and the closes end; a call is never left inside the handle.
  while (calls_inside > 0 || closes.size() > 0) {
    if (calls_inside > 0) {
      Event left(loop);
      last_call_left = &left;
      (void)co_await left.Wait();  // the teardown's task is never cancelled
      last_call_left = nullptr;
    }
    co_await closes.Join();
  }
}

Task<bool> LoopChannel::Impl::WaitForChange(std::optional<Loop::Clock::time_point> deadline) {
  if (closing) co_return true;
  const bool in_time = co_await client_internal::WaitForWake(loop, waiters, deadline);
  co_return in_time;
}

bool LoopChannel::Impl::Closing() const {
  if (closing) return true;
  PickScope scope(shared->snapshots);
  const auto* snapshot = static_cast<const CallSnapshot*>(scope.picker());
  return snapshot != nullptr && snapshot->closed;
}

std::string LoopChannel::Impl::WaitingForConfig() const {
  PickScope scope(shared->snapshots);
  const auto* snapshot = static_cast<const CallSnapshot*>(scope.picker());
  std::string waiting = snapshot != nullptr ? snapshot->waiting_for : "";
  return "deadline exceeded waiting for xDS config" +
         (waiting.empty() ? std::string() : ": " + waiting);
}

bool LoopChannel::Impl::PickNow(CallRequest& request, std::optional<CallRoute>& route,
                                PickedEndpoint& picked, PickMiss& miss) {
  if (closing) {
    miss = {PickMiss::Next::kFail, UnavailableError("channel handle shut down")};
    return false;
  }
  PickScope snapshot_scope(shared->snapshots);
  const auto* snapshot = static_cast<const CallSnapshot*>(snapshot_scope.picker());
  if (snapshot == nullptr) {
    miss = {PickMiss::Next::kWait, Status(), PickMiss::Waiting::kConfig};
    return false;
  }
  if (PickIn(*snapshot, request, route, picked, miss)) return true;
  client_internal::PinRoute(*snapshot, route);
  return false;
}

bool LoopChannel::Impl::PickIn(const CallSnapshot& snapshot, CallRequest& request,
                               std::optional<CallRoute>& route, PickedEndpoint& picked,
                               PickMiss& miss) {
  const client_internal::SnapshotCluster* cluster =
      client_internal::RouteCall(snapshot, request, route, miss);
  if (cluster == nullptr) return false;
  // The endpoint, and the subchannel it names, live while this scope does.
  PickScope scope(cluster->lb->picker_slot());
  // Endpoints this loop could not connect to, though the channel's loop
  // can: the pick goes around them as around TRANSIENT_FAILURE ones.
  const EndpointMask unreachable{unreachable_words};
  const PickResult result = client_internal::PickInCluster(
      *cluster, scope, *route, request, miss, unreachable_count > 0 ? &unreachable : nullptr);
  if (result.kind != PickResult::Kind::kComplete) return false;
  LoopConnection& c = ConnectionFor(result.endpoint->index, *result.endpoint->subchannel);
  if (c.connection != nullptr && c.connection->usable()) {
    picked.connection = c.connection.get();
    picked.peer_address = &c.address;
    picked.use = LoopConnectionUse(&c);
    picked.CountIn(result);
    return true;
  }
  CallNotStarted(result);
  if (c.unreachable) {
    // Nothing else to go to: as a TRANSIENT_FAILURE pick, the call fails
    // or waits for ready (its connect task keeps retrying).
    miss = {PickMiss::Next::kWaitOrFail, c.last_failure};
    return false;
  }
  if (!c.connecting) {
    c.connecting = true;
    connects.Spawn(Connect(&c));
  }
  miss = {PickMiss::Next::kWait, c.last_failure, PickMiss::Waiting::kEndpoint};
  return false;
}

LoopConnection& LoopChannel::Impl::ConnectionFor(uint32_t index, const Subchannel& subchannel) {
  if (index >= by_index.size()) by_index.resize(index + 1);
  std::unique_ptr<LoopConnection>& slot = by_index[index];
  // The index is another endpoint's now, or the connection went away
  // (GOAWAY, closed): a new one, while calls on the old one finish.
  if (slot != nullptr && (slot->uid != subchannel.uid() ||
                          (slot->connection != nullptr && !slot->connection->usable()))) {
    Retire(std::move(slot));
  }
  if (slot == nullptr) {
    ScheduleIdleSweep();
    slot = std::make_unique<LoopConnection>();
    slot->owner = this;
    slot->index = index;
    slot->uid = subchannel.uid();
    slot->address = subchannel.address();
    slot->socket_address = subchannel.socket_address();
    slot->tls = subchannel.tls();
  }
  return *slot;
}

void LoopChannel::Impl::Retire(std::unique_ptr<LoopConnection> connection) {
  // Out of by_index: its endpoint's index is no longer this one's to mask.
  if (connection->unreachable) SetUnreachable(*connection, false);
  connection->retired = true;
  LoopConnection* raw = connection.get();
  retired.push_back(std::move(connection));
  MaybeFree(raw);
}

void LoopChannel::Impl::MaybeFree(LoopConnection* connection) {
  if (connection->uses > 0 || connection->connecting) return;
  auto it = std::find_if(retired.begin(), retired.end(),
                         [&](const auto& c) { return c.get() == connection; });
  if (it == retired.end()) return;
  std::unique_ptr<LoopConnection> doomed = std::move(*it);
  retired.erase(it);
  // After the teardown (a stream that outlived it let go): its connection
  // was closed and that close joined, so it goes now, spawning nothing.
  if (shutdown.done()) return;
  closes.Spawn(CloseAndFree(std::move(doomed)));
}

Task<void> LoopChannel::Impl::CloseAndFree(std::unique_ptr<LoopConnection> connection) {
  if (connection->connection != nullptr) co_await connection->connection->Close();
}

// gRPC's connection-backoff, as Subchannel::ConnectOnce: an attempt gets
// max(min_connect_timeout, backoff), and the next starts no earlier than
// `backoff` after this one started. The channel's loop may reach the
// endpoint all along; this loop retries on its own, because no pick asks
// it to while its picks go around the endpoint.
Task<void> LoopChannel::Impl::Connect(LoopConnection* c) {
  if (!c->backoff.has_value()) c->backoff.emplace(shared->backoff);
  while (true) {
    const Loop::Clock::time_point started = Loop::Clock::now();
    const std::chrono::milliseconds delay = c->backoff->NextDelay();
    http2::ClientConnectionOptions options = shared->connection;
    options.connect_timeout = std::max(options.connect_timeout, delay);
    StatusOr<std::unique_ptr<http2::ClientConnection>> connected =
        co_await ConnectSecured(loop, c->socket_address, options, c->tls.get());
    if (connected.ok()) {
      c->connection = *std::move(connected);
      c->last_failure = Status();
      c->backoff->Reset();
      if (c->unreachable) SetUnreachable(*c, false);
      break;
    }
    if (closing || c->retired) break;
    c->last_failure = Status(StatusCode::kUnavailable,
                             "connecting to " + c->address +
                                 " from this loop: " + std::string(connected.status().message()));
    if (!c->unreachable) SetUnreachable(*c, true);
    // Queued calls pick again: around this endpoint, or they fail (or wait
    // for ready) with its failure.
    WakeWaiters();
    const Status slept = co_await SleepUntil(loop, started + delay);
    if (!slept.ok() || closing || c->retired) break;
  }
  c->connecting = false;
  if (c->retired) MaybeFree(c);
  WakeWaiters();
}

void LoopChannel::Impl::SetUnreachable(LoopConnection& c, bool unreachable) {
  c.unreachable = unreachable;
  if (c.retired) return;  // its bit was cleared when it left by_index
  const size_t word = c.index / 64;
  const uint64_t bit = uint64_t{1} << (c.index % 64);
  if (word >= unreachable_words.size()) unreachable_words.resize(word + 1);
  if (unreachable) {
    unreachable_words[word] |= bit;
    ++unreachable_count;
  } else {
    unreachable_words[word] &= ~bit;
    --unreachable_count;
  }
}

Status LoopChannel::Impl::ClusterFailure(const CallRoute& route) const {
  PickScope snapshot_scope(shared->snapshots);
  const auto* snapshot = static_cast<const CallSnapshot*>(snapshot_scope.picker());
  if (snapshot == nullptr) return Status();
  const std::optional<uint32_t> index = snapshot->IndexOfCluster(route.cluster_id);
  if (!index.has_value() || snapshot->clusters[*index].lb == nullptr) return Status();
  return snapshot->clusters[*index].lb->PublishedStatus();
}

void LoopChannel::Impl::ScheduleIdleSweep() {
  if (idle_sweep.pending() || closing) return;
  idle_sweep.Start(shared->idle_timeout, [this] { SweepIdle(); });
}

void LoopChannel::Impl::SweepIdle() {
  bool any_left = false;
  for (std::unique_ptr<LoopConnection>& c : by_index) {
    if (c == nullptr) continue;
    // Idle for a whole period (one this loop cannot reach too: its connect
    // task stops retrying, and is freed when it does).
    if (c->uses == 0 && (!c->connecting || c->unreachable) && c->started == c->started_at_sweep) {
      Retire(std::move(c));
      continue;
    }
    c->started_at_sweep = c->started;
    any_left = true;
  }
  if (any_left) ScheduleIdleSweep();
}

void LoopChannel::Impl::EndpointLeft(uint32_t index, uint64_t uid) {
  if (index >= by_index.size() || by_index[index] == nullptr || by_index[index]->uid != uid) return;
  Retire(std::move(by_index[index]));
}

}  // namespace uxds
