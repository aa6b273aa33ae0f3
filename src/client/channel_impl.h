// Channel::Impl: what a Channel holds (its target, config, clusters and
// their LB trees, the calls waiting in it), shared by the files that make
// up the Channel: channel.cc (creation, teardown, routing and picking a
// call, running it) and channel_clusters.cc (a config into cluster trees).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/compiled_routes.h"
#include "client/xds_dependency_manager.h"
#include "http2/client_connection.h"
#include "lb/cluster_load_balancer.h"
#include "lb/lb_policy.h"
#include "lb/priority_names.h"
#include "runtime/host_resolver.h"
#include "runtime/shutdown_once.h"
#include "uxds/client_channel.h"
#include "xds/routing/route_selection.h"

namespace uxds {

namespace client_internal {

struct ParsedTarget {
  bool xds = false;
  std::string authority;  // xds: the URI's authority ("" for xds:///name)
  std::string name;       // xds: the path without '/'; else "host:port"
};

// One resource set a cluster's tree is built from: a cluster (or an
// aggregate cluster's leaf) with its Cluster and endpoints (null: none).
struct ClusterSource {
  std::string name;
  std::shared_ptr<const ClusterResource> cluster;
  std::shared_ptr<const EndpointResource> endpoints;
};

// The same resources: the same objects (the XdsClient hands out the same
// object while a resource is unchanged) or equal ones (deep operator==, so
// an identical update sent again rebuilds nothing).
bool operator==(const ClusterSource& a, const ClusterSource& b);

}  // namespace client_internal

struct Channel::Impl {
  Impl(Loop& loop, ChannelOptions options)
      : loop(loop), options(std::move(options)), tasks(loop), async_calls(loop), shutdown(loop) {}

  // One cluster a route names, with its LB tree (none if the cluster has an
  // error: `error` then fails its calls).
  struct ClusterState {
    std::unique_ptr<ClusterLoadBalancer> lb;
    Status error;
    std::string note;
    // The resources `lb` was last updated with: a config that brings the
    // same ones leaves the tree alone.
    std::vector<client_internal::ClusterSource> sources;
    // A37: the names of each leaf cluster's priorities (the cluster's own
    // for an EDS or LOGICAL_DNS cluster), kept across updates.
    std::map<std::string, PriorityNames, std::less<>> priority_names;
  };

  Loop& loop;
  const ChannelOptions options;
  client_internal::ParsedTarget target;
  std::shared_ptr<XdsClient> xds_client;
  std::unique_ptr<XdsDependencyManager> dependencies;
  std::shared_ptr<SubchannelPool> subchannels;
  // A42: filter_state io.grpc.channel_id, random per channel.
  const uint64_t channel_id = ThreadRandom();

  std::shared_ptr<const XdsConfig> config;
  Status config_error = UnavailableError("no xDS configuration yet");
  bool config_failed = false;  // config_error is a real error, not "not yet"
  std::map<std::string, ClusterState, std::less<>> clusters;
  // A plain host:port channel: its one cluster.
  std::string direct_cluster;
  std::unique_ptr<HostResolver> resolver;
  // The channel's own tasks (a host:port target's resolution): they use
  // the channel, so Shutdown() cancels and joins them before it returns.
  TaskGroup tasks;
  // UnaryCallAsync / StartStreamAsync: what their posted closures find on
  // the loop. Loop thread only; `channel` is cleared when the teardown
  // starts, so a closure that arrives later fails its call without
  // touching the channel (which may be gone by then).
  struct AsyncGate {
    Channel* channel = nullptr;
  };
  std::shared_ptr<AsyncGate> async_gate = std::make_shared<AsyncGate>();
  // The calls those closures started: the teardown cancels and joins them.
  TaskGroup async_calls;
  // Runs TearDown() once, for every caller of Shutdown().
  ShutdownOnce shutdown;
  // Calls waiting for the next config or picker.
  std::vector<Event*> waiters;
  // Calls inside WaitForChange(), woken or not. A woken call reads the
  // channel as it resumes, so the teardown waits until the last has left:
  // the first caller of Shutdown() to return may destroy the channel.
  size_t waiting_calls = 0;
  Event* last_call_left = nullptr;  // the teardown's, while it waits
  // A42: the counters of a cluster that reports load, else nullptr. The
  // LRS streams belong to the XdsClient, as in gRPC: every channel on it
  // shares one stream per LRS server, and the same cluster's load from
  // several channels adds up in one ClusterStats.
  std::shared_ptr<ClusterLoadStats> LoadStatsFor(const std::string& name,
                                                 const ClusterResource& cluster);

  void WakeWaiters() {
    for (Event* waiter : std::exchange(waiters, {})) waiter->Set();
  }

  LbPolicyOptions LbOptions() const;

  ClusterState& EnsureCluster(const std::string& name);

  void OnConfig(StatusOr<std::shared_ptr<const XdsConfig>> update);

