// Channel (include/uxds/client_channel.h): the XdsDependencyManager's
// configs feed one ClusterLoadBalancer per cluster the routes name; each
// call is routed, hashed, picked and run on the picked endpoint's
// connection, all on the control loop.
#include "uxds/client_channel.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "client/client_stream_impl.h"
#include "client/xds_dependency_manager.h"
#include "http2/client_connection.h"
#include "lb/cluster_load_balancer.h"
#include "lb/lb_policy.h"
#include "lb/priority_names.h"
#include "runtime/host_resolver.h"
#include "runtime/shutdown_once.h"
#include "xds/client/xds_client_impl.h"
#include "xds/lrs/load_reporting_client.h"
#include "xds/routing/route_selection.h"

namespace uxds {

namespace {

struct ParsedTarget {
  bool xds = false;
  std::string authority;  // xds: the URI's authority ("" for xds:///name)
  std::string name;       // xds: the path without '/'; else "host:port"
};

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

// "host:port" / "[v6]:port" into host and port.
std::pair<std::string, std::string> SplitHostPort(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, host_port.substr(colon + 1)};
}

// One resource set a cluster's tree is built from: a cluster (or an
// aggregate cluster's leaf) with its Cluster and endpoints (null: none).
struct ClusterSource {
  std::string name;
  std::shared_ptr<const ClusterResource> cluster;
  std::shared_ptr<const EndpointResource> endpoints;
};

// The XdsClient hands out the same object while a resource is unchanged;
// an equal one sent again compares equal too (deep operator==, so an
// identical update rebuilds nothing).
template <typename T>
bool SameResource(const std::shared_ptr<const T>& a, const std::shared_ptr<const T>& b) {
  return a == b || (a != nullptr && b != nullptr && *a == *b);
}

bool operator==(const ClusterSource& a, const ClusterSource& b) {
  return a.name == b.name && SameResource(a.cluster, b.cluster) &&
         SameResource(a.endpoints, b.endpoints);
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

struct Channel::Impl {
  Impl(Loop& loop, ChannelOptions options)
      : loop(loop), options(std::move(options)), tasks(loop), shutdown(loop) {}

  // One cluster a route names, with its LB tree (none if the cluster has an
  // error: `error` then fails its calls).
  struct ClusterState {
    std::unique_ptr<ClusterLoadBalancer> lb;
    Status error;
    std::string note;
    // The resources `lb` was last updated with: a config that brings the
    // same ones leaves the tree alone.
    std::vector<ClusterSource> sources;
    // A37: the names of each leaf cluster's priorities (the cluster's own
    // for an EDS or LOGICAL_DNS cluster), kept across updates.
    std::map<std::string, PriorityNames, std::less<>> priority_names;
  };

  Loop& loop;
  const ChannelOptions options;
  ParsedTarget target;
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
                                                 const ClusterResource& cluster) {
    if (!cluster.lrs_server.has_value() || xds_client == nullptr) return nullptr;
    // gRPC reports the EDS service name only when the Cluster sets one.
    const auto* eds = std::get_if<ClusterResource::Eds>(&cluster.type);
    LoadReportingClient* load_reporting =
        xds_internal::ImplOf(*xds_client).load_reporting(options.load_reporting);
    if (load_reporting == nullptr) return nullptr;  // the client is shutting down
    return load_reporting->AddCluster(*cluster.lrs_server, name,
                                      eds != nullptr ? eds->eds_service_name : "");
  }

  void WakeWaiters() {
    for (Event* waiter : std::exchange(waiters, {})) waiter->Set();
  }

  LbPolicyOptions LbOptions() const {
    LbPolicyOptions lb;
    lb.ring_sizes.ring_size_cap = options.ring_size_cap;
    lb.priority_failover_timeout = options.priority_failover_timeout;
    // A37: pick_first of a LOGICAL_DNS cluster asks for a new DNS answer.
    lb.request_reresolution = [this] {
      if (dependencies != nullptr) dependencies->RequestReresolution();
    };
    return lb;
  }

  ClusterState& EnsureCluster(const std::string& name) {
    ClusterState& state = clusters[name];
    if (state.lb == nullptr) {
      state.lb = std::make_unique<ClusterLoadBalancer>(loop, subchannels, LbOptions());
      state.lb->SetStateObserver([this](ConnectivityState, const Status&) { WakeWaiters(); });
    }
    state.error = Status();
    return state;
  }

  void OnConfig(StatusOr<std::shared_ptr<const XdsConfig>> update) {
    if (!update.ok()) {
      // A74: the Listener or its routes cannot be used: neither can the
      // previous config.
      config = nullptr;
      config_error = Status(StatusCode::kUnavailable, update.status().message());
      config_failed = true;
      clusters.clear();
      WakeWaiters();
      return;
    }
    config = *std::move(update);
    config_failed = false;
    const std::vector<std::string> named = routing::ClustersNamedBy(*config->virtual_host);
    const std::set<std::string> used(named.begin(), named.end());
    for (const std::string& name : used) UpdateCluster(name);
    std::erase_if(clusters, [&](const auto& entry) { return !used.contains(entry.first); });
    WakeWaiters();
  }

  void UpdateCluster(const std::string& name) {
    auto it = config->clusters.find(name);
    if (it == config->clusters.end()) return;
    if (!it->second.ok()) {
      ClusterState& state = clusters[name];
      state.lb.reset();
      state.sources.clear();
      state.error = Status(StatusCode::kUnavailable, it->second.status().message());
      return;
    }
    const XdsConfig::ClusterConfig& cluster = *it->second;
    // A config usually changes one resource: a cluster whose Cluster and
    // endpoints (and, for an aggregate cluster, its leaves') are the ones
    // its tree has keeps its tree and picker; only its note may change.
    std::vector<ClusterSource> sources = SourcesOf(name, cluster);
    if (auto found = clusters.find(name); found != clusters.end() && found->second.lb != nullptr &&
                                          found->second.sources == sources) {
      found->second.note = NoteOf(cluster);
      return;
    }
    ClusterState& state = EnsureCluster(name);
    state.sources = std::move(sources);
    std::map<std::string, PriorityNames, std::less<>> names = std::move(state.priority_names);
    state.priority_names.clear();
    // The names of `leaf`'s priorities, and their kind (A37: pick_first for
    // a LOGICAL_DNS cluster).
    auto name_priorities = [&](const std::string& leaf, const ClusterResource& leaf_cluster,
                               const EndpointResource& endpoints,
                               std::vector<PriorityChildConfig>& children) {
      auto found = names.find(leaf);
      PriorityNames& leaf_names =
          state.priority_names
              .emplace(leaf, found != names.end() ? std::move(found->second) : PriorityNames(leaf))
              .first->second;
      const bool pick_first =
          std::holds_alternative<ClusterResource::LogicalDns>(leaf_cluster.type);
      for (std::string& child : leaf_names.Assign(endpoints)) {
        children.push_back(PriorityChildConfig{std::move(child), pick_first});
      }
    };
    if (const auto* endpoint_config =
            std::get_if<XdsConfig::ClusterConfig::EndpointConfig>(&cluster.children)) {
      state.note = endpoint_config->resolution_note;
      // A reference, not a copy (the conditional must not make a temporary).
      static const EndpointResource kNoEndpoints;
      const EndpointResource& endpoints =
          endpoint_config->endpoints != nullptr ? *endpoint_config->endpoints : kNoEndpoints;
      std::vector<PriorityChildConfig> children;
      name_priorities(name, *cluster.cluster, endpoints, children);
      state.lb->Update(*cluster.cluster, endpoints,
                       ClusterImplConfigFor(name, *cluster.cluster, endpoints.drop_overloads), {},
                       std::move(children));
      return;
    }
    // A37: an aggregate cluster is one priority list: each leaf's
    // priorities in order, under the aggregate cluster's LB policy. Each
    // priority keeps its leaf's cluster_impl: the leaf's drop_overloads,
    // its max_requests on the counter every user of the leaf shares, and
    // its own load report; and its name, so a leaf without endpoints moves
    // no other leaf's priority onto another child.
    const auto& aggregate = std::get<XdsConfig::ClusterConfig::AggregateConfig>(cluster.children);
    EndpointResource combined;
    std::vector<std::shared_ptr<const ClusterImplConfig>> by_priority;
    std::vector<PriorityChildConfig> children;
    for (const std::string& leaf : aggregate.leaf_clusters) {
      auto leaf_it = config->clusters.find(leaf);
      if (leaf_it == config->clusters.end() || !leaf_it->second.ok()) continue;
      const auto* leaf_endpoints =
          std::get_if<XdsConfig::ClusterConfig::EndpointConfig>(&leaf_it->second->children);
      if (leaf_endpoints == nullptr || leaf_endpoints->endpoints == nullptr) continue;
      std::shared_ptr<const ClusterImplConfig> leaf_config = ClusterImplConfigFor(
          leaf, *leaf_it->second->cluster, leaf_endpoints->endpoints->drop_overloads);
      name_priorities(leaf, *leaf_it->second->cluster, *leaf_endpoints->endpoints, children);
      for (const auto& priority : leaf_endpoints->endpoints->priorities) {
        combined.priorities.push_back(priority);
        by_priority.push_back(leaf_config);
      }
    }
    state.note = NoteOf(cluster);
    // The aggregate cluster's own config applies only while no leaf has a
    // priority (every pick then fails anyway): no drops, no load report.
    state.lb->Update(*cluster.cluster, combined, ClusterImplConfigFor(name, *cluster.cluster, {}),
                     std::move(by_priority), std::move(children));
  }

  // The resolution note a cluster's failed picks carry: its own, or every
  // leaf's of an aggregate cluster (the one that explains a failure may be
  // any), each once, joined with "; ".
  std::string NoteOf(const XdsConfig::ClusterConfig& cluster) const {
    if (const auto* endpoint_config =
            std::get_if<XdsConfig::ClusterConfig::EndpointConfig>(&cluster.children)) {
      return endpoint_config->resolution_note;
    }
    std::vector<std::string_view> notes;
    for (const std::string& leaf :
         std::get<XdsConfig::ClusterConfig::AggregateConfig>(cluster.children).leaf_clusters) {
      auto leaf_it = config->clusters.find(leaf);
      if (leaf_it == config->clusters.end() || !leaf_it->second.ok()) continue;
      const auto* leaf_endpoints =
          std::get_if<XdsConfig::ClusterConfig::EndpointConfig>(&leaf_it->second->children);
      if (leaf_endpoints == nullptr) continue;
      if (std::find(notes.begin(), notes.end(), leaf_endpoints->resolution_note) == notes.end()) {
        notes.push_back(leaf_endpoints->resolution_note);
      }
    }
    std::string joined;
    for (std::string_view note : notes) {
      if (!joined.empty()) joined += "; ";
      joined += note;
    }
    return joined;
  }

  // What UpdateCluster() builds cluster `name`'s tree from: the cluster,
  // then (aggregate, A37) each leaf in order, with what it has of each.
  std::vector<ClusterSource> SourcesOf(const std::string& name,
                                       const XdsConfig::ClusterConfig& cluster) const {
    std::vector<ClusterSource> sources;
    if (const auto* endpoint_config =
            std::get_if<XdsConfig::ClusterConfig::EndpointConfig>(&cluster.children)) {
      sources.push_back(ClusterSource{name, cluster.cluster, endpoint_config->endpoints});
      return sources;
    }
    sources.push_back(ClusterSource{name, cluster.cluster, nullptr});
    for (const std::string& leaf :
         std::get<XdsConfig::ClusterConfig::AggregateConfig>(cluster.children).leaf_clusters) {
      ClusterSource& source = sources.emplace_back(ClusterSource{leaf, nullptr, nullptr});
      auto leaf_it = config->clusters.find(leaf);
      if (leaf_it == config->clusters.end() || !leaf_it->second.ok()) continue;
      const auto* leaf_endpoints =
          std::get_if<XdsConfig::ClusterConfig::EndpointConfig>(&leaf_it->second->children);
      if (leaf_endpoints == nullptr) continue;
      source.cluster = leaf_it->second->cluster;
      source.endpoints = leaf_endpoints->endpoints;
    }
    return sources;
  }

  // The cluster_impl config of cluster `name`: its drops, its max_requests
  // (A32), the call counter shared by every user of the cluster (A37) and
  // its load report (A42; an aggregate cluster's own lrs_server is not
  // used, as in gRPC).
  std::shared_ptr<const ClusterImplConfig> ClusterImplConfigFor(
      const std::string& name, const ClusterResource& cluster,
      std::vector<EndpointResource::DropCategory> drops) {
    auto impl = std::make_shared<ClusterImplConfig>();
    impl->drops = std::move(drops);
    impl->max_requests = cluster.max_concurrent_requests;
    const auto* eds = std::get_if<ClusterResource::Eds>(&cluster.type);
    impl->counter =
        SharedCallCounter(xds_client.get(), name, eds != nullptr ? eds->eds_service_name : "");
    if (!std::holds_alternative<ClusterResource::Aggregate>(cluster.type)) {
      impl->load = LoadStatsFor(name, cluster);
    }
    return impl;
  }

  // Waits for the next config or picker change, or the deadline: false once
  // the deadline has passed. At once once the channel is shutting down (the
  // caller then finds it so).
  Task<bool> WaitForChange(std::optional<Loop::Clock::time_point> deadline) {
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

  // Where a pick sent a call: the endpoint's connection (READY now), its
  // address, and the call's A32 count to end with the call. The call owns
  // its subchannel and counter, as a gRPC call holds its connected
  // subchannel: an update that drops the endpoint or its cluster while the
  // call runs must not end the call.
  struct PickedEndpoint {
    http2::ClientConnection* connection = nullptr;
    std::string peer;
    std::shared_ptr<SubchannelPool> pool;  // outlives `subchannel`
    SubchannelRef subchannel;
    // What CallFinished() reports when the call ends; `counter` and
    // `locality_stats` keep what it points to alive.
    PickResult call_end;
    std::shared_ptr<CallCounter> counter;
    std::shared_ptr<LocalityLoadStats> locality_stats;
  };
  // A call's routing, chosen once per call (see PickForCall).
  struct CallRoute {
    std::shared_ptr<const XdsConfig> config;  // the config it was chosen in
    std::string cluster;
    uint64_t hash = 0;
  };
  // `route` is the call's routing: chosen by its first pick, reused by every
  // later one (a queued pick's, and A6's transparent retries').
  Task<StatusOr<PickedEndpoint>> PickForCall(const std::string& method, const CallOptions& options,
                                             std::optional<Loop::Clock::time_point> deadline,
                                             std::optional<CallRoute>& route);
  // The route (A28), its cluster (weighted_clusters drawn here) and the
  // request hash (A42: from the route's hash policies, else random).
  StatusOr<CallRoute> ChooseRoute(const std::string& method, const routing::RpcView& rpc) const {
    CallRoute route;
    route.config = config;
    route.hash = ThreadRandom();
    if (!direct_cluster.empty()) {
      route.cluster = direct_cluster;
      return route;
    }
    const RouteConfigResource::Route* selected =
        routing::SelectRoute(*config->virtual_host, rpc, [] { return ThreadRandom(); });
    if (selected == nullptr) return UnavailableError("no matching route found for " + method);
    const auto* action = std::get_if<RouteConfigResource::Route::RouteAction>(&selected->action);
    if (action == nullptr) {
      return UnavailableError("matched route does not have a forwarding action");
    }
    if (const auto* one =
            std::get_if<RouteConfigResource::Route::RouteAction::ClusterName>(&action->cluster)) {
      route.cluster = one->name;
    } else {
      route.cluster = std::string(routing::PickWeightedCluster(
          std::get<RouteConfigResource::Route::RouteAction::WeightedClusters>(action->cluster),
          ThreadRandom()));
    }
    if (std::optional<uint64_t> computed =
            routing::ComputeRequestHash(action->hash_policies, rpc, channel_id)) {
      route.hash = *computed;
    }
    return route;
  }

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

  Task<void> ResolveDirect() {
    auto [host, port] = SplitHostPort(target.name);
    StatusOr<std::vector<SocketAddress>> addresses = co_await resolver->Resolve(host, port);
    if (shutdown.started()) co_return;
    if (!addresses.ok()) {
      config_error = Status(StatusCode::kUnavailable, addresses.status().message());
      config_failed = true;
      WakeWaiters();
      co_return;
    }
    ClusterResource cluster;
    EndpointResource endpoints;
    EndpointResource::Locality locality;
    locality.weight = 1;
    for (const SocketAddress& address : *addresses) {
      EndpointResource::Endpoint endpoint;
      endpoint.addresses.push_back(address.ToString());
      locality.endpoints.push_back(std::move(endpoint));
    }
    endpoints.priorities.emplace_back().localities.push_back(std::move(locality));
    ClusterState& state = EnsureCluster(direct_cluster);
    state.note = "resolved " + target.name;
    state.lb->Update(cluster, endpoints);
    WakeWaiters();
  }
};

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
    impl->resolver = std::make_unique<HostResolver>(loop);
    impl->tasks.Spawn(impl->ResolveDirect());
  }
  return std::unique_ptr<Channel>(new Channel(std::move(impl)));
}

