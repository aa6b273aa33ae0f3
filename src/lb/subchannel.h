// Subchannel: one HTTP/2 connection to one address, shared by every LB
// policy that uses the address secured the same way (one per unique
// address and UpstreamTls key, from a SubchannelPool). Lives on the control loop; only state() and
// RequestConnectionFromAnyThread() may be used from other threads.
//
// States as gRPC's (IDLE, CONNECTING, READY, TRANSIENT_FAILURE); READY means
// our HTTP/2 connection is up and the server's SETTINGS arrived. A failed
// attempt waits out the connection backoff (gRPC's connection-backoff:
// 1 s x1.6 +-20 %, at most 120 s, each attempt given at least 20 s), then
// connects again only if asked. A lost connection goes to IDLE.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "http2/client_connection.h"
#include "http2/client_connection_options.h"
#include "lb/upstream_tls.h"
#include "runtime/shutdown_once.h"
#include "runtime/socket_address.h"
#include "uxds/channel.h"
#include "uxds/loop.h"
#include "xds/client/exponential_backoff.h"

namespace uxds {

class SubchannelPool;

struct SubchannelOptions {
  SubchannelOptions() {}
  // gRPC connection backoff (doc/connection-backoff.md); tests shorten them.
  std::chrono::milliseconds initial_backoff{1000};
  double backoff_multiplier = 1.6;
  double backoff_jitter = 0.2;
  std::chrono::milliseconds max_backoff{120000};
  std::chrono::milliseconds min_connect_timeout{20000};
  // Everything else about the connection (TLS, keepalive, limits); its
  // connect_timeout is replaced per attempt.
  http2::ClientConnectionOptions connection;
};

class Subchannel {
 public:
  // Watchers run on the control loop, inline with the state change.
  using Watcher = std::function<void(ConnectivityState state, const Status& status)>;

  const Endpoint& endpoint() const { return endpoint_; }
  const std::string& address() const { return endpoint_.address; }
  const SocketAddress& socket_address() const { return address_; }
  // How its connections are secured (null: plaintext), and its key in the
  // pool. Immutable: any thread.
  const std::shared_ptr<const UpstreamTls>& tls() const { return tls_; }
  const std::string& key() const { return key_; }
  // Never reused within the process (Endpoint::index is): a loop that keeps
  // a connection per endpoint index tells by it whether the endpoint at an
  // index is still the one it connected to. Immutable: any thread.
  uint64_t uid() const { return uid_; }

  // Any thread. Sticky TRANSIENT_FAILURE as gRPC's LB policies see a child:
  // after a failure the state stays TRANSIENT_FAILURE through backoff and
  // the next attempt, until a connection is READY.
  ConnectivityState state() const { return visible_state_.load(std::memory_order_acquire); }
  // Control thread: the last connection failure (OK if none).
  const Status& last_failure() const { return last_failure_; }

  // Control thread: connect if IDLE; if in backoff, connect when it ends.
  void RequestConnection();
  // Any thread, lock-free (pickers, A42 "TriggerConnectionAttemptInControlPlane").
  // Wakes the control loop only for the first request of a batch.
  void RequestConnectionFromAnyThread();

  // Control thread: the connection while READY and usable, else nullptr.
  // A connection that received GOAWAY (or closed) takes no new call from
  // the moment it did, before this subchannel's task has replaced it: a
  // pick then waits for the subchannel's next state (A6: a call must not
  // be started on a connection that will refuse it).
  http2::ClientConnection* connection() const {
    return connection_ != nullptr && connection_->usable() ? connection_.get() : nullptr;
  }

  // Control thread.
  int AddWatcher(Watcher watcher);
  void RemoveWatcher(int id);

  // Connection attempts started so far (tests, CSDS-like dumps).
  uint64_t connection_attempts() const { return attempts_; }

  ~Subchannel();

 private:
  friend class SubchannelPool;
  friend class SubchannelRef;
  Subchannel(SubchannelPool& pool, SocketAddress address, std::shared_ptr<const UpstreamTls> tls,
             std::string key, uint32_t index);
  Task<void> Run();
  Task<void> ConnectOnce();
  void SetState(ConnectivityState raw, Status status);

  SubchannelPool& pool_;
  SocketAddress address_;
  const std::shared_ptr<const UpstreamTls> tls_;
  const std::string key_;
  Endpoint endpoint_;
  const uint64_t uid_;
  // Read by every pick on any thread: a line of its own, so the control
  // thread's writes to the fields after it (refs_ changes with every
  // picker made or freed) do not take it away from the picking threads.
  alignas(64) std::atomic<ConnectivityState> visible_state_{ConnectivityState::kIdle};
  alignas(64) ConnectivityState raw_state_ = ConnectivityState::kIdle;
  Status last_failure_;
  bool connect_requested_ = false;  // control thread
  std::unique_ptr<Event> wakeup_;   // set when a request arrives while waiting
  std::unique_ptr<TaskGroup> group_;
  std::unique_ptr<http2::ClientConnection> connection_;
  xds_internal::ExponentialBackoff backoff_;
  uint64_t attempts_ = 0;
  std::map<int, Watcher> watchers_;
  int next_watcher_id_ = 0;
  size_t refs_ = 0;  // control thread: SubchannelRefs (policies, pickers)
  // Cross-thread connection requests (SubchannelPool's lock-free stack).
  std::atomic<bool> request_queued_{false};
  Subchannel* next_request_ = nullptr;
};

// A counted reference (control thread only: copying or destroying one is a
// plain integer update). The last reference shuts the subchannel down.
class SubchannelRef {
 public:
  SubchannelRef() = default;
  explicit SubchannelRef(Subchannel* s);
  SubchannelRef(const SubchannelRef& other) : SubchannelRef(other.subchannel_) {}
  SubchannelRef(SubchannelRef&& other) noexcept
      : subchannel_(std::exchange(other.subchannel_, nullptr)) {}
  SubchannelRef& operator=(SubchannelRef other) noexcept {
    std::swap(subchannel_, other.subchannel_);
    return *this;
  }
  ~SubchannelRef();

