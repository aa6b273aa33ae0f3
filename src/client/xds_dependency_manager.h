// XdsDependencyManager (A74): watches a channel's Listener, its
// RouteConfiguration, every cluster its virtual host's routes name (aggregate
// clusters expanded depth-first, A37) and their endpoints (EDS, or DNS for
// LOGICAL_DNS clusters, resolved off the loop), and publishes one complete
// XdsConfig at a time: a change takes effect only once every resource it
// depends on has been attempted (received, or known missing or broken).
// Watches no longer needed are cancelled.
//
// Control thread only (the XdsClient's loop). The DNS lookups are the
// manager's tasks: Shutdown() ends them before it is destroyed.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "client/xds_config.h"
#include "runtime/host_resolver.h"
#include "runtime/shutdown_once.h"
#include "uxds/loop.h"
#include "uxds/xds_client.h"
#include "uxds/xds_resources.h"

namespace uxds {

// Resolved addresses as endpoints: one priority of one locality (weight 1)
// whose endpoints are the addresses, in the resolver's order (pick_first
// tries them in turn). A LOGICAL_DNS cluster's (A37) and a host:port
// channel's.
EndpointResource EndpointsOfAddresses(const std::vector<SocketAddress>& addresses);

class XdsDependencyManager {
 public:
  // A74: an error only for what makes the whole config unusable: the
  // Listener or RouteConfiguration missing or failed (A88:
  // OnResourceChanged with an error), a Listener that is not an API
  // listener, or no virtual host for the authority. Cluster problems are
  // per cluster, inside the config.
  using Watcher = std::function<void(StatusOr<std::shared_ptr<const XdsConfig>> config)>;

  // Starts the Listener watch. `authority` picks the virtual host (A28).
  // gRPC's DNS resolver: a name is resolved again at most this often; a
  // request sooner waits until then.
  static constexpr std::chrono::seconds kMinTimeBetweenResolutions{30};

  // `lookup` resolves LOGICAL_DNS names (tests give their own), at most
  // once per `min_time_between_resolutions` each (tests shorten it).
  XdsDependencyManager(
      XdsClient& client, std::string listener_name, std::string authority, Watcher watcher,
      HostResolver::Lookup lookup = &HostResolver::ResolveBlocking,
      std::chrono::milliseconds min_time_between_resolutions = kMinTimeBetweenResolutions);
  // After Shutdown(); cancels every watch still open, no callback after
  // this. A DNS lookup left running (no Shutdown()) terminates the process.
  ~XdsDependencyManager();
  XdsDependencyManager(const XdsDependencyManager&) = delete;
  XdsDependencyManager& operator=(const XdsDependencyManager&) = delete;

  // A37: LB policies ask for this when their endpoints fail (pick_first
  // of a LOGICAL_DNS cluster): every LOGICAL_DNS cluster resolves its name
  // again, as gRPC's DNS resolver does: not while a lookup of it runs, and
  // not sooner than min_time_between_resolutions after the last one
  // started (the lookup then starts at that time).
  void RequestReresolution();

  // Cancels every watch and the DNS lookups, and waits for the lookups'
  // tasks; the watcher hears nothing once it is called. Any number of
  // callers: one teardown, each returns once it has ended (at once after
  // that), and the first to return may destroy the manager.
  Task<void> Shutdown();

  // Called after every resource or DNS answer (on the loop), whether or
  // not it made a whole config: what WaitingFor() says may have changed.
  void SetProgressObserver(std::function<void()> observer) { progress_ = std::move(observer); }

  // What has not arrived yet, for messages ("LDS resource \"svc\""; the
  // first few, comma-separated); empty when nothing is outstanding.
  std::string WaitingFor() const;

  // The resources watched now, for tests and CSDS-like views.
  std::vector<std::string> WatchedClusters() const;
  std::vector<std::string> WatchedEndpoints() const;

  // A37: the depth limit of an aggregate cluster tree.
  static constexpr int kMaxAggregateDepth = 16;

  // Clusters expanded by the last config computation (each at most once
  // per depth budget, so linear in the graph's size); for tests.
  uint64_t last_expansion_count() const { return last_expansion_count_; }
  // DNS lookups started so far; for tests.
  uint64_t dns_lookups() const { return dns_lookups_; }

