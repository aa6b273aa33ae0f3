// Channel::Impl's side of configs (src/client/channel_impl.h): each config
// from the XdsDependencyManager, or a host:port target's resolution, into
// one ClusterLoadBalancer per cluster the routes name, leaving alone a
// cluster whose resources did not change.
#include <algorithm>
#include <set>
#include <utility>

#include "client/channel_impl.h"
#include "xds/client/xds_client_impl.h"
#include "xds/lrs/load_reporting_client.h"

namespace uxds {

using client_internal::ClusterSource;
using client_internal::CompiledRoutes;

namespace {

// "host:port" / "[v6]:port" into host and port.
std::pair<std::string, std::string> SplitHostPort(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, host_port.substr(colon + 1)};
}

// The same object, or an equal one.
template <typename T>
bool SameResource(const std::shared_ptr<const T>& a, const std::shared_ptr<const T>& b) {
  return a == b || (a != nullptr && b != nullptr && *a == *b);
}

}  // namespace

bool client_internal::operator==(const ClusterSource& a, const ClusterSource& b) {
  return a.name == b.name && SameResource(a.cluster, b.cluster) &&
         SameResource(a.endpoints, b.endpoints);
}

std::shared_ptr<ClusterLoadStats> Channel::Impl::LoadStatsFor(const std::string& name,
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

LbPolicyOptions Channel::Impl::LbOptions() const {
  LbPolicyOptions lb;
  lb.ring_sizes.ring_size_cap = options.ring_size_cap;
  lb.priority_failover_timeout = options.priority_failover_timeout;
  // A37: pick_first of a LOGICAL_DNS cluster asks for a new DNS answer.
  lb.request_reresolution = [this] {
    if (dependencies != nullptr) dependencies->RequestReresolution();
  };
  return lb;
}

namespace {

// A31: the HttpConnectionManager's max_stream_duration, the default of
// routes that set none.
std::optional<std::chrono::nanoseconds> HcmMaxStreamDuration(const XdsConfig& config) {
  if (config.listener == nullptr) return std::nullopt;
  const auto* api = std::get_if<ListenerResource::ApiListener>(&config.listener->listener);
  if (api == nullptr) return std::nullopt;
  return api->http_connection_manager.http_max_stream_duration;
}

// A39: the HttpConnectionManager's filters (the fault filters apply, A33).
std::span<const HttpConnectionManager::HttpFilter> HttpFiltersOf(const XdsConfig& config) {
  if (config.listener == nullptr) return {};
  const auto* api = std::get_if<ListenerResource::ApiListener>(&config.listener->listener);
  if (api == nullptr) return {};
  return api->http_connection_manager.http_filters;
}

}  // namespace

Channel::Impl::ClusterState& Channel::Impl::StateOf(const std::string& name) {
  ClusterState& state = clusters[name];
  if (state.id == 0) state.id = ++last_cluster_id;
  return state;
}

Channel::Impl::ClusterState& Channel::Impl::EnsureCluster(const std::string& name) {
  ClusterState& state = StateOf(name);
  if (state.lb == nullptr) {
    state.lb = std::make_unique<ClusterLoadBalancer>(loop, subchannels, LbOptions());
    state.lb->SetStateObserver([this](ConnectivityState, const Status&) { WakeWaiters(); });
  }
  state.error = Status();
  return state;
}

void Channel::Impl::OnConfig(StatusOr<std::shared_ptr<const XdsConfig>> update) {
  if (!update.ok()) {
    // A74: the Listener or its routes cannot be used: neither can the
    // previous config.
    config = nullptr;
    config_error = Status(StatusCode::kUnavailable, update.status().message());
    config_failed = true;
    clusters.clear();
    routes = nullptr;
    LinkRoutes();
    WakeWaiters();
    return;
  }
  config = *std::move(update);
  config_failed = false;
  const std::vector<std::string> named = routing::ClustersNamedBy(*config->virtual_host);
  const std::set<std::string> used(named.begin(), named.end());
  for (const std::string& name : used) UpdateCluster(name);
  std::erase_if(clusters, [&](const auto& entry) { return !used.contains(entry.first); });
  // Calls route by the new routes from now on (an unchanged route table is
  // compiled again too: compiling is cheap beside a config).
  routes = CompiledRoutes::Compile(*config->virtual_host, HcmMaxStreamDuration(*config),
                                   HttpFiltersOf(*config));
  LinkRoutes();
  WakeWaiters();
}

void Channel::Impl::UpdateCluster(const std::string& name) {
  auto it = config->clusters.find(name);
  if (it == config->clusters.end()) return;
  if (!it->second.ok()) {
    ClusterState& state = StateOf(name);
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
  if (auto found = clusters.find(name);
      found != clusters.end() && found->second.lb != nullptr && found->second.sources == sources) {
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
    const bool pick_first = std::holds_alternative<ClusterResource::LogicalDns>(leaf_cluster.type);
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

std::string Channel::Impl::NoteOf(const XdsConfig::ClusterConfig& cluster) const {
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

std::vector<ClusterSource> Channel::Impl::SourcesOf(const std::string& name,
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

std::shared_ptr<const ClusterImplConfig> Channel::Impl::ClusterImplConfigFor(
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
  impl->tls = TlsFor(cluster);
  return impl;
}

Status Channel::Impl::UseCredentials() {
  using Kind = ChannelCredentials::Kind;
  const ChannelCredentials* plain = &options.credentials;
  if (plain->kind == Kind::kXds) {
    xds_security = true;
    plain = plain->fallback.get();
    if (plain == nullptr || plain->kind == Kind::kXds) {
      return InvalidArgumentError(
          "ChannelOptions.credentials: the fallback of xDS credentials must be Insecure or Tls");
    }
  }
  if (plain->kind != Kind::kTls) return OkStatus();
  TlsClientConfig config;
  config.ca_certificate_file = plain->tls.ca_certificate_file;
  config.certificate_file = plain->tls.certificate_file;
  config.private_key_file = plain->tls.private_key_file;
  StatusOr<std::shared_ptr<TlsClientContext>> context = TlsClientContext::Create(config);
  if (!context.ok()) {
    return InvalidArgumentError("ChannelOptions.credentials: " +
                                std::string(context.status().message()));
  }
  // As gRPC: the server's certificate must name the target's host.
  fallback_tls = UpstreamTls::Fixed(*std::move(context), SplitHostPort(target.name).first);
  return OkStatus();
}

std::shared_ptr<const UpstreamTls> Channel::Impl::TlsFor(const ClusterResource& cluster) const {
  // A29: only xDS credentials let the control plane secure a cluster.
  if (!xds_security || !cluster.upstream_tls_context.has_value() ||
      options.xds_client_pool == nullptr) {
    return fallback_tls;
  }
  return UpstreamTls::FromXds(options.xds_client_pool->bootstrap(), *cluster.upstream_tls_context);
}

Task<void> Channel::Impl::ResolveDirect() {
  auto [host, port] = SplitHostPort(target.name);
  StatusOr<std::vector<SocketAddress>> addresses = co_await resolver->Resolve(host, port);
  if (shutdown.started()) co_return;
  if (!addresses.ok()) {
    config_error = Status(StatusCode::kUnavailable, addresses.status().message());
    config_failed = true;
    LinkRoutes();
    WakeWaiters();
    co_return;
  }
  ClusterResource cluster;
  const EndpointResource endpoints = EndpointsOfAddresses(*addresses);
  ClusterState& state = EnsureCluster(direct_cluster);
  state.note = "resolved " + target.name;
  state.lb->Update(cluster, endpoints, fallback_tls);
  LinkRoutes();
  WakeWaiters();
}

}  // namespace uxds
