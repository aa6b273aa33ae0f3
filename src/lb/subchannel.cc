#include "lb/subchannel.h"

#include <algorithm>
#include <functional>

namespace uxds {

namespace {

uint64_t NextUid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

Subchannel::Subchannel(SubchannelPool& pool, SocketAddress address,
                       std::shared_ptr<const UpstreamTls> tls, std::string key, uint32_t index)
    : pool_(pool),
      address_(address),
      tls_(std::move(tls)),
      key_(std::move(key)),
      endpoint_{address.ToString(), this, index},
      uid_(NextUid()),
      group_(std::make_unique<TaskGroup>(pool.loop())),
      backoff_({pool.options().initial_backoff, pool.options().backoff_multiplier,
                pool.options().backoff_jitter, pool.options().max_backoff}) {}

Subchannel::~Subchannel() = default;

void Subchannel::RequestConnection() {
  if (raw_state_ == ConnectivityState::kConnecting || raw_state_ == ConnectivityState::kReady) {
    return;
  }
  connect_requested_ = true;
  if (wakeup_ != nullptr) wakeup_->Set();
}

void Subchannel::RequestConnectionFromAnyThread() {
  // The flag keeps a subchannel in the stack at most once; checking it with
  // a plain load first keeps repeated picks from writing its line.
  if (request_queued_.load(std::memory_order_relaxed)) return;
  if (request_queued_.exchange(true, std::memory_order_acq_rel)) return;
  pool_.PushRequest(this);
}

int Subchannel::AddWatcher(Watcher watcher) {
  const int id = next_watcher_id_++;
  watchers_.emplace(id, std::move(watcher));
  return id;
}

void Subchannel::RemoveWatcher(int id) { watchers_.erase(id); }

// Sticky TRANSIENT_FAILURE (A62's pick_first, what A42's ring_hash and A61's
// round_robin see of each endpoint): once failed, CONNECTING and IDLE are
// not shown until the subchannel is READY again.
void Subchannel::SetState(ConnectivityState raw, Status status) {
  raw_state_ = raw;
  const ConnectivityState old_visible = state();
  ConnectivityState visible = raw;
  if (old_visible == ConnectivityState::kTransientFailure &&
      (raw == ConnectivityState::kConnecting || raw == ConnectivityState::kIdle)) {
    visible = ConnectivityState::kTransientFailure;
  }
  if (visible == old_visible) return;
  visible_state_.store(visible, std::memory_order_release);
  std::vector<int> ids;
  ids.reserve(watchers_.size());
  for (const auto& [id, w] : watchers_) ids.push_back(id);
  for (int id : ids) {
    auto it = watchers_.find(id);
    if (it != watchers_.end()) it->second(visible, status);
  }
}

Task<void> Subchannel::Run() {
  while (!group_->cancelled()) {
    if (!connect_requested_) {
      wakeup_ = std::make_unique<Event>(pool_.loop());
      const Status woke = co_await wakeup_->Wait();
      wakeup_.reset();
      if (!woke.ok()) co_return;
      continue;
    }
    connect_requested_ = false;
    co_await ConnectOnce();
  }
}

// One attempt as gRPC's connection-backoff describes it: the attempt gets
// max(min_connect_timeout, backoff) and the next attempt starts no earlier
// than `backoff` after this one started.
Task<void> Subchannel::ConnectOnce() {
  Loop& loop = pool_.loop();
  const auto started = Loop::Clock::now();
  const std::chrono::milliseconds delay = backoff_.NextDelay();
  http2::ClientConnectionOptions options = pool_.options().connection;
  options.connect_timeout = std::max(pool_.options().min_connect_timeout, delay);
  ++attempts_;
  SetState(ConnectivityState::kConnecting, Status());
  auto connected = co_await ConnectSecured(loop, address_, options, tls_.get());
  if (group_->cancelled()) co_return;
  if (!connected.ok()) {
    last_failure_ = connected.status();
    SetState(ConnectivityState::kTransientFailure, connected.status());
    const Status slept = co_await SleepUntil(loop, started + delay);
    if (!slept.ok()) co_return;
    SetState(ConnectivityState::kIdle, Status());
    // A62: a failed endpoint keeps trying (after its backoff) until it
    // connects, so the policies above see it recover without asking.
    connect_requested_ = true;
    co_return;
  }
  backoff_.Reset();
  last_failure_ = Status();
  connection_ = std::move(*connected);
  // A connection drained as it was made (its GOAWAY came with the server's
  // SETTINGS) never shows READY: no picker may send a call to it.
  if (connection_->usable()) {
    SetState(ConnectivityState::kReady, Status());
    const Status unusable = co_await connection_->WaitUntilUnusable();
    if (!unusable.ok()) {
      connection_.reset();  // cancelled: closes in the background
      co_return;
    }
  }
  const Status why = connection_->closed() ? connection_->close_status()
                                           : UnavailableError("GOAWAY received from " + address());
  // A draining server (GOAWAY) finishes the calls it has: the connection
  // is kept until it closes, and new calls go to a new one.
  auto finish = [](std::unique_ptr<http2::ClientConnection> draining) -> Task<void> {
    (void)co_await draining->closed_event().Wait();
  };
  group_->Spawn(finish(std::move(connection_)));
  // gRPC: a lost connection makes the subchannel IDLE; a policy that wants
  // it asks again.
  SetState(ConnectivityState::kIdle, why);
}

SubchannelRef::SubchannelRef(Subchannel* s) : subchannel_(s) {
  if (s != nullptr) ++s->refs_;
}

SubchannelRef::~SubchannelRef() {
  if (subchannel_ != nullptr && --subchannel_->refs_ == 0) subchannel_->pool_.Release(subchannel_);
}

std::shared_ptr<SubchannelPool> SubchannelPool::Create(Loop& loop, SubchannelOptions options) {
  return std::shared_ptr<SubchannelPool>(new SubchannelPool(loop, std::move(options)),
                                         &SubchannelPool::OwnersLetGo);
}

void SubchannelPool::OwnersLetGo(SubchannelPool* pool) {
  pool->owners_gone_ = true;
  if (pool->call_holds_ == 0) delete pool;
}

SubchannelPool::SubchannelPool(Loop& loop, SubchannelOptions options)
    : loop_(loop),
      options_(std::move(options)),
      reapers_(std::make_unique<TaskGroup>(loop)),
      shutdown_(loop) {}

// Shutdown() joined every subchannel's tasks; a subchannel with a task left
// (no Shutdown()) terminates in its TaskGroup's destructor.
SubchannelPool::~SubchannelPool() = default;

std::string SubchannelPool::KeyOf(std::string address, const UpstreamTls* tls) {
  if (tls != nullptr) address += " " + tls->key();
  return address;
}

SubchannelRef SubchannelPool::Get(const SocketAddress& address,
                                  std::shared_ptr<const UpstreamTls> tls) {
  const std::string key = KeyOf(address.ToString(), tls.get());
  auto it = subchannels_.find(key);
  if (it == subchannels_.end()) {
    uint32_t index = next_index_;
    if (free_indices_.empty()) {
      ++next_index_;
    } else {
      std::pop_heap(free_indices_.begin(), free_indices_.end(), std::greater<>());
      index = free_indices_.back();
      free_indices_.pop_back();
    }
    it = subchannels_
             .emplace(key, std::unique_ptr<Subchannel>(
                               new Subchannel(*this, address, std::move(tls), key, index)))
             .first;
    ++version_;
    Subchannel& s = *it->second;
    s.group_->Spawn(s.Run());
  }
  return SubchannelRef(it->second.get());
}

const Subchannel* SubchannelPool::Find(const std::string& key) const {
  auto it = subchannels_.find(key);
  return it == subchannels_.end() ? nullptr : it->second.get();
}

namespace {

// Waits for a subchannel's tasks without holding the subchannel: a
// Release() meanwhile hands it to a reaper, which may free it (and the
// group) first; this join then ends on its own record.
Task<void> JoinTasksOf(TaskGroup& tasks) { co_await tasks.Join(); }

}  // namespace

Task<void> SubchannelPool::Reap(std::unique_ptr<Subchannel> doomed) {
  co_await doomed->group_->CancelAndJoin();
}

void SubchannelPool::Release(Subchannel* s) {
  // A picker that named `s` may have queued it for a connection; every such
  // push finished before its picker (the last reference) was reclaimed, so
  // draining now removes it from the stack for good.
  if (s->request_queued_.load(std::memory_order_acquire)) DrainRequests();
  std::unique_ptr<Subchannel> released = std::move(subchannels_.extract(s->key()).mapped());
  ++version_;
  // No picker can return `s` any more (a picker holds a reference to each
  // endpoint it returns), so its index is free. A cluster_impl picker whose
  // locality table still lists the index never sees the endpoint that takes
  // it next: that endpoint is newer than the picker's child.
  free_indices_.push_back(s->endpoint_.index);
  std::push_heap(free_indices_.begin(), free_indices_.end(), std::greater<>());
  s->watchers_.clear();
  if (release_observer_) release_observer_(s->endpoint_.index, s->uid_);
  // Freed here once none of its tasks is left (Shutdown() joined them);
  // else a reaper owns it until they end, shutting down or not.
  if (s->group_->size() == 0) return;
  reapers_->Spawn(Reap(std::move(released)));
}

void SubchannelPool::PushRequest(Subchannel* s) {
  Subchannel* head = requests_.load(std::memory_order_relaxed);
  do {
    s->next_request_ = head;
  } while (!requests_.compare_exchange_weak(head, s, std::memory_order_release,
                                            std::memory_order_relaxed));
  if (head != nullptr) return;  // the control loop is already told
  loop_.Post([weak = weak_from_this()] {
    if (auto pool = weak.lock()) pool->DrainRequests();
  });
}

void SubchannelPool::DrainRequests() {
  Subchannel* s = requests_.exchange(nullptr, std::memory_order_acquire);
  while (s != nullptr) {
    Subchannel* next = s->next_request_;
    s->request_queued_.store(false, std::memory_order_release);
    if (s->refs_ > 0 && !shutdown_.started()) s->RequestConnection();
    s = next;
  }
}

Task<void> SubchannelPool::Shutdown() {
  co_await shutdown_.Run([this] { return TearDown(); });
}

Task<void> SubchannelPool::TearDown() {
  DrainRequests();
  // The subchannels may be released (and so leave the map) while their
  // tasks are joined: the joins run in the reapers' group, each holding
  // only the subchannel's TaskGroup, and nothing here walks the map across
  // a suspension.
  for (auto& [address, s] : subchannels_) {
    s->group_->Cancel();
    reapers_->Spawn(JoinTasksOf(*s->group_));
  }
  co_await reapers_->Join();
  for (auto& [address, s] : subchannels_) s->connection_.reset();
}

}  // namespace uxds
