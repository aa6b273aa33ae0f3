#include "client/xds_dependency_manager.h"

#include "xds/routing/route_selection.h"

#include <algorithm>
#include <type_traits>
#include <utility>

namespace uxds {

EndpointResource EndpointsOfAddresses(const std::vector<SocketAddress>& addresses) {
  EndpointResource endpoints;
  EndpointResource::Locality locality;
  locality.weight = 1;
  for (const SocketAddress& address : addresses) {
    EndpointResource::Endpoint endpoint;
    endpoint.addresses.push_back(address.ToString());
    locality.endpoints.push_back(std::move(endpoint));
  }
  endpoints.priorities.emplace_back().localities.push_back(std::move(locality));
  return endpoints;
}

// Forwards one watch's callbacks to the manager. The XdsClient guarantees no
// callback after CancelWatch(), which the manager calls before it goes.
template <typename T>
class XdsDependencyManager::ResourceWatcher final : public XdsResourceWatcher<T> {
 public:
  ResourceWatcher(XdsDependencyManager& manager, std::string name)
      : manager_(manager), name_(std::move(name)) {}
  void OnResourceChanged(StatusOr<std::shared_ptr<const T>> resource) override {
    manager_.OnResource<T>(name_, std::move(resource));
  }
  void OnAmbientError(Status status) override { manager_.OnAmbient<T>(name_, std::move(status)); }