  Subchannel* get() const { return subchannel_; }
  Subchannel* operator->() const { return subchannel_; }
  explicit operator bool() const { return subchannel_ != nullptr; }

 private:
  Subchannel* subchannel_ = nullptr;
};

// One subchannel per unique address and security (A29: a cluster whose
// connections are TLS never shares one with a plaintext cluster). Lives on the control loop;
// Shutdown() before destruction. The pool outlives every SubchannelRef to its subchannels (a call
// holds the pool, by a CallHold, with its subchannel).
class SubchannelPool : public std::enable_shared_from_this<SubchannelPool> {
 public:
  static std::shared_ptr<SubchannelPool> Create(Loop& loop, SubchannelOptions options = {});
  ~SubchannelPool();

  // A call's hold on the pool (control thread only, as SubchannelRef): the
  // pool is freed when its last owner lets go and no hold is left,
  // whichever comes last. A plain count: a call on the control loop takes
  // no reference count other threads write.
  class CallHold {
   public:
    CallHold() = default;
    explicit CallHold(SubchannelPool* pool) : pool_(pool) {
      if (pool_ != nullptr) ++pool_->call_holds_;
    }
    CallHold(CallHold&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)) {}
    CallHold& operator=(CallHold&& other) noexcept {
      CallHold old(std::move(*this));
      pool_ = std::exchange(other.pool_, nullptr);
      return *this;
    }
    ~CallHold() {
      if (pool_ != nullptr && --pool_->call_holds_ == 0 && pool_->owners_gone_) delete pool_;
    }

   private:
    SubchannelPool* pool_ = nullptr;
  };

  // The subchannel for `address` secured by `tls` (null: plaintext),
  // created IDLE if there is none.
  SubchannelRef Get(const SocketAddress& address, std::shared_ptr<const UpstreamTls> tls = nullptr);
  // A subchannel's key: the address as SocketAddress::ToString() spells it
  // ("10.0.0.1:443"), then the security's key if any.
  static std::string KeyOf(std::string address, const UpstreamTls* tls);
  // The live subchannel of `key` (KeyOf; a plaintext subchannel's is its
  // address), or nullptr.
  const Subchannel* Find(const std::string& key) const;
  size_t size() const { return subchannels_.size(); }
  // Changes whenever a subchannel is made or released (and so whenever an
  // address's Endpoint::index may change): what callers derived from Find()
  // holds while it stays the same.
  uint64_t version() const { return version_; }
  Loop& loop() const { return loop_; }
  // Control thread: told of each subchannel released (its endpoint left
  // every picker), with its Endpoint::index and uid, as it leaves the pool.
  using ReleaseObserver = std::function<void(uint32_t index, uint64_t uid)>;
  void SetReleaseObserver(ReleaseObserver observer) { release_observer_ = std::move(observer); }
  const SubchannelOptions& options() const { return options_; }

  // Closes every connection and waits for the subchannels' tasks; Get()
  // must not be called afterwards. Any number of callers: one teardown,
  // each returns once it has ended (at once after that), and the first to
  // return may free the pool. A reference released meanwhile, or later,
  // frees its subchannel once the subchannel's tasks have ended.
  Task<void> Shutdown();

 private:
  friend class Subchannel;
  friend class SubchannelRef;
  SubchannelPool(Loop& loop, SubchannelOptions options);
  // The deleter of the pool's shared_ptr.
  static void OwnersLetGo(SubchannelPool* pool);
  Task<void> TearDown();
  void Release(Subchannel* s);
  // Owns a released subchannel until its tasks have ended.
  static Task<void> Reap(std::unique_ptr<Subchannel> doomed);
  void PushRequest(Subchannel* s);
  void DrainRequests();

  Loop& loop_;
  SubchannelOptions options_;
  size_t call_holds_ = 0;     // CallHolds (control thread)
  bool owners_gone_ = false;  // every shared_ptr let go (control thread)
  std::map<std::string, std::unique_ptr<Subchannel>> subchannels_;  // by KeyOf()
  // Endpoint::index values: the smallest free one is taken, so they stay
  // dense (as many as the pool's largest size).
  std::vector<uint32_t> free_indices_;  // a min-heap
  uint32_t next_index_ = 0;
  uint64_t version_ = 0;
  // Owns each released subchannel whose tasks still run, until they end;
  // the teardown's joins of the subchannels' tasks run here too.
  std::unique_ptr<TaskGroup> reapers_;
  std::atomic<Subchannel*> requests_{nullptr};  // lock-free stack (any thread)
  ReleaseObserver release_observer_;
  ShutdownOnce shutdown_;
};

}  // namespace uxds
