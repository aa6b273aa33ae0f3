#include "xds/client/xds_client_impl.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "xds/bootstrap.h"
#include "xds/client/ads_protocol.h"
#include "xds/client/xds_resource_name.h"
#include "xds/lrs/load_reporting_client.h"

#ifndef UXDS_VERSION
#define UXDS_VERSION "dev"
#endif

namespace uxds::xds_internal {

XdsClientImpl::XdsClientImpl(Loop& loop, Bootstrap bootstrap, XdsClientOptions options)
    : loop_(loop),
      bootstrap_(std::move(bootstrap)),
      options_(std::move(options)),
      notifications_(loop, bootstrap_.node.id),
      cache_(loop, notifications_,
             {options_.resource_does_not_exist_timeout, options_.resource_transient_error_timeout}),
      tasks_(loop),
      shutdown_tasks_(loop) {
  PopulateNodeProto(
      bootstrap_.node, options_.user_agent_name,
      options_.user_agent_version.empty() ? UXDS_VERSION : options_.user_agent_version, &node_);
  node_.add_client_features(std::string(kClientFeatureResourceInSotw));
  tasks_.Spawn(notifications_.Run());
}

XdsClientImpl::~XdsClientImpl() {
  assert(shutdown_ == ShutdownState::kDone && "XdsClientImpl destroyed before its Shutdown()");
}

Task<void> XdsClientImpl::Shutdown() {
  if (shutdown_ == ShutdownState::kNone) {
    shutdown_ = ShutdownState::kRunning;
    notifications_.Close();
    shutdown_tasks_.Spawn(TearDown());
  }
  co_await shutdown_tasks_.Join();
}

LoadReportingClient* XdsClientImpl::load_reporting(const LoadReportingOptions& options) {
  if (shutdown_ != ShutdownState::kNone) return nullptr;
  if (load_reporting_ == nullptr) {
    load_reporting_ = std::make_unique<LoadReportingClient>(loop_, bootstrap_.node, options);
  }
  return load_reporting_.get();
}

Task<void> XdsClientImpl::TearDown() {
  if (load_reporting_ != nullptr) co_await load_reporting_->Shutdown();
  co_await tasks_.CancelAndJoin();
  for (auto& [key, channel] : channels_) {
    cache_.StopResourceTimers(channel->server());
    co_await channel->CloseConnection();
  }
  shutdown_ = ShutdownState::kDone;
}

void XdsClientImpl::DestroyAfterShutdown(std::unique_ptr<XdsClientImpl> self) {
  // No watcher hears anything once ~XdsClient has returned.
  self->notifications_.Close();
  // Done: nothing of ours runs any more. Other Shutdown() callers may still
  // be queued to resume; they end on what their join recorded, never on the
  // freed group.
  if (self->shutdown_ == ShutdownState::kDone) return;
  // Not done (or not started): finish it in a task that owns the client.
  auto shutdown = [](std::unique_ptr<XdsClientImpl> owned) -> Task<void> {
    co_await owned->Shutdown();
  };
  Loop& loop = self->loop_;
  loop.Spawn(shutdown(std::move(self)));
}

void XdsClientImpl::FailWatch(const XdsResourceType& type, std::string_view name,
                              std::shared_ptr<XdsResourceWatcherInterface> watcher, Status error) {
  std::erase_if(failed_watches_, [](const FailedWatch& f) { return f.registration.expired(); });
  auto registration = std::make_shared<WatcherRegistration>();
  registration->watcher = std::move(watcher);
  notifications_.ResourceChanged(registration, error);
  failed_watches_.push_back({&type, std::string(name), registration});
}

XdsServerChannel& XdsClientImpl::GetOrCreateChannel(XdsServerState& server) {
  std::string key = server.config.Key();
  auto it = channels_.find(key);
  if (it != channels_.end()) return *it->second;
  const XdsServerChannel::Environment environment{loop_,  bootstrap_,     options_, node_,
                                                  cache_, notifications_, *this};
  auto channel = std::make_unique<XdsServerChannel>(environment, server);
  tasks_.Spawn(channel->Run());
  return *channels_.emplace(std::move(key), std::move(channel)).first->second;
}

void XdsClientImpl::WatchResource(const XdsResourceType& type, std::string_view name,
                                  std::shared_ptr<XdsResourceWatcherInterface> watcher) {
  assert(loop_.InLoopThread());
  if (shutdown_ != ShutdownState::kNone) return;
  auto [type_it, new_type] = types_.try_emplace(std::string(type.type_url()), &type);
  if (type_it->second != &type) {
    FailWatch(type, name, std::move(watcher),
              InvalidArgumentError("resource type " + std::string(type.type_url()) +
                                   " is already watched through another XdsResourceType"));
    return;
  }
  StatusOr<XdsResourceName> parsed = ParseXdsResourceName(name, type);
  if (!parsed.ok()) {
    FailWatch(type, name, std::move(watcher), parsed.status());
    return;
  }
  // A47: an xdstp:// name uses its authority's servers, or the top-level ones
  // if the authority lists none; any other name the top-level servers.
  const std::vector<XdsServerConfig>* servers = &bootstrap_.xds_servers;
  if (parsed->is_xdstp()) {
    const XdsAuthority* authority = bootstrap_.FindAuthority(parsed->authority);
    if (authority == nullptr) {
      // gRPC C++ reports this as FAILED_PRECONDITION too.
      FailWatch(type, name, std::move(watcher),
                FailedPreconditionError("authority \"" + parsed->authority +
                                        "\" not present in bootstrap config"));
      return;
    }
    if (!authority->xds_servers.empty()) servers = &authority->xds_servers;
  }
  if (servers->empty()) {
    FailWatch(type, name, std::move(watcher),
              FailedPreconditionError("no xDS servers for resource " + parsed->key));
    return;
  }
  // A71: the authority's servers in bootstrap order, one state per authority.
  XdsAuthorityState& authority = cache_.GetOrCreateAuthority(parsed->authority, *servers);
  auto registration = std::make_shared<WatcherRegistration>();
  registration->watcher = std::move(watcher);
  const XdsResourceCache::AddWatcherResult added =
      cache_.AddWatcher(type, *parsed, authority, std::move(registration));
  // Several watchers of one resource share one subscription. NOTES (A71):
  // "Newly watched resources are subscribed on every server in the prefix",
  // so the higher-priority servers retried meanwhile have it too.
  if (!added.new_entry) return;
  for (size_t i = 0; i <= authority.active; ++i) {
    GetOrCreateChannel(*authority.servers[i]).Subscribe(type, parsed->key);
  }
}

void XdsClientImpl::CancelWatch(const XdsResourceType& type, std::string_view name,
                                const XdsResourceWatcherInterface* watcher) {
  assert(loop_.InLoopThread());
  // The header promises to stop exactly the watch named: a watcher object
  // may hold a failed watch and valid ones at once.
  auto failed = std::find_if(failed_watches_.begin(), failed_watches_.end(), [&](const auto& f) {
    const std::shared_ptr<WatcherRegistration> registration = f.registration.lock();
    return registration != nullptr && registration->watcher.get() == watcher && f.type == &type &&
           f.name == name;
  });
  if (failed != failed_watches_.end()) {
    failed->registration.lock()->cancelled = true;
    failed_watches_.erase(failed);
    return;
  }
  if (shutdown_ != ShutdownState::kNone) return;
  StatusOr<XdsResourceName> parsed = ParseXdsResourceName(name, type);
  if (!parsed.ok()) return;
  XdsAuthorityState* authority = cache_.RemoveWatcher(type, parsed->key, watcher);
  if (authority == nullptr) return;
  for (size_t i = 0; i <= authority->active; ++i) {
    auto it = channels_.find(authority->servers[i]->config.Key());
    if (it != channels_.end()) it->second->Unsubscribe(type, parsed->key);
  }
}

std::optional<XdsResourceSnapshot> XdsClientImpl::Lookup(const XdsResourceType& type,
                                                         std::string_view name,
                                                         bool with_resource_json) const {
  // The cache is keyed by the normalized name (A47: xdstp:// context
  // parameters sorted).
  StatusOr<XdsResourceName> parsed = ParseXdsResourceName(name, type);
  if (!parsed.ok()) return std::nullopt;
  return cache_.Lookup(type, parsed->key, with_resource_json);
}

envoy::service::status::v3::ClientConfig XdsClientImpl::DumpClientConfig() const {
  envoy::service::status::v3::ClientConfig config;
  *config.mutable_node() = node_;
  cache_.DumpGenericXdsConfigs(config);
  config.set_client_scope(options_.client_scope);
  return config;
}

}  // namespace uxds::xds_internal