 private:
  template <typename T>
  class ResourceWatcher;
  // What one watch has delivered so far.
  template <typename T>
  struct WatchState {
    std::shared_ptr<ResourceWatcher<T>> watcher;
    // nullopt: nothing yet. An error: the resource cannot be used (A88).
    std::optional<StatusOr<std::shared_ptr<const T>>> update;
    Status ambient;  // A88: the last ambient error (OK: none)
  };
  struct DnsState {
    std::string hostname;  // "host:port"
    std::optional<StatusOr<std::shared_ptr<const EndpointResource>>> update;
    uint64_t generation = 0;  // ignores results of superseded lookups
    bool resolving = false;   // a lookup of the current generation runs
    Loop::Clock::time_point last_start{};
    std::unique_ptr<Timer> deferred;  // a re-resolution waiting for its time
  };
  // What expanding one cluster gave, remembered for the rest of one config
  // computation, so a sub-graph several aggregate clusters share is
  // expanded once (as gRPC does), not once per path.
  struct Expansion {
    bool complete = false;  // everything it needs has been attempted
    // The depth budget it was expanded with (kMaxAggregateDepth - depth):
    // a too-deep result holds for this budget or less; any other result
    // holds for every budget.
    int budget = 0;
    // Aggregate levels on its deepest branch, itself included (0: a leaf).
    int height = 0;
    Status too_deep;                  // A37: set when the graph below is too deep
    std::vector<std::string> leaves;  // unique, in priority order
  };
  struct Expansions {
    std::map<std::string, Expansion, std::less<>> done;
    std::vector<std::string> path;  // the aggregate clusters above
    std::set<std::string> clusters, endpoint_names, dns_clusters;
  };

  template <typename T>
  WatchState<T>* StateFor(const std::string& name);
  template <typename T>
  void OnResource(const std::string& name, StatusOr<std::shared_ptr<const T>> resource);
  template <typename T>
  void OnAmbient(const std::string& name, Status status);
  template <typename T>
  WatchState<T>& Watch(std::map<std::string, WatchState<T>, std::less<>>& watches,
                       const XdsResourceTypeImpl<T>& type, const std::string& name);
  void StartDns(const std::string& cluster, const std::string& hostname);
  Task<void> ResolveDns(std::string cluster, std::string hostname, uint64_t generation);
  Task<void> TearDown();
  void CancelWatches();

  // Recomputes the config from what has arrived, updates the watches, and
  // reports a config if it is complete (or an error if LDS/RDS say so).
  void Update();
  // Tells the progress observer (not once shutting down).
  void ReportProgress();
  // Adds `name` and what it depends on to `config` (once per config
  // computation, see Expansion); `depth` counts the aggregate clusters
  // above it.
  const Expansion& Expand(const std::string& name, int depth, XdsConfig& config,
                          Expansions& expansions);
  // The non-aggregate cluster `name`: its endpoints (EDS or DNS).
  bool AddLeaf(const std::string& name, const std::shared_ptr<const ClusterResource>& cluster,
               const Status& cluster_ambient, XdsConfig& config, Expansions& expansions);
  std::string ResolutionNote(const Status& cluster_ambient, const Status& endpoint_ambient,
                             const Status& endpoint_note = Status()) const;
  void Report(StatusOr<std::shared_ptr<const XdsConfig>> config);

  XdsClient& client_;
  const std::string listener_name_;
  const std::string authority_;
  Watcher watcher_;
  std::function<void()> progress_;
  HostResolver resolver_;
  const std::chrono::milliseconds min_time_between_resolutions_;
  // The LOGICAL_DNS lookups (ResolveDns), which use the manager.
  TaskGroup dns_tasks_;
  ShutdownOnce shutdown_;

  WatchState<ListenerResource> listener_;
  std::string route_config_name_;  // the RDS name watched, empty when inlined
  std::map<std::string, WatchState<RouteConfigResource>, std::less<>> route_configs_;
  std::map<std::string, WatchState<ClusterResource>, std::less<>> clusters_;
  std::map<std::string, WatchState<EndpointResource>, std::less<>> endpoints_;
  std::map<std::string, DnsState, std::less<>> dns_;
  // What the last published config used: watched until a new one is out.
  std::set<std::string> published_clusters_;
  std::set<std::string> published_endpoints_;
  std::set<std::string> published_dns_;
  uint64_t expansion_count_ = 0;
  uint64_t last_expansion_count_ = 0;
  uint64_t dns_lookups_ = 0;
};

}  // namespace uxds