Channel::Channel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Channel::~Channel() = default;

Task<void> Channel::Shutdown() {
  // Nothing of the channel is read once the teardown has ended: the first
  // caller to return may destroy it under the others.
  Impl* impl = impl_.get();
  co_await impl->shutdown.Run([impl] { return impl->TearDown(); });
}

Task<void> Channel::Impl::TearDown() {
  co_await tasks.CancelAndJoin();
  if (dependencies != nullptr) co_await dependencies->Shutdown();
  dependencies.reset();
  clusters.clear();
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

// Routes, hashes and picks one call (unary or streaming alike): the
// connection of the endpoint it goes to, waiting within the deadline for a
// config or an endpoint where gRPC queues the pick.
Task<StatusOr<Channel::Impl::PickedEndpoint>> Channel::Impl::PickForCall(
    const std::string& method, const CallOptions& options,
    std::optional<Loop::Clock::time_point> deadline, std::optional<CallRoute>& route) {
  std::vector<PickHeader> headers;
  for (const auto& [name, value] : options.metadata) headers.push_back({name, value});
  const routing::RpcView rpc{method, headers};
  // Why the call could not go anywhere yet: the deadline's message says it.
  Status last_failure;
  auto deadline_error = [&](std::string what) {
    if (!last_failure.ok()) what += "; last error: " + std::string(last_failure.message());
    return DeadlineExceededError(std::move(what));
  };
  auto wait_or_fail = [&](Status failure) -> Task<std::optional<Status>> {
    // gRPC: without wait_for_ready a call with nothing to go to fails.
    if (!options.wait_for_ready) co_return failure;
    last_failure = failure;
    const bool in_time = co_await WaitForChange(deadline);
    if (!in_time) co_return deadline_error("deadline exceeded waiting for " + method);
    co_return std::nullopt;
  };
  // A42: "the call's hash will be the same when it is re-attempted with a
  // new picker"; A76: the config selector assigns it once. The route and
  // the weighted cluster are chosen once too: re-picks of a queued call
  // reuse them.
  while (true) {
    if (shutdown.started()) co_return UnavailableError("channel shut down");
    if (route.has_value() && route->config != config && !clusters.contains(route->cluster)) {
      // A new config no longer has the call's cluster: the call is routed
      // by the new one (gRPC keeps the old cluster alive for it instead).
      route.reset();
    }
    if (!route.has_value()) {
      if (direct_cluster.empty() && config == nullptr) {
        if (config_failed) {
          std::optional<Status> failed = co_await wait_or_fail(config_error);
          if (failed.has_value()) co_return *failed;
          continue;
        }
        // No config yet: every call waits for the first one (gRPC queues
        // them while the resolver has not returned).
        const bool in_time = co_await WaitForChange(deadline);
        if (!in_time) co_return DeadlineExceededError(WaitingForConfig());
        continue;
      }
      StatusOr<CallRoute> chosen = ChooseRoute(method, rpc);
      if (!chosen.ok()) co_return chosen.status();
      route = *std::move(chosen);
    }
    const std::string& cluster_name = route->cluster;
    auto cluster_it = clusters.find(cluster_name);
    if (cluster_it == clusters.end() && !direct_cluster.empty()) {
      if (config_failed) {  // the name did not resolve
        std::optional<Status> failed = co_await wait_or_fail(config_error);
        if (failed.has_value()) co_return *failed;
        continue;
      }
      // A host:port target still resolving: gRPC queues the call.
      last_failure = UnavailableError("resolving " + cluster_name);
      const bool in_time = co_await WaitForChange(deadline);
      if (!in_time) co_return deadline_error("deadline exceeded waiting for " + method);
      continue;
    }
    if (cluster_it == clusters.end() || cluster_it->second.lb == nullptr) {
      Status failure =
          cluster_it == clusters.end()
              ? UnavailableError("cluster " + cluster_name + " is not ready")
              : Status(StatusCode::kUnavailable,
                       "cluster " + cluster_name + ": " + cluster_it->second.error.message());
      std::optional<Status> failed = co_await wait_or_fail(failure);
      if (failed.has_value()) co_return *failed;
      continue;
    }
    ClusterState& cluster = cluster_it->second;
    PickArgs args;
    args.hash = route->hash;
    args.headers = headers;
    Subchannel* subchannel = nullptr;
    PickResult call_end;  // what CallFinished() reports when the call ends
    PickResult::Kind kind;
    Status pick_status;
    bool drop = false;
    {
      PickScope scope(cluster.lb->picker_slot());
      const PickResult picked = scope.Pick(args);
      kind = picked.kind;
      if (kind == PickResult::Kind::kComplete) {
        subchannel = picked.endpoint->subchannel;
        call_end = picked;
      } else if (kind == PickResult::Kind::kFail) {
        pick_status = *picked.status;
        drop = picked.drop;
      }
    }
    if (kind == PickResult::Kind::kFail) {
      // A88: failed calls carry the cluster's resolution note.
      Status failure(StatusCode::kUnavailable, pick_status.message() + " (" + cluster.note + ")");
      if (drop) co_return failure;
      std::optional<Status> failed = co_await wait_or_fail(failure);
      if (failed.has_value()) co_return *failed;
      continue;
    }
    http2::ClientConnection* connection =
        subchannel != nullptr ? subchannel->connection() : nullptr;
    if (kind == PickResult::Kind::kQueue || connection == nullptr) {
      CallNotStarted(call_end);
      const bool in_time = co_await WaitForChange(deadline);
      if (!in_time) {
        // The cluster's last failure (a connection error while it retries).
        auto now_it = clusters.find(cluster_name);
        if (now_it != clusters.end() && now_it->second.lb != nullptr &&
            !now_it->second.lb->status().ok()) {
          last_failure = now_it->second.lb->status();
        }
        co_return deadline_error("deadline exceeded while waiting for an endpoint of " +
                                 cluster_name);
      }
      continue;
    }
    PickedEndpoint picked;
    picked.connection = connection;
    picked.peer = subchannel->address();
    picked.pool = subchannels;
    picked.subchannel = SubchannelRef(subchannel);
    picked.call_end = call_end;
    if (call_end.call_counter != nullptr) {
      picked.counter = call_end.call_counter->shared_from_this();
    }
    if (call_end.locality_stats != nullptr) {
      picked.locality_stats = call_end.locality_stats->shared_from_this();
    }
    co_return picked;
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
  const http2::Metadata metadata(options.metadata.begin(), options.metadata.end());
  std::optional<Impl::CallRoute> route;  // A6: a retry keeps the call's route
  int refused_retries = 0;
  Status failure;
  while (true) {
    StatusOr<Impl::PickedEndpoint> picked =
        co_await impl_->PickForCall(method, options, deadline, route);
    if (!picked.ok()) {
      failure = picked.status();
      break;
    }
    // The request stays here: a refused attempt is replayed from it.
    http2::ClientCall::Delivery delivery = http2::ClientCall::Delivery::kMaybeProcessed;
    StatusOr<std::string> response = co_await http2::UnaryCall(*picked->connection, method, request,
                                                               metadata, deadline, &delivery);
    if (response.ok()) {
      CallFinished(picked->call_end, true);
      co_return UnaryResponse{*std::move(response), std::move(picked->peer)};
    }
    if (RetryTransparently(delivery, refused_retries, deadline)) {
      // The attempt reached no backend's application: no call to count.
      CallNotStarted(picked->call_end);
      continue;
    }
    CallFinished(picked->call_end, false);
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
  const http2::Metadata metadata(options.metadata.begin(), options.metadata.end());
  std::optional<Impl::CallRoute> route;  // A6: a retry keeps the call's route
  int refused_retries = 0;
  while (true) {
    StatusOr<Impl::PickedEndpoint> picked =
        co_await impl_->PickForCall(method, options, deadline, route);
    if (!picked.ok()) {
      co_await impl_->loop.Yield();  // as UnaryCall's failures
      co_return picked.status();
    }
    std::unique_ptr<http2::ClientCall> call =
        picked->connection->StartCall(method, metadata, deadline);
    // A6: a stream that could not start on the picked connection is picked
    // again. Once returned, the stream's messages are the application's to
    // send, and a refused stream fails UNAVAILABLE (not replayed).
    if (call->finished() && RetryTransparently(call->delivery(), refused_retries, deadline)) {
      CallNotStarted(picked->call_end);
      continue;
    }
    auto impl = std::make_unique<ClientStream::Impl>();
    impl->pool = std::move(picked->pool);
    impl->subchannel = std::move(picked->subchannel);
    impl->call_end = picked->call_end;
    impl->counter = std::move(picked->counter);
    impl->locality_stats = std::move(picked->locality_stats);
    impl->peer = std::move(picked->peer);
    impl->call = std::move(call);
    co_return std::make_unique<ClientStream>(std::move(impl));
  }
}

}  // namespace uxds
