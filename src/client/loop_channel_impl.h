// A Channel called from other loops (#25): what the channel's loop shares
// with them (ChannelShared), and one loop's share (LoopChannel::Impl):
// its connections, one per endpoint it sent calls to, and its queued
// calls.
//
// Ownership across threads:
// - The channel's loop publishes CallSnapshots into ChannelShared::snapshots;
//   a loop reads them only inside a PickScope (epoch reclamation).
// - It tells the registered shares of changes (wake queued calls) and of
//   endpoints that left (close their connections) by posting closures to
//   their loops, under `mu`. A share unregisters under `mu` when it shuts
//   down, so once Shutdown() has unregistered, nothing posts to its loop:
//   the loop may end after the share's Shutdown() returns.
// - A posted closure holds the share weakly: it finds nothing once the
//   share (destroyed on its own loop) is gone.
// - A share's connections, calls and tasks live on its loop alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/call_snapshot.h"
#include "http2/client_connection.h"
#include "lb/upstream_tls.h"
#include "runtime/shutdown_once.h"
#include "runtime/socket_address.h"
#include "uxds/client_channel.h"
#include "uxds/loop.h"
#include "xds/client/exponential_backoff.h"

namespace uxds::client_internal {

struct ChannelShared {
  // Where the channel's loop publishes what calls are routed and picked by.
  PickerSlot snapshots;
  // The other loops' connections: the channel's connection options, with
  // this connect timeout (gRPC's min_connect_timeout), retried after a
  // failure with the subchannels' backoff (gRPC's connection-backoff).
  http2::ClientConnectionOptions connection;
  xds_internal::ExponentialBackoff::Options backoff{std::chrono::milliseconds(1000), 1.6, 0.2,
                                                    std::chrono::milliseconds(120000)};
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(30)};

  // Channel's loop: wakes every share's queued calls (one posted closure
  // per share until it has run).
  void NotifyChange();
  // Channel's loop: endpoint `index` (subchannel `uid`) left every picker;
  // each share closes its connection to it once its calls have ended.
  void NotifyEndpointLeft(uint32_t index, uint64_t uid);

  std::mutex mu;
  std::vector<std::shared_ptr<LoopChannel::Impl>> shares;  // guarded by mu
};

// One loop's connection to one endpoint.
struct LoopConnection {
  LoopChannel::Impl* owner = nullptr;
  uint32_t index = 0;  // Endpoint::index when it was made
  uint64_t uid = 0;    // the subchannel's: which endpoint this is
  std::string address;
  SocketAddress socket_address;
  // A29: secured as the subchannel's connections are (null: plaintext).
  std::shared_ptr<const UpstreamTls> tls;
  std::unique_ptr<http2::ClientConnection> connection;
  bool connecting = false;  // a connect (or its retry delay) is running
  bool retired = false;     // closed and freed once unused
  // The last connect from this loop failed, and none has succeeded since:
  // this loop's picks go around the endpoint (LoopChannel::Impl::
  // unreachable) while its connect task retries with `backoff`.
  bool unreachable = false;
  // Made by the connect task, not by the pick that makes the connection:
  // seeding it costs a system call (getpid).
  std::optional<xds_internal::ExponentialBackoff> backoff;
  size_t uses = 0;  // calls on `connection`
  // Calls started on it, and that count at the last idle sweep: unchanged
  // with no call open means idle for a whole sweep period. A new
  // connection matches no count yet, so the first sweep it meets keeps it
  // (its first call may not have picked it yet: the sweep can come between
  // its connect and that pick).
  uint64_t started = 0;
  uint64_t started_at_sweep = UINT64_MAX;
  Status last_failure;
};

}  // namespace uxds::client_internal

namespace uxds {

struct LoopChannel::Impl final : client_internal::CallPicker,
                                 std::enable_shared_from_this<LoopChannel::Impl> {
  Impl(Loop& loop, std::shared_ptr<client_internal::ChannelShared> shared)
      : loop(loop),
        shared(std::move(shared)),
        idle_sweep(loop),
        connects(loop),
        closes(loop),
        shutdown(loop) {}

  bool PickNow(client_internal::CallRequest& request,
               std::optional<client_internal::CallRoute>& route,
               client_internal::PickedEndpoint& picked, client_internal::PickMiss& miss) override;
  bool PickIn(const client_internal::CallSnapshot& snapshot, client_internal::CallRequest& request,
              std::optional<client_internal::CallRoute>& route,
              client_internal::PickedEndpoint& picked, client_internal::PickMiss& miss);
  Task<bool> WaitForChange(std::optional<Loop::Clock::time_point> deadline) override;
  // This handle, or the channel (its snapshot is closed).
  bool Closing() const override;
  std::string WaitingForConfig() const override;
  Status ClusterFailure(const client_internal::CallRoute& route) const override;

  // This loop's connection to the endpoint at `index`, made for `subchannel`
  // (the one there now) if the one held is another's.
  client_internal::LoopConnection& ConnectionFor(uint32_t index, const Subchannel& subchannel);
  // No new call goes to `connection`; it is closed and freed once unused.
  void Retire(std::unique_ptr<client_internal::LoopConnection> connection);
  // Frees a retired connection once nothing uses or connects it.
  void MaybeFree(client_internal::LoopConnection* connection);
  // Connects, and after a failure retries with backoff until connected,
  // retired or shut down; the endpoint is in `unreachable` meanwhile.
  Task<void> Connect(client_internal::LoopConnection* connection);
  // `connection` (in by_index, or retired) could or could not be reached.
  void SetUnreachable(client_internal::LoopConnection& connection, bool unreachable);
  static Task<void> CloseAndFree(std::unique_ptr<client_internal::LoopConnection> connection);
  void EndpointLeft(uint32_t index, uint64_t uid);
  // Every idle_timeout while this loop has connections: retires those no
  // call used since the last sweep.
  void ScheduleIdleSweep();
  void SweepIdle();
  void WakeWaiters() {
    for (Event* waiter : std::exchange(waiters, {})) waiter->Set();
  }
  Task<void> TearDown();

  Loop& loop;
  const std::shared_ptr<client_internal::ChannelShared> shared;
  // Set (any thread) while a wake is posted and has not run.
  std::atomic<bool> wake_posted{false};
  // By Endpoint::index.
  std::vector<std::unique_ptr<client_internal::LoopConnection>> by_index;
  std::vector<std::unique_ptr<client_internal::LoopConnection>> retired;
  // By Endpoint::index: the endpoints of by_index this loop failed to
  // connect to (PickArgs::unreachable), and how many there are.
  std::vector<uint64_t> unreachable_words;
  size_t unreachable_count = 0;
  std::vector<Event*> waiters;
  Timer idle_sweep;
  // Calls inside UnaryCall(): the teardown waits until the last has left.
  size_t calls_inside = 0;
  Event* last_call_left = nullptr;
  TaskGroup connects;  // cancelled by the teardown
  TaskGroup closes;    // joined by the teardown
  bool closing = false;
  ShutdownOnce shutdown;
};

}  // namespace uxds