  void UpdateCluster(const std::string& name);

  // The resolution note a cluster's failed picks carry: its own, or every
  // leaf's of an aggregate cluster (the one that explains a failure may be
  // any), each once, joined with "; ".
  std::string NoteOf(const XdsConfig::ClusterConfig& cluster) const;

  // What UpdateCluster() builds cluster `name`'s tree from: the cluster,
  // then (aggregate, A37) each leaf in order, with what it has of each.
  std::vector<client_internal::ClusterSource> SourcesOf(
      const std::string& name, const XdsConfig::ClusterConfig& cluster) const;

  // The cluster_impl config of cluster `name`: its drops, its max_requests
  // (A32), the call counter shared by every user of the cluster (A37) and
  // its load report (A42; an aggregate cluster's own lrs_server is not
  // used, as in gRPC).
  std::shared_ptr<const ClusterImplConfig> ClusterImplConfigFor(
      const std::string& name, const ClusterResource& cluster,
      std::vector<EndpointResource::DropCategory> drops);

  // Waits for the next config or picker change, or the deadline: false once
  // the deadline has passed. At once once the channel is shutting down (the
  // caller then finds it so).
  Task<bool> WaitForChange(std::optional<Loop::Clock::time_point> deadline);

  // Where a pick sent a call: the endpoint's connection (READY now), and
  // the call's A32 count to end with the call. The call owns its
  // subchannel and counter, as a gRPC call holds its connected subchannel:
  // an update that drops the endpoint or its cluster while the call runs
  // must not end the call.
  struct PickedEndpoint {
    http2::ClientConnection* connection = nullptr;
    std::shared_ptr<SubchannelPool> pool;  // outlives `subchannel`
    SubchannelRef subchannel;
    // What CallFinished() reports when the call ends; `counter` and
    // `locality_stats` keep what it points to alive.
    PickResult call_end;
    std::shared_ptr<CallCounter> counter;
    std::shared_ptr<LocalityLoadStats> locality_stats;
    // The endpoint's address, "10.0.0.1:443".
    const std::string& peer() const { return subchannel->address(); }
  };
  // A call's routing, chosen once per call by its first pick and reused by
  // every later one (a queued pick's, and A6's transparent retries'): A42
  // "the call's hash will be the same when it is re-attempted with a new
  // picker"; A76: the config selector assigns it once.
  struct CallRoute {
    std::shared_ptr<const client_internal::CompiledRoutes> routes;  // chosen in
    uint32_t cluster = 0;  // an index into routes->clusters()
    uint64_t hash = 0;
  };
  // Why a pick could not send the call anywhere yet, and what follows.
  struct PickMiss {
    enum class Next : uint8_t {
      kFail,        // the call fails with `status`
      kWaitOrFail,  // gRPC: fails with `status`, or waits for ready
      kWait,        // queued: waits for a change whatever wait_for_ready
    };
    Next next = Next::kFail;
    Status status;
    // kWait: what the call waits for, which its deadline's message says.
    enum class Waiting : uint8_t { kConfig, kResolving, kEndpoint } waiting = Waiting::kConfig;
  };
  // One route and pick (A28, A42, the cluster's picker) without waiting,
  // all on the calling thread: the connection of a READY endpoint, else
  // why not. What a call with a READY pick goes through: no copy of its
  // metadata and no allocation.
  bool PickNow(client_internal::CallRequest& request, std::optional<CallRoute>& route,
               PickedEndpoint& picked, PickMiss& miss);
  // After PickNow() missed with `miss`: fails the call, or waits where
  // gRPC queues the pick (within the deadline) and picks again each time
  // the config or a picker changes. Unary and streaming calls alike.
  Task<StatusOr<PickedEndpoint>> PickAfterMiss(client_internal::CallRequest& request,
                                               const CallOptions& options,
                                               std::optional<Loop::Clock::time_point> deadline,
                                               std::optional<CallRoute>& route, PickMiss miss);
  // The routes every new call is routed by: the config's virtual host
  // compiled, or a host:port target's one cluster; null while there is no
  // config. `route_clusters[i]` is the state of routes->clusters()[i]
  // (null: not built yet); LinkRoutes() recomputes it after every change
  // of `routes` or `clusters`.
  std::shared_ptr<const client_internal::CompiledRoutes> routes;
  std::vector<ClusterState*> route_clusters;
  void LinkRoutes();

  // The deadline message of a call that found no config: what the channel
  // is still waiting for.
  std::string WaitingForConfig() const {
    std::string waiting = dependencies != nullptr ? dependencies->WaitingFor() : "";
    return "deadline exceeded waiting for xDS config" +
           (waiting.empty() ? std::string() : ": " + waiting);
  }
  // Shutdown()'s one teardown: the channel's tasks, its watches (and their
  // DNS lookups) and clusters, the calls waiting in it, then its
  // connections.
  Task<void> TearDown();

  Task<void> ResolveDirect();
};

}  // namespace uxds
