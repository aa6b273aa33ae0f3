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

#include "client/call_snapshot.h"
#include "client/compiled_routes.h"
#include "client/loop_channel_impl.h"
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

struct Channel::Impl final : client_internal::CallPicker {
  Impl(Loop& loop, ChannelOptions options)
      : loop(loop),
        options(std::move(options)),
        shared(std::make_shared<client_internal::ChannelShared>()),
        reclaim_timer(loop),
        tasks(loop),
        async_calls(loop),
        shutdown(loop) {}

  // One cluster a route names, with its LB tree (none if the cluster has an
  // error: `error` then fails its calls).
  struct ClusterState {
    // SnapshotCluster::id: set when the state is made, never reused.
    uint64_t id = 0;
    // Shared with the published snapshots that name it, which release it
    // on this loop once no other loop can read them.
    std::shared_ptr<ClusterLoadBalancer> lb;
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
  // What every loop's calls are routed and picked by, and the other loops
  // that call the channel.
  const std::shared_ptr<client_internal::ChannelShared> shared;
  // Frees snapshots no loop can read any more (batched, as pickers are).
  Timer reclaim_timer;

  std::shared_ptr<const XdsConfig> config;
  Status config_error = UnavailableError("no xDS configuration yet");
  bool config_failed = false;  // config_error is a real error, not "not yet"
  std::map<std::string, ClusterState, std::less<>> clusters;
  uint64_t last_cluster_id = 0;  // ClusterState::id
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
    shared->NotifyChange();
  }

  LbPolicyOptions LbOptions() const;

  // A29: whether clusters' xDS security config applies (xDS credentials),
  // and how the endpoints of the clusters without one (and of a host:port
  // target) are secured: the fallback credentials (null: plaintext).
  bool xds_security = false;
  std::shared_ptr<const UpstreamTls> fallback_tls;
  // Sets the two from options.credentials; INVALID_ARGUMENT names the
  // field (a TLS file that cannot be used, an xDS fallback that is xDS).
  Status UseCredentials();
  // How connections to `cluster`'s endpoints are secured (null: plaintext).
  std::shared_ptr<const UpstreamTls> TlsFor(const ClusterResource& cluster) const;

  // The cluster's state, made (with a new id) if it has none.
  ClusterState& StateOf(const std::string& name);
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

  using CallRoute = client_internal::CallRoute;
  using PickMiss = client_internal::PickMiss;
  using PickedEndpoint = client_internal::PickedEndpoint;
  // client_internal::CallPicker on this loop: a READY pick's connection is
  // its subchannel's. No copy of the call's metadata and no allocation.
  bool PickNow(client_internal::CallRequest& request, std::optional<CallRoute>& route,
               PickedEndpoint& picked, PickMiss& miss) override;
  bool PickIn(const client_internal::CallSnapshot& snapshot, client_internal::CallRequest& request,
              std::optional<CallRoute>& route, PickedEndpoint& picked, PickMiss& miss);
  Task<bool> WaitForChange(std::optional<Loop::Clock::time_point> deadline) override;
  bool Closing() const override { return shutdown.started(); }
  Status ClusterFailure(const CallRoute& route) const override;
  // The routes every new call is routed by: the config's virtual host
  // compiled, or a host:port target's one cluster; null while there is no
  // config. LinkRoutes() publishes them with their clusters' trees (a
  // CallSnapshot) after every change of `routes` or `clusters`.
  std::shared_ptr<const client_internal::CompiledRoutes> routes;
  void LinkRoutes();
  // Frees the snapshots no loop can read any more; again later while some
  // are left.
  void ScheduleReclaim();

  // The deadline message of a call that found no config: what the channel
  // is still waiting for.
  std::string WaitingForConfig() const override {
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
