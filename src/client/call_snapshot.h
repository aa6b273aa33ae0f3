// What a call is routed and picked by, on whichever loop it runs (#25):
// the control loop publishes a CallSnapshot (the compiled routes, and for
// each cluster they name its LB tree or why it has none) with one atomic
// swap; every loop that calls the channel routes, hashes and picks against
// it on its own thread. A snapshot is immutable once published.
//
// It is published through a PickerSlot, for that slot's epoch
// reclamation: a reader holds it only inside a PickScope, and it is freed
// on the control loop once no scope can still see it. So a cluster tree a
// snapshot owns is released on the control loop, after every reader.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/call_request.h"
#include "client/compiled_routes.h"
#include "http2/client_connection.h"
#include "lb/cluster_load_balancer.h"
#include "lb/subchannel.h"
#include "uxds/channel.h"
#include "uxds/client_channel.h"
#include "uxds/task.h"

namespace uxds::client_internal {

struct SnapshotCluster {
  // The channel's id for the cluster, never reused (0: the channel has no
  // state for it): what a call routed by older routes keeps its cluster by.
  uint64_t id = 0;
  // Null: the cluster has no tree; `error` says why when it is known.
  std::shared_ptr<ClusterLoadBalancer> lb;
  Status error;
  // A88: the resolution note its failed picks carry.
  std::string note;
};

class CallSnapshot final : public Picker {
 public:
  // Not a picker of endpoints: a PickerSlot only carries it.
  PickResult Pick(const PickArgs&) const override { return PickResult::Queue(); }

  std::shared_ptr<const CompiledRoutes> routes;  // null: no config yet
  std::vector<SnapshotCluster> clusters;         // routes->clusters() order
  bool closed = false;                           // the channel is shutting down
  // No routes because the config failed (A74): config_error fails calls.
  bool config_failed = false;
  Status config_error;
  bool direct = false;      // a host:port channel (its one cluster resolves)
  uint64_t channel_id = 0;  // A42: io.grpc.channel_id
  // What the channel waits for while it has no config (the deadline
  // message of a call that waited for one).
  std::string waiting_for;

  // The index of the cluster with `id` in `clusters`, if any.
  std::optional<uint32_t> IndexOfCluster(uint64_t id) const;
};

// A call's routing, chosen once per call by its first pick and reused by
// every later one (a queued pick's, and A6's transparent retries'): A42
// "the call's hash will be the same when it is re-attempted with a new
// picker"; A76: the config selector assigns it once.
//
// A call that picks at once holds no reference to the routes it was routed
// by (a reference count every loop's calls would write): it keeps their
// generation, and its cluster's id to find it in newer routes. A call
// whose pick misses pins the routes (`pinned`), for what its failure says.
struct CallRoute {
  uint64_t generation = 0;  // of the routes chosen in
  uint32_t cluster = 0;     // an index into those routes' clusters()
  uint64_t cluster_id = 0;  // SnapshotCluster::id
  uint64_t hash = 0;
  // Set by PinRoute() after a miss, until the call is routed by newer routes.
  std::shared_ptr<const CompiledRoutes> pinned;
  // A31: when the route's max_stream_duration, counted from the call's
  // first routing, ends (kept when the call is routed again).
  std::optional<Loop::Clock::time_point> stream_deadline;
  // A33: the call's faults were decided (at its first routing; a call
  // routed again is not faulted again).
  bool faults_decided = false;
  // The call's deadline: the application's, or the route's when earlier.
  std::optional<Loop::Clock::time_point> Deadline(
      std::optional<Loop::Clock::time_point> application) const {
    if (!stream_deadline.has_value()) return application;
    if (!application.has_value()) return stream_deadline;
    return std::min(*application, *stream_deadline);
  }
  // The cluster's name: after a miss only (the routes are pinned).
  const std::string& cluster_name() const { return pinned->clusters()[cluster]; }
};

// Why a pick could not send the call anywhere yet, and what follows.
struct PickMiss {
  enum class Next : uint8_t {
    kFail,        // the call fails with `status`
    kWaitOrFail,  // gRPC: fails with `status`, or waits for ready
    kWait,        // queued: waits for a change whatever wait_for_ready
    kFault,       // A33: `fault` delays and/or aborts the call before its pick
  };
  Next next = Next::kFail;
  Status status;
  // kWait: what the call waits for, which its deadline's message says.
  enum class Waiting : uint8_t { kConfig, kResolving, kEndpoint } waiting = Waiting::kConfig;
  // kFault: what to inject (it holds the call's place among the process's
  // active faults until the call is done with it).
  std::optional<InjectedFault> fault = std::nullopt;
};

// Routes the call by `snapshot` (once: a call keeps its cluster while new
// routes still name it, A6/A42) and returns its cluster's entry when that
// has a tree to pick from; else nullptr and why in `miss`.
const SnapshotCluster* RouteCall(const CallSnapshot& snapshot, CallRequest& request,
                                 std::optional<CallRoute>& route, PickMiss& miss);

// After a pick against `snapshot` missed: pins the routes `route` was
// chosen in (see CallRoute), inside the scope that reads `snapshot`.
void PinRoute(const CallSnapshot& snapshot, std::optional<CallRoute>& route);

// Picks in `cluster` inside `scope` (a PickScope of its picker slot): a
// kComplete result for a READY endpoint (valid while the scope lives);
// else why not in `miss` (kWait for a queued pick). Returned, not written
// through a reference: the picker tree builds it in the caller's variable.
// `unreachable`: endpoints the calling loop cannot connect to (null: none).
PickResult PickInCluster(const SnapshotCluster& cluster, const PickScope& scope,
                         const CallRoute& route, CallRequest& request, PickMiss& miss,
                         const EndpointMask* unreachable = nullptr);

struct LoopConnection;  // one loop's connection to one endpoint (loop_channel.cc)

// A call's claim on a loop's connection: the connection stays open while
// any claim on it lives, whatever happens to its endpoint meanwhile.
class LoopConnectionUse {
 public:
  LoopConnectionUse() = default;
  explicit LoopConnectionUse(LoopConnection* connection);
  LoopConnectionUse(LoopConnectionUse&& other) noexcept
      : connection_(std::exchange(other.connection_, nullptr)) {}
  LoopConnectionUse& operator=(LoopConnectionUse&& other) noexcept {
    LoopConnectionUse old(std::move(*this));
    connection_ = std::exchange(other.connection_, nullptr);
    return *this;
  }
  ~LoopConnectionUse();