 private:
  XdsDependencyManager& manager_;
  const std::string name_;
};

namespace {

// "type name": the resource named in errors, as gRPC names it.
std::string Named(std::string_view type, std::string_view name) {
  return std::string(type) + " " + std::string(name);
}

Status WithContext(const Status& status, std::string_view context) {
  return Status(status.code(), std::string(context) + ": " + status.message());
}

// A27: localities without a weight take no traffic. When that leaves a
// cluster without endpoints, the failing picks should say so rather than
// only "no endpoints": their names go in the note (the first few).
Status IgnoredLocalities(std::string_view service, const EndpointResource& endpoints) {
  const std::vector<LocalityName>& ignored = endpoints.localities_without_weight;
  if (ignored.empty()) return Status();
  constexpr size_t kNamed = 3;
  std::string text = Named("EDS resource", service) + ": " + std::to_string(ignored.size()) +
                     (ignored.size() == 1 ? " locality" : " localities") +
                     " without load_balancing_weight ignored: ";
  for (size_t i = 0; i < ignored.size() && i < kNamed; ++i) {
    if (i > 0) text += ", ";
    text += ignored[i].ToString();
  }
  if (ignored.size() > kNamed) text += ", ...";
  return Status(StatusCode::kUnavailable, std::move(text));
}

}  // namespace

XdsDependencyManager::XdsDependencyManager(XdsClient& client, std::string listener_name,
                                           std::string authority, Watcher watcher,
                                           HostResolver::Lookup lookup,
                                           std::chrono::milliseconds min_time_between_resolutions)
    : client_(client),
      listener_name_(std::move(listener_name)),
      authority_(std::move(authority)),
      watcher_(std::move(watcher)),
      resolver_(client.loop(), std::move(lookup)),
      min_time_between_resolutions_(min_time_between_resolutions),
      dns_tasks_(client.loop()),
      shutdown_(client.loop()) {
  listener_.watcher = std::make_shared<ResourceWatcher<ListenerResource>>(*this, listener_name_);
  client_.WatchResource(ListenerResourceType::Get(), listener_name_, listener_.watcher);
}

XdsDependencyManager::~XdsDependencyManager() { CancelWatches(); }

void XdsDependencyManager::CancelWatches() {
  if (listener_.watcher != nullptr) {
    client_.CancelWatch(ListenerResourceType::Get(), listener_name_, listener_.watcher.get());
    listener_.watcher.reset();
  }
  for (auto& [name, state] : route_configs_) {
    client_.CancelWatch(RouteConfigResourceType::Get(), name, state.watcher.get());
  }
  for (auto& [name, state] : clusters_) {
    client_.CancelWatch(ClusterResourceType::Get(), name, state.watcher.get());
  }
  for (auto& [name, state] : endpoints_) {
    client_.CancelWatch(EndpointResourceType::Get(), name, state.watcher.get());
  }
  route_configs_.clear();
  clusters_.clear();
  endpoints_.clear();
}

Task<void> XdsDependencyManager::Shutdown() {
  co_await shutdown_.Run([this] { return TearDown(); });
}

Task<void> XdsDependencyManager::TearDown() {
  CancelWatches();
  for (auto& [cluster, dns] : dns_) dns.deferred.reset();
  co_await dns_tasks_.CancelAndJoin();
}

template <typename T>
XdsDependencyManager::WatchState<T>& XdsDependencyManager::Watch(
    std::map<std::string, WatchState<T>, std::less<>>& watches, const XdsResourceTypeImpl<T>& type,
    const std::string& name) {
  auto [it, added] = watches.try_emplace(name);
  if (added) {
    it->second.watcher = std::make_shared<ResourceWatcher<T>>(*this, name);
    client_.WatchResource(type, name, it->second.watcher);
  }
  return it->second;
}

template <typename T>
XdsDependencyManager::WatchState<T>* XdsDependencyManager::StateFor(const std::string& name) {
  auto find = [&name](auto& watches) -> WatchState<T>* {
    auto it = watches.find(name);
    return it == watches.end() ? nullptr : &it->second;
  };
  if constexpr (std::is_same_v<T, ListenerResource>) {
    return &listener_;
  } else if constexpr (std::is_same_v<T, RouteConfigResource>) {
    return find(route_configs_);
  } else if constexpr (std::is_same_v<T, ClusterResource>) {
    return find(clusters_);
  } else {
    return find(endpoints_);
  }
}

template <typename T>
void XdsDependencyManager::OnResource(const std::string& name,
                                      StatusOr<std::shared_ptr<const T>> resource) {
  WatchState<T>* state = StateFor<T>(name);
  if (state == nullptr) return;
  // A88: a new resource clears the ambient error; a data error replaces the
  // resource (the XdsClient has dropped it too).
  state->update = std::move(resource);
  state->ambient = Status();
  Update();
  ReportProgress();
}

void XdsDependencyManager::ReportProgress() {
  if (!shutdown_.started() && progress_) progress_();
}

template <typename T>
void XdsDependencyManager::OnAmbient(const std::string& name, Status status) {
  WatchState<T>* state = StateFor<T>(name);
  if (state == nullptr) return;
  state->ambient = std::move(status);
  // The notes change; the resources do not.
  Update();
}

void XdsDependencyManager::RequestReresolution() {
  if (shutdown_.started()) return;
  // A37: only LOGICAL_DNS clusters re-resolve (EDS ignores the request).
  const Loop::Clock::time_point now = Loop::Clock::now();
  for (auto& [cluster, dns] : dns_) {
    if (dns.resolving || (dns.deferred != nullptr && dns.deferred->pending())) continue;
    const auto next = dns.last_start + min_time_between_resolutions_;
    if (now >= next) {
      StartDns(cluster, dns.hostname);
      continue;
    }
    if (dns.deferred == nullptr) dns.deferred = std::make_unique<Timer>(client_.loop());
    dns.deferred->Start(next - now, [this, name = cluster] {
      auto it = dns_.find(name);
      if (it != dns_.end() && !it->second.resolving) StartDns(name, it->second.hostname);
    });
  }
}

void XdsDependencyManager::StartDns(const std::string& cluster, const std::string& hostname) {
  if (shutdown_.started()) return;
  DnsState& dns = dns_[cluster];
  dns.hostname = hostname;
  const uint64_t generation = ++dns.generation;
  dns.resolving = true;
  dns.last_start = Loop::Clock::now();
  if (dns.deferred != nullptr) dns.deferred->Cancel();
  ++dns_lookups_;
  dns_tasks_.Spawn(ResolveDns(cluster, hostname, generation));
}

Task<void> XdsDependencyManager::ResolveDns(std::string cluster, std::string hostname,
                                            uint64_t generation) {
  // "host:port"; IPv6 literals in brackets.
  std::string host = hostname;
  std::string port;
  if (const size_t colon = hostname.rfind(':');
      colon != std::string::npos && hostname.find(']', colon) == std::string::npos) {
    host = hostname.substr(0, colon);
    port = hostname.substr(colon + 1);
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  StatusOr<std::vector<SocketAddress>> addresses = co_await resolver_.Resolve(host, port);
  if (shutdown_.started()) co_return;
  auto it = dns_.find(cluster);
  if (it == dns_.end() || it->second.generation != generation) co_return;
  it->second.resolving = false;
  if (!addresses.ok()) {
    // A37: the cluster has no endpoints; the note says why.
    it->second.update = Status(StatusCode::kUnavailable, "DNS resolution failed for " + hostname +
                                                             ": " + addresses.status().message());
  } else {
    // A37: a LOGICAL_DNS cluster is one priority of one locality whose
    // endpoints are the name's addresses, in the resolver's order, which
    // pick_first tries in turn. (A61 puts them in one endpoint for a
    // per-endpoint pick_first; uxds's policies connect to an endpoint's
    // first address only, so each address is an endpoint here.)
    it->second.update = std::make_shared<const EndpointResource>(EndpointsOfAddresses(*addresses));
  }
  Update();
  ReportProgress();
}

std::string XdsDependencyManager::ResolutionNote(const Status& cluster_ambient,
                                                 const Status& endpoint_ambient,
                                                 const Status& endpoint_note) const {
  // A88: the ambient errors of the Listener and RouteConfiguration (for
  // every cluster) and of this cluster's own Cluster and endpoints.
  std::string note;
  auto add = [&note](const Status& status) {
    if (status.ok()) return;
    if (!note.empty()) note += "; ";
    note += status.message();
  };
  add(listener_.ambient);
  if (auto it = route_configs_.find(route_config_name_); it != route_configs_.end()) {
    add(it->second.ambient);
  }
  add(cluster_ambient);
  add(endpoint_ambient);
  add(endpoint_note);
  if (note.empty()) note = "xDS node ID:" + client_.bootstrap().node.id;
  return note;
}

const XdsDependencyManager::Expansion& XdsDependencyManager::Expand(const std::string& name,
                                                                    int depth, XdsConfig& config,
                                                                    Expansions& expansions) {
  const int budget = kMaxAggregateDepth - depth;
  if (auto it = expansions.done.find(name); it != expansions.done.end()) {
    const Expansion& seen = it->second;
    if (seen.too_deep.ok() || seen.budget >= budget) return seen;
    // Too deep where it was first met, but met higher up now: again.
  }
  ++expansion_count_;
  expansions.clusters.insert(name);
  Expansion result;
  result.budget = budget;
  auto done = [&]() -> const Expansion& {
    return expansions.done.insert_or_assign(name, std::move(result)).first->second;
  };
  WatchState<ClusterResource>& state = Watch(clusters_, ClusterResourceType::Get(), name);
  if (!state.update.has_value()) return done();
  result.complete = true;
  if (!state.update->ok()) {
    // A74: a cluster that does not exist is left out of its parents' leaves.
    config.clusters.insert_or_assign(
        name, WithContext(state.update->status(), Named("CDS resource", name)));
    return done();
  }
  const std::shared_ptr<const ClusterResource> cluster = **state.update;
  const auto* aggregate = std::get_if<ClusterResource::Aggregate>(&cluster->type);
  if (aggregate == nullptr) {
    result.complete = AddLeaf(name, cluster, state.ambient, config, expansions);
    result.leaves.push_back(name);
    return done();
  }
  // A37: the tree of aggregate clusters is at most 16 deep; deeper, the
  // cluster (and every aggregate cluster above it, up to the one a route
  // names) is in TRANSIENT_FAILURE.
  if (budget <= 0) {
    result.height = 1;
    result.too_deep =
        Status(StatusCode::kUnavailable, "aggregate cluster graph exceeds max depth (" +
                                             std::to_string(kMaxAggregateDepth) + ") at " + name);
    config.clusters.insert_or_assign(name, result.too_deep);
    return done();
  }
  std::set<std::string> seen_leaves;
  expansions.path.push_back(name);
  for (const std::string& child : aggregate->prioritized_cluster_names) {
    // A37: a cluster that is its own ancestor would recurse forever.
    if (std::find(expansions.path.begin(), expansions.path.end(), child) != expansions.path.end()) {
      continue;
    }
    const Expansion& sub = Expand(child, depth + 1, config, expansions);
    result.complete &= sub.complete;
    result.height = std::max(result.height, sub.height + 1);
    if (!sub.too_deep.ok() && result.too_deep.ok()) result.too_deep = sub.too_deep;
    // A37: each leaf once, at its first position.
    for (const std::string& leaf : sub.leaves) {
      if (seen_leaves.insert(leaf).second) result.leaves.push_back(leaf);
    }
  }
  expansions.path.pop_back();
  // Met before at a shallower depth: its own graph may fit, this path not.
  if (result.too_deep.ok() && result.height > budget) {
    result.too_deep = Status(StatusCode::kUnavailable,
                             "aggregate cluster graph exceeds max depth (" +
                                 std::to_string(kMaxAggregateDepth) + ") below " + name);
  }
  if (!result.too_deep.ok()) {
    config.clusters.insert_or_assign(name, result.too_deep);
  } else if (result.complete && result.leaves.empty()) {
    // A37 (as gRPC): nothing to send calls to, and the status says why.
    config.clusters.insert_or_assign(
        name, Status(StatusCode::kUnavailable,
                     "aggregate cluster dependency graph for " + name + " has no leaf clusters"));
  } else if (result.complete) {
    config.clusters.insert_or_assign(
        name, XdsConfig::ClusterConfig{cluster,
                                       XdsConfig::ClusterConfig::AggregateConfig{result.leaves}});
  }
  return done();
}

bool XdsDependencyManager::AddLeaf(const std::string& name,
                                   const std::shared_ptr<const ClusterResource>& cluster,
                                   const Status& cluster_ambient, XdsConfig& config,
                                   Expansions& expansions) {
  XdsConfig::ClusterConfig::EndpointConfig endpoint_config;
  Status endpoint_ambient;
  Status endpoint_note;
  if (const auto* eds = std::get_if<ClusterResource::Eds>(&cluster->type)) {
    const std::string service = eds->eds_service_name.empty() ? name : eds->eds_service_name;
    expansions.endpoint_names.insert(service);
    WatchState<EndpointResource>& endpoints =
        Watch(endpoints_, EndpointResourceType::Get(), service);
    if (!endpoints.update.has_value()) return false;
    endpoint_ambient = endpoints.ambient;
    if (endpoints.update->ok()) {
      endpoint_config.endpoints = **endpoints.update;
      endpoint_note = IgnoredLocalities(service, *endpoint_config.endpoints);
    } else {
      endpoint_ambient = WithContext(endpoints.update->status(), Named("EDS resource", service));
    }
  } else {
    const auto& dns = std::get<ClusterResource::LogicalDns>(cluster->type);
    expansions.dns_clusters.insert(name);
    auto it = dns_.find(name);
    if (it == dns_.end() || it->second.hostname != dns.hostname) {
      StartDns(name, dns.hostname);
      return false;
    }
    if (!it->second.update.has_value()) return false;
    if (it->second.update->ok()) {
      endpoint_config.endpoints = **it->second.update;
    } else {
      endpoint_ambient = it->second.update->status();
    }
  }
  endpoint_config.resolution_note =
      ResolutionNote(cluster_ambient, endpoint_ambient, endpoint_note);
  config.clusters.insert_or_assign(name,
                                   XdsConfig::ClusterConfig{cluster, std::move(endpoint_config)});
  return true;
}

std::string XdsDependencyManager::WaitingFor() const {
  constexpr size_t kNamed = 3;
  std::vector<std::string> missing;
  if (!listener_.update.has_value()) missing.push_back(Named("LDS resource", listener_name_));
  auto add = [&missing](const auto& watches, std::string_view kind) {
    for (const auto& [name, state] : watches) {
      if (!state.update.has_value()) missing.push_back(Named(kind, name));
    }
  };
  add(route_configs_, "RDS resource");
  add(clusters_, "CDS resource");
  add(endpoints_, "EDS resource");
  add(dns_, "DNS name of cluster");
  std::string text;
  for (size_t i = 0; i < missing.size() && i < kNamed; ++i) {
    text += (i == 0 ? "" : ", ") + missing[i];
  }
  if (missing.size() > kNamed) text += " and " + std::to_string(missing.size() - kNamed) + " more";
  return text.empty() ? text : "no answer yet for " + text;
}

void XdsDependencyManager::Update() {
  // Shutting down: the watches are gone and the watcher hears nothing more.
  if (shutdown_.started() || !listener_.update.has_value()) return;
  const std::string listener_context = Named("LDS resource", listener_name_);
  if (!listener_.update->ok()) {
    Report(WithContext(listener_.update->status(), listener_context));
    return;
  }
  auto config = std::make_shared<XdsConfig>();
  config->listener = **listener_.update;
  const auto* api = std::get_if<ListenerResource::ApiListener>(&config->listener->listener);
  if (api == nullptr) {
    Report(Status(StatusCode::kUnavailable, listener_context + ": not an API listener"));
    return;
  }
  // The RouteConfiguration: inline, or the RDS resource it names (the watch
  // of an old name goes as soon as the Listener names another).
  std::string route_context;
  if (const auto* inline_config =
          std::get_if<RouteConfigResource>(&api->http_connection_manager.route_config)) {
    config->route_config =
        std::shared_ptr<const RouteConfigResource>(config->listener, inline_config);
    route_config_name_.clear();
    route_context = listener_context + " (inline RouteConfiguration)";
  } else {
    route_config_name_ = std::get<std::string>(api->http_connection_manager.route_config);
    route_context = Named("RDS resource", route_config_name_);
  }
  for (auto it = route_configs_.begin(); it != route_configs_.end();) {
    if (it->first == route_config_name_) {
      ++it;
      continue;
    }
    client_.CancelWatch(RouteConfigResourceType::Get(), it->first, it->second.watcher.get());
    it = route_configs_.erase(it);
  }
  if (!route_config_name_.empty()) {
    WatchState<RouteConfigResource>& rds =
        Watch(route_configs_, RouteConfigResourceType::Get(), route_config_name_);
    if (!rds.update.has_value()) return;
    if (!rds.update->ok()) {
      Report(WithContext(rds.update->status(), route_context));
      return;
    }
    config->route_config = **rds.update;
  }
  config->virtual_host = config->route_config->FindVirtualHost(authority_);
  if (config->virtual_host == nullptr) {
    Report(Status(StatusCode::kUnavailable,
                  "could not find VirtualHost for " + authority_ + " in " + route_context));
    return;
  }
  // Every cluster a route of the virtual host names, in route order.
  const std::vector<std::string> roots = routing::ClustersNamedBy(*config->virtual_host);
  Expansions expansions;
  bool complete = true;
  const uint64_t expansions_before = expansion_count_;
  for (const std::string& root : roots) {
    complete &= Expand(root, 0, *config, expansions).complete;
  }
  last_expansion_count_ = expansion_count_ - expansions_before;
  std::set<std::string>& clusters = expansions.clusters;
  std::set<std::string>& endpoint_names = expansions.endpoint_names;
  std::set<std::string>& dns_clusters = expansions.dns_clusters;
  // A74: the clusters of the config in use stay watched until a new config
  // replaces it; only then do watches nothing refers to any more go.
  if (complete) {
    published_clusters_ = clusters;
    published_endpoints_ = endpoint_names;
    published_dns_ = dns_clusters;
  } else {
    clusters.insert(published_clusters_.begin(), published_clusters_.end());
    endpoint_names.insert(published_endpoints_.begin(), published_endpoints_.end());
    dns_clusters.insert(published_dns_.begin(), published_dns_.end());
  }
  for (auto it = clusters_.begin(); it != clusters_.end();) {
    if (clusters.contains(it->first)) {
      ++it;
      continue;
    }
    client_.CancelWatch(ClusterResourceType::Get(), it->first, it->second.watcher.get());
    it = clusters_.erase(it);
  }
  for (auto it = endpoints_.begin(); it != endpoints_.end();) {
    if (endpoint_names.contains(it->first)) {
      ++it;
      continue;
    }
    client_.CancelWatch(EndpointResourceType::Get(), it->first, it->second.watcher.get());
    it = endpoints_.erase(it);
  }
  std::erase_if(dns_, [&](const auto& entry) { return !dns_clusters.contains(entry.first); });
  if (!complete) return;
  Report(std::shared_ptr<const XdsConfig>(std::move(config)));
}

void XdsDependencyManager::Report(StatusOr<std::shared_ptr<const XdsConfig>> config) {
  watcher_(std::move(config));
}

std::vector<std::string> XdsDependencyManager::WatchedClusters() const {
  std::vector<std::string> names;
  for (const auto& [name, state] : clusters_) names.push_back(name);
  return names;
}

std::vector<std::string> XdsDependencyManager::WatchedEndpoints() const {
  std::vector<std::string> names;
  for (const auto& [name, state] : endpoints_) names.push_back(name);
  return names;
}

}  // namespace uxds
