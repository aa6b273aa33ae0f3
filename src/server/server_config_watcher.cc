#include "server/server_config_watcher.h"

#include <utility>
#include <variant>
#include <vector>

#include "uxds/log.h"

namespace uxds::server {

// Forwards one watch's callbacks. The XdsClient guarantees no callback after
// CancelWatch(), which the watcher calls before it goes.
template <typename T>
class ServerConfigWatcher::Watcher final : public XdsResourceWatcher<T> {
 public:
  Watcher(ServerConfigWatcher& owner, std::string name) : owner_(owner), name_(std::move(name)) {}
  void OnResourceChanged(StatusOr<std::shared_ptr<const T>> resource) override {
    if constexpr (std::is_same_v<T, ListenerResource>) {
      owner_.OnListener(std::move(resource));
    } else {
      owner_.OnRouteConfig(name_, std::move(resource));
    }
  }
  void OnAmbientError(Status status) override {
    if constexpr (std::is_same_v<T, ListenerResource>) {
      owner_.OnListenerAmbientError(status);
    } else {
      owner_.OnRouteConfigAmbientError(name_, status);
    }
  }

 private:
  ServerConfigWatcher& owner_;
  const std::string name_;
};

namespace {

template <typename Fn>
void ForEachChain(const ListenerResource::TcpListener& listener, Fn&& fn) {
  for (const FilterChain& chain : listener.filter_chains) fn(chain);
  if (listener.default_filter_chain.has_value()) fn(*listener.default_filter_chain);
}

const std::string* RdsNameOf(const FilterChain& chain) {
  return std::get_if<std::string>(&chain.http_connection_manager.route_config);
}

std::string ChainLabel(const FilterChain& chain, const ListenerResource::TcpListener& listener) {
  if (listener.default_filter_chain.has_value() && &chain == &*listener.default_filter_chain) {
    return "default filter chain";
  }
  return "filter chain \"" + chain.name + "\"";
}

}  // namespace

std::set<std::string> RdsNamesOf(const ListenerResource::TcpListener& listener) {
  std::set<std::string> names;
  ForEachChain(listener, [&names](const FilterChain& chain) {
    if (const std::string* name = RdsNameOf(chain)) names.insert(*name);
  });
  return names;
}

ServerConfigWatcher::ServerConfigWatcher(XdsClient& client, std::string listener_name,
                                         std::string listening_address,
                                         std::shared_ptr<const http2::ServiceRegistry> registry,
                                         Callbacks callbacks)
    : client_(client),
      listener_name_(std::move(listener_name)),
      listening_address_(std::move(listening_address)),
      registry_(std::move(registry)),
      callbacks_(std::move(callbacks)) {
  listener_watcher_ = std::make_shared<Watcher<ListenerResource>>(*this, listener_name_);
  client_.WatchResource(ListenerResourceType::Get(), listener_name_, listener_watcher_);
}

ServerConfigWatcher::~ServerConfigWatcher() {
  client_.CancelWatch(ListenerResourceType::Get(), listener_name_, listener_watcher_.get());
  for (auto& [name, state] : rds_) {
    client_.CancelWatch(RouteConfigResourceType::Get(), name, state.watcher.get());
  }
}

Status ServerConfigWatcher::CheckListener(const ListenerResource& listener) const {
  const auto* tcp = std::get_if<ListenerResource::TcpListener>(&listener.listener);
  if (tcp == nullptr) {
    return FailedPreconditionError("Listener " + listener_name_ +
                                   " is not a server listener (it has an api_listener)");
  }
  // A36: "The XdsServer must be 'not serving' if the address does not
  // match"; gRPC C++ compares "address:port_value" as text.
  if (tcp->address != listening_address_) {
    return FailedPreconditionError("Address in LDS update (" + tcp->address +
                                   ") does not match listening address " + listening_address_);
  }
  return Status();
}

void ServerConfigWatcher::OnListener(StatusOr<std::shared_ptr<const ListenerResource>> listener) {
  if (!listener.ok()) {
    // A88: OnResourceChanged with an error means the resource is not to be
    // used any more (deleted or NACKed under fail_on_data_errors, or never
    // received).
    pending_ = nullptr;
    StopServing(Status(listener.status().code(),
                       "Listener " + listener_name_ + ": " + listener.status().message()));
    return;
  }
  if (Status usable = CheckListener(**listener); !usable.ok()) {
    pending_ = nullptr;
    StopServing(std::move(usable));
    return;
  }
  pending_ = *std::move(listener);
  UpdateRdsWatches();
  TryApply();
}

void ServerConfigWatcher::OnListenerAmbientError(const Status& status) {
  // A36: "Communication failures do not impact the XdsServer's xDS
  // configuration"; A88: ambient errors keep the resource in use.
  if (status.ok()) return;
  Log(LogSeverity::kWarning, "xDS-enabled server " + listening_address_ + ": Listener " +
                                 listener_name_ + " keeps its last version: " + status.ToString());
}

void ServerConfigWatcher::OnRouteConfig(
    const std::string& name, StatusOr<std::shared_ptr<const RouteConfigResource>> routes) {
  auto it = rds_.find(name);
  if (it == rds_.end()) return;
  RdsState& state = it->second;
  state.update = routes;
  // A36: an RDS update applies to live connections without draining.
  callbacks_.update_routes(state.table, std::move(routes));
  const bool used_now =
      current_ != nullptr &&
      RdsNamesOf(std::get<ListenerResource::TcpListener>(current_->listener)).contains(name);
  if (pending_ != nullptr) TryApply();
  if (used_now) LogConfigurationErrors();
}

void ServerConfigWatcher::OnRouteConfigAmbientError(const std::string& name, const Status& status) {
  if (status.ok()) return;
  Log(LogSeverity::kWarning, "xDS-enabled server " + listening_address_ + ": RouteConfiguration " +
                                 name + " keeps its last version: " + status.ToString());
}

void ServerConfigWatcher::TryApply() {
  if (pending_ == nullptr) return;
  // A36: "Applying updates to a Listener should be delayed until dependent
  // resources have been attempted to be loaded".
  for (const std::string& name :
       RdsNamesOf(std::get<ListenerResource::TcpListener>(pending_->listener))) {
    auto it = rds_.find(name);
    if (it == rds_.end() || !it->second.update.has_value()) return;
  }
  // A Listener equal to the one served (e.g. back after a pending update
  // was replaced) changes nothing and drains nothing (gRPC compares deeply).
  if (current_ != nullptr && *current_ == *pending_) {
    pending_ = nullptr;
    UpdateRdsWatches();
    return;
  }
  current_ = std::move(pending_);
  pending_ = nullptr;
  UpdateRdsWatches();
  callbacks_.apply(BuildConfig(current_));
  LogConfigurationErrors();
}

std::shared_ptr<const ServingConfig> ServerConfigWatcher::BuildConfig(
    std::shared_ptr<const ListenerResource> listener) {
  auto config = std::make_shared<ServingConfig>();
  config->listener = std::move(listener);
  const ListenerResource::TcpListener& tcp = config->tcp_listener();
  config->matcher = std::make_unique<const FilterChainMatcher>(tcp);
  auto registry_for = [this](const FilterChain& chain) {
    std::shared_ptr<const RouteTable> table;
    if (const std::string* name = RdsNameOf(chain)) {
      table = rds_.at(*name).table;
    } else {
      table = std::make_shared<const RouteTable>(std::make_shared<const RouteConfigResource>(
          std::get<RouteConfigResource>(chain.http_connection_manager.route_config)));
    }
    return MakeRoutedRegistry(registry_, std::move(table),
                              chain.http_connection_manager.http_filters);
  };
  auto tls_for = [this](const FilterChain& chain) -> std::shared_ptr<const DownstreamTls> {
    return callbacks_.tls_for ? callbacks_.tls_for(chain) : nullptr;
  };
  for (const FilterChain& chain : tcp.filter_chains) {
    config->chain_registries.push_back(registry_for(chain));
    config->chain_tls.push_back(tls_for(chain));
  }
  if (tcp.default_filter_chain.has_value()) {
    config->default_chain_registry = registry_for(*tcp.default_filter_chain);
    config->default_chain_tls = tls_for(*tcp.default_filter_chain);
  }
  return config;
}

void ServerConfigWatcher::UpdateRdsWatches() {
  std::set<std::string> wanted;
  for (const auto& listener : {pending_, current_}) {
    if (listener == nullptr) continue;
    wanted.merge(RdsNamesOf(std::get<ListenerResource::TcpListener>(listener->listener)));
  }
  for (auto it = rds_.begin(); it != rds_.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    client_.CancelWatch(RouteConfigResourceType::Get(), it->first, it->second.watcher.get());
    it = rds_.erase(it);
  }
  for (const std::string& name : wanted) {
    auto [it, added] = rds_.try_emplace(name);
    if (!added) continue;
    it->second.watcher = std::make_shared<Watcher<RouteConfigResource>>(*this, name);
    // May call back at once with a cached resource.
    client_.WatchResource(RouteConfigResourceType::Get(), name, it->second.watcher);
  }
}

void ServerConfigWatcher::StopServing(Status reason) {
  current_ = nullptr;
  UpdateRdsWatches();
  callbacks_.not_serving(std::move(reason));
}

void ServerConfigWatcher::LogConfigurationErrors() {
  if (current_ == nullptr) return;
  const auto& tcp = std::get<ListenerResource::TcpListener>(current_->listener);
  std::vector<std::string> problems;
  ForEachChain(tcp, [&](const FilterChain& chain) {
    const std::string context = "Listener " + listener_name_ + " " + ChainLabel(chain, tcp);
    std::vector<std::string> found;
    if (const std::string* name = RdsNameOf(chain)) {
      const RdsState& state = rds_.at(*name);
      if (!state.update.has_value()) return;
      found = RouteConfigProblems(context + " RouteConfiguration " + *name, *state.update);
    } else {
      found = RouteConfigProblems(
          context, std::make_shared<const RouteConfigResource>(
                       std::get<RouteConfigResource>(chain.http_connection_manager.route_config)));
    }
    problems.insert(problems.end(), found.begin(), found.end());
  });
  // A36 "configuration error logging": a warning per update in this state,
  // and a single one once the errors are gone.
  if (!problems.empty()) {
    std::string message = "xDS-enabled server " + listening_address_ +
                          ": configuration error, matching RPCs fail with UNAVAILABLE:";
    for (const std::string& problem : problems) message += " [" + problem + "]";
    Log(LogSeverity::kWarning, message);
    logged_configuration_errors_ = true;
  } else if (logged_configuration_errors_) {
    Log(LogSeverity::kWarning,
        "xDS-enabled server " + listening_address_ + ": the configuration errors are fixed");
    logged_configuration_errors_ = false;
  }
}

}  // namespace uxds::server