 private:
  LoopConnection* connection_ = nullptr;
};

// Where a pick sent a call: the endpoint's connection (READY now), and the
// call's A32 count to end with the call. The call owns what keeps its
// connection (the subchannel on the channel's loop, a claim on another
// loop's connection), as a gRPC call holds its connected subchannel: an
// update that drops the endpoint or its cluster while the call runs must
// not end the call.
struct PickedEndpoint {
  PickedEndpoint() = default;
  PickedEndpoint(PickedEndpoint&&) noexcept = default;
  // Lets go of what it held in its members' destruction order (the
  // subchannel before the pool's hold), then takes `other`'s.
  PickedEndpoint& operator=(PickedEndpoint&& other) noexcept {
    if (this != &other) {
      this->~PickedEndpoint();
      new (this) PickedEndpoint(std::move(other));
    }
    return *this;
  }

  http2::ClientConnection* connection = nullptr;
  const std::string* peer_address = nullptr;  // "10.0.0.1:443", owned by what keeps it
  SubchannelPool::CallHold pool;              // outlives `subchannel`
  SubchannelRef subchannel;
  LoopConnectionUse use;
  // What CallFinished() reports when the call ends. Its A32 counter lives
  // while the call is counted in it (CallCounter); `locality_stats` keeps
  // the locality's counts alive.
  PickResult call_end;
  std::shared_ptr<LocalityLoadStats> locality_stats;
  const std::string& peer() const { return *peer_address; }
  // Keeps what `result` counts the call in.
  void CountIn(const PickResult& result);
};

// Where calls are picked: the channel's own loop, or another loop's share
// of it. PickAfterMiss() is the same for both.
class CallPicker {
 public:
  virtual ~CallPicker() = default;
  // One route and pick without waiting: the connection of a READY
  // endpoint, else why not.
  virtual bool PickNow(CallRequest& request, std::optional<CallRoute>& route,
                       PickedEndpoint& picked, PickMiss& miss) = 0;
  // Waits for the next config or picker change, or the deadline: false
  // once the deadline has passed. At once when shutting down.
  virtual Task<bool> WaitForChange(std::optional<Loop::Clock::time_point> deadline) = 0;
  // The deadline message of a call that found no config.
  virtual std::string WaitingForConfig() const = 0;
  // The last failure of the cluster `route` names (OK if none known).
  virtual Status ClusterFailure(const CallRoute& route) const = 0;
  // The channel is shutting down (its waits return at once).
  virtual bool Closing() const = 0;
  // After PickNow() missed with `miss`: fails the call, or waits where
  // gRPC queues the pick (within the deadline) and picks again each time
  // the config or a picker changes. Unary and streaming calls alike.
  Task<StatusOr<PickedEndpoint>> PickAfterMiss(CallRequest& request, bool wait_for_ready,
                                               std::optional<Loop::Clock::time_point> deadline,
                                               std::optional<CallRoute>& route, PickMiss miss);

 private:
  // A33: waits out the injected delay (within the call's deadline), then
  // the abort's status if any; OK to go on to the pick.
  Task<Status> InjectFault(const InjectedFault& fault,
                           std::optional<Loop::Clock::time_point> deadline);
};

// Waits, on `loop`, until woken through `waiters` (an Event the waker
// sets: the wake is recorded in the waiter) or the deadline: false once the
// deadline has passed (or the wait was cancelled).
Task<bool> WaitForWake(Loop& loop, std::vector<Event*>& waiters,
                       std::optional<Loop::Clock::time_point> deadline);

// The call's deadline, when options.timeout is set.
std::optional<Loop::Clock::time_point> DeadlineOf(const CallOptions& options);

// A6: whether a failed attempt that got as far as `delivery` is started
// again; counts the retries of refused attempts in `refused_retries`.
bool RetryTransparently(http2::ClientCall::Delivery delivery, int& refused_retries,
                        std::optional<Loop::Clock::time_point> deadline);

// One unary call through `picker`, on `loop` (the picker's): routed,
// hashed and picked, run on the picked connection, transparently retried
// as A6 says.
Task<StatusOr<UnaryResponse>> RunUnaryCall(CallPicker& picker, Loop& loop, std::string method,
                                           std::string request, CallOptions options);

// One streaming call through `picker`, on `loop`: picked as a unary call;
// A6's transparent retry only until the stream is returned. The stream
// holds `keep_alive` (what its connection's owner needs kept) until it is
// destroyed.
Task<StatusOr<std::unique_ptr<ClientStream>>> RunStartStream(CallPicker& picker, Loop& loop,
                                                             std::string method,
                                                             CallOptions options,
                                                             std::shared_ptr<void> keep_alive);

}  // namespace uxds::client_internal
