#include "xds/client/xds_resource_cache.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace uxds::xds_internal {

namespace {

void SetTimestamp(std::chrono::system_clock::time_point time, google::protobuf::Timestamp* out) {
  const auto since_epoch = time.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  out->set_seconds(seconds.count());
  out->set_nanos(static_cast<int32_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds).count()));
}

// TP3: "NOT_FOUND, PERMISSION_DENIED" are data errors; every other code is
// transient ("Data planes SHOULD treat these as transient failures").
bool IsDataErrorCode(StatusCode code) {
  return code == StatusCode::kNotFound || code == StatusCode::kPermissionDenied;
}

}  // namespace

std::string_view CacheStateLabel(XdsCacheState state, bool has_resource) {
  switch (state) {
    case XdsCacheState::kRequested:
      return "requested";
    case XdsCacheState::kDoesNotExist:
      return has_resource ? "does_not_exist_but_cached" : "does_not_exist";
    case XdsCacheState::kAcked:
      return "acked";
    case XdsCacheState::kNacked:
      return has_resource ? "nacked_but_cached" : "nacked";
    case XdsCacheState::kReceivedError:
      return has_resource ? "received_error_but_cached" : "received_error";
    case XdsCacheState::kTimeout:
      return "timeout";
  }
  return "unknown";
}

XdsResourceCache::XdsResourceCache(Loop& loop, WatcherNotificationQueue& notifications,
                                   TimerOptions timers)
    : loop_(loop), notifications_(notifications), timers_(timers) {}

XdsResourceCache::~XdsResourceCache() = default;

size_t XdsAuthorityState::PriorityOf(const XdsServerState& server) const {
  for (size_t i = 0; i < servers.size(); ++i) {
    if (servers[i] == &server) return i;
  }
  return kNoServer;
}

bool XdsCacheEntry::TakesDataFrom(const XdsServerState& from) const {
  // Data comes from the server in use only: a higher-priority server that
  // answers becomes the server in use before its data is applied, and a
  // lower-priority one that is no longer in use is being closed.
  //
  // A71: once it has fallen back, the client "will subscribe to all watched
  // resources on that server and will update the cache based on the received
  // responses": updates, deletions and errors from the fallback apply to
  // entries the primary set too. "Reservations" is honoured by when the
  // client falls back (only for a resource not cached), not by keeping the
  // primary's copies: a channel would otherwise mix the primary's Listener
  // with the fallback's Clusters, and a primary that died mid-update, naming
  // a resource the fallback does not have, would never be recovered from.
  // A71 "Config tears" accepts the tears this allows for same-named
  // resources.
  return &from == &server();
}

XdsAuthorityState& XdsResourceCache::GetOrCreateAuthority(
    const std::string& name, const std::vector<XdsServerConfig>& servers) {
  auto it = authorities_.find(name);
  if (it == authorities_.end()) {
    auto authority = std::make_unique<XdsAuthorityState>();
    authority->name = name;
    for (const XdsServerConfig& config : servers) {
      authority->servers.push_back(&GetOrCreateServer(config));
    }
    it = authorities_.emplace(name, std::move(authority)).first;
  }
  return *it->second;
}

bool XdsResourceCache::HasUncachedResource(const XdsAuthorityState& authority) {
  bool uncached = false;
  ForEachEntryOf(authority, [&](XdsCacheEntry& entry) {
    if (entry.state == XdsCacheState::kRequested) uncached = true;
  });
  return uncached;
}

XdsServerState& XdsResourceCache::GetOrCreateServer(const XdsServerConfig& config) {
  std::string key = config.Key();
  auto it = servers_.find(key);
  if (it == servers_.end()) {
    it = servers_.emplace(std::move(key), std::make_unique<XdsServerState>(config)).first;
  }
  return *it->second;
}

template <typename F>
void XdsResourceCache::ForEachEntryOf(const XdsServerState& server, F f) {
  for (auto& [type_url, by_name] : entries_) {
    for (auto& [key, entry] : by_name) {
      if (&entry->server() == &server) f(*entry);
    }
  }
}

// --- Watches -----------------------------------------------------------------

XdsResourceCache::AddWatcherResult XdsResourceCache::AddWatcher(
    const XdsResourceType& type, const XdsResourceName& name, XdsAuthorityState& authority,
    std::shared_ptr<WatcherRegistration> registration) {
  auto& by_name = entries_[std::string(type.type_url())];
  auto it = by_name.find(name.key);
  const bool new_entry = it == by_name.end();
  if (new_entry) {
    it = by_name.emplace(name.key, std::make_unique<XdsCacheEntry>(loop_, type, name, authority))
             .first;
  }
  XdsCacheEntry& entry = *it->second;
  entry.watchers.push_back(registration);
  // A88: a new watcher "should also see both the valid resource and the
  // ambient error, in that order"; NOTES: then the server's current error,
  // by the same rule.
  if (entry.resource != nullptr) notifications_.ResourceChanged(registration, entry.resource);
  for (const Status* error : {&entry.error, &entry.server().channel_error}) {
    if (error->ok()) continue;
    if (entry.resource != nullptr) {
      notifications_.AmbientError(registration, *error);
    } else {
      notifications_.ResourceChanged(registration, *error);
    }
  }
  return {&entry, new_entry};
}

XdsAuthorityState* XdsResourceCache::RemoveWatcher(const XdsResourceType& type,
                                                   std::string_view key,
                                                   const XdsResourceWatcherInterface* watcher) {
  auto type_it = entries_.find(type.type_url());
  if (type_it == entries_.end()) return nullptr;
  auto it = type_it->second.find(key);
  if (it == type_it->second.end()) return nullptr;
  auto& watchers = it->second->watchers;
  auto registration = std::find_if(watchers.begin(), watchers.end(),
                                   [&](const auto& r) { return r->watcher.get() == watcher; });
  if (registration == watchers.end()) return nullptr;
  (*registration)->cancelled = true;
  watchers.erase(registration);
  if (!watchers.empty()) return nullptr;
  XdsAuthorityState* authority = &it->second->authority;
  type_it->second.erase(it);
  if (type_it->second.empty()) entries_.erase(type_it);
  return authority;
}

XdsCacheEntry* XdsResourceCache::Find(const XdsResourceType& type, std::string_view key) {
  auto type_it = entries_.find(type.type_url());
  if (type_it == entries_.end()) return nullptr;
  auto it = type_it->second.find(key);
  return it == type_it->second.end() ? nullptr : it->second.get();
}

// --- Notifications -------------------------------------------------------------

void XdsResourceCache::NotifyError(XdsCacheEntry& entry, const Status& error) {
  // A88: "if there is an existing cached resource ..., call the watchers'
  // OnAmbientError() method with the error. Otherwise, call the watchers'
  // OnResourceChanged() method with the error."
  if (entry.resource != nullptr) {
    NotifyAmbient(entry, error);
    return;
  }
  for (const auto& registration : entry.watchers) {
    notifications_.ResourceChanged(registration, error);
  }
  entry.delivered_ambient_error = Status();
}

void XdsResourceCache::NotifyAmbient(XdsCacheEntry& entry, const Status& status) {
  for (const auto& registration : entry.watchers) {
    notifications_.AmbientError(registration, status);
  }
  entry.delivered_ambient_error = status;
}

Status XdsResourceCache::StandingAmbientError(const XdsCacheEntry& entry) const {
  if (entry.resource == nullptr) return Status();
  if (!entry.server().channel_error.ok()) return entry.server().channel_error;
  return entry.error;
}

void XdsResourceCache::RefreshAmbientError(XdsCacheEntry& entry) {
  if (entry.resource == nullptr) return;
  Status standing = StandingAmbientError(entry);
  // NOTES: "Never leave a watcher believing an error stands that the cache
  // no longer holds."
  if (standing != entry.delivered_ambient_error) NotifyAmbient(entry, standing);
}

void XdsResourceCache::ApplyDataError(XdsCacheEntry& entry, bool drop_cached_resource) {
  if (drop_cached_resource) {
    // A88: "the XdsClient will remove the resource from its cache, so that
    // CSDS and XdsClient metrics will not reflect a resource that the client
    // is not actually using."
    entry.resource.reset();
    entry.serialized.clear();
    entry.decoded_from = nullptr;
    entry.version.clear();
  }
  NotifyError(entry, entry.error);
}

// --- Events from an ADS stream -------------------------------------------------

void XdsResourceCache::MarkAccepted(XdsCacheEntry& entry, const std::string& version,
                                    std::chrono::system_clock::time_point now) {
  entry.timer.Cancel();
  entry.source_priority = entry.authority.active;
  entry.state = XdsCacheState::kAcked;
  entry.version = version;
  entry.last_updated = now;
  entry.error = Status();
  entry.failed_details.clear();
  entry.failed_version.clear();
  entry.failed_update_time = {};
}

void XdsResourceCache::OnValidResource(XdsCacheEntry& entry, XdsResourceData resource,
                                       std::string serialized, bool named_by_wrapper,
                                       const std::string& version,
                                       std::chrono::system_clock::time_point now) {
  const bool unchanged =
      entry.resource != nullptr && entry.type.ResourcesEqual(entry.resource, resource);
  MarkAccepted(entry, version, now);
  entry.serialized = std::move(serialized);
  entry.named_by_wrapper = named_by_wrapper;
  // TakesDataFrom: the response came from the server in use.
  entry.decoded_from = &entry.server();
  if (unchanged) {
    // DESIGN.md: identical updates notify nobody; only an error the watchers
    // still believe in is cleared (NOTES "Clearing errors").
    RefreshAmbientError(entry);
    return;
  }
  entry.resource = std::move(resource);
  for (const auto& registration : entry.watchers) {
    notifications_.ResourceChanged(registration, entry.resource);
  }
  entry.delivered_ambient_error = Status();
}

void XdsResourceCache::OnAcceptedVersionResent(XdsCacheEntry& entry, const std::string& version,
                                               std::chrono::system_clock::time_point now) {
  // The resource is the cached one: as OnValidResource with an identical copy.
  MarkAccepted(entry, version, now);
  RefreshAmbientError(entry);
}

void XdsResourceCache::OnInvalidResource(XdsCacheEntry& entry, const std::string& details,
                                         std::string serialized, bool named_by_wrapper,
                                         const std::string& version,
                                         std::chrono::system_clock::time_point now) {
  entry.timer.Cancel();
  Status error = InvalidArgumentError("invalid resource: " + details);
  // #9: a control plane may answer every NACK at once with the same
  // resources, thousands of times a second; the watchers heard this error.
  const bool already_told = entry.state == XdsCacheState::kNacked && entry.error == error;
  entry.source_priority = entry.authority.active;
  entry.state = XdsCacheState::kNacked;
  entry.error = std::move(error);
  entry.failed_details = details;
  entry.failed_version = version;
  entry.failed_update_time = now;
  entry.rejected = XdsCacheEntry::RejectedVersion{std::move(serialized), named_by_wrapper,
                                                  &entry.server(), details};
  if (already_told) return;
  // A88: a NACK is a data error.
  ApplyDataError(entry, entry.server().config.fail_on_data_errors);
}

void XdsResourceCache::OnRejectedVersionResent(XdsCacheEntry& entry, const std::string& version,
                                               std::chrono::system_clock::time_point now) {
  XdsCacheEntry::RejectedVersion rejected = *std::move(entry.rejected);
  OnInvalidResource(entry, rejected.details, std::move(rejected.serialized),
                    rejected.named_by_wrapper, version, now);
}

void XdsResourceCache::OnResourceError(XdsCacheEntry& entry, const Status& error,
                                       const std::string& version,
                                       std::chrono::system_clock::time_point now) {
  // A88 "Support for Errors Provided by the xDS server": 1. cancel the timer,
  // 2. RECEIVED_ERROR with the error, 3. drop the resource for NOT_FOUND /
  // PERMISSION_DENIED with fail_on_data_errors, 4. notify.
  entry.timer.Cancel();
  entry.source_priority = entry.authority.active;
  entry.state = XdsCacheState::kReceivedError;
  entry.error = error;
  entry.failed_details = error.message();
  entry.failed_version = version;
  entry.failed_update_time = now;
  ApplyDataError(entry, IsDataErrorCode(error.code()) && entry.server().config.fail_on_data_errors);
}

void XdsResourceCache::OnResourceMissing(XdsCacheEntry& entry, const std::string& version,
                                         std::chrono::system_clock::time_point now) {
  // NOTES: deletion is inferred only for names with a cached resource (a
  // response may predate the subscription); TP3 errors are sent once, so an
  // entry in RECEIVED_ERROR keeps its error.
  if (entry.resource == nullptr) return;
  if (entry.state == XdsCacheState::kDoesNotExist || entry.state == XdsCacheState::kReceivedError) {
    return;
  }
  entry.source_priority = entry.authority.active;
  entry.state = XdsCacheState::kDoesNotExist;
  entry.error = NotFoundError("does not exist");
  entry.failed_details = entry.error.message();
  entry.failed_version = version;
  entry.failed_update_time = now;
  // A88: an LDS/CDS deletion is a data error; without fail_on_data_errors it
  // is ignored (OnAmbientError), the entry reads does_not_exist_but_cached.
  ApplyDataError(entry, entry.server().config.fail_on_data_errors);
}

// --- Resource timers -----------------------------------------------------------

void XdsResourceCache::MaybeStartResourceTimer(XdsCacheEntry& entry) {
  // A57: "apply this same timeout, but only if the resource is not already
  // cached"; an entry that got anything (even an error) is not waiting.
  if (entry.state != XdsCacheState::kRequested || entry.resource != nullptr ||
      entry.timer.pending()) {
    return;
  }
  const auto duration = entry.server().config.resource_timer_is_transient_error
                            ? timers_.transient_error_timeout
                            : timers_.does_not_exist_timeout;
  entry.timer.Start(duration, [this, &entry] { OnResourceTimerFired(entry); });
}

void XdsResourceCache::StopResourceTimers(const XdsServerState& server) {
  ForEachEntryOf(server, [](XdsCacheEntry& entry) { entry.timer.Cancel(); });
}

void XdsResourceCache::OnResourceTimerFired(XdsCacheEntry& entry) {
  if (entry.state != XdsCacheState::kRequested) return;
  entry.source_priority = entry.authority.active;
  if (entry.server().config.resource_timer_is_transient_error) {
    // A88: "the resulting error will have status UNAVAILABLE instead of
    // NOT_FOUND, and the cache state will be set to TIMEOUT".
    entry.state = XdsCacheState::kTimeout;
    entry.error = UnavailableError("timeout obtaining resource from xDS server " +
                                   entry.server().config.server_uri);
  } else {
    entry.state = XdsCacheState::kDoesNotExist;
    entry.error = NotFoundError("does not exist");
  }
  entry.failed_details = entry.error.message();
  entry.failed_version.clear();
  entry.failed_update_time = std::chrono::system_clock::now();
  // A88: "we will still invoke the watchers' OnResourceChanged() method with
  // the error, because by definition this timer will fire only when we do not
  // have a version of the resource cached."
  NotifyError(entry, entry.error);
}

// --- Server connectivity ---------------------------------------------------------

void XdsResourceCache::OnServerFailure(XdsServerState& server, const Status& error) {
  // A78: server_failure counts "xDS servers going from healthy to unhealthy".
  if (server.channel_error.ok()) ++server.server_failures;
  server.connected = false;
  server.channel_error = error;
  // A88: transient errors never change the cache; watchers of cached
  // resources get OnAmbientError, the others OnResourceChanged.
  ForEachEntryOf(server, [&](XdsCacheEntry& entry) { NotifyError(entry, error); });
}

void XdsResourceCache::OnServerResponding(XdsServerState& server) {
  server.connected = true;
  if (server.channel_error.ok()) return;
  server.channel_error = Status();
  ForEachEntryOf(server, [&](XdsCacheEntry& entry) {
    if (entry.resource != nullptr) {
      RefreshAmbientError(entry);
      return;
    }
    // The failure was given as OnResourceChanged(UNAVAILABLE), replacing the
    // entry's data error (DOES_NOT_EXIST, NACKED, RECEIVED_ERROR, TIMEOUT) for
    // its watchers while CSDS still shows that error. NOTES "Clearing errors":
    // "Never leave a watcher believing an error stands that the cache no
    // longer holds": the cache's error is theirs again. A REQUESTED entry has
    // none to give; its resource or its timer ends the wait.
    if (!entry.error.ok()) NotifyError(entry, entry.error);
  });
}

void XdsResourceCache::NotifyActiveServerError(const XdsAuthorityState& authority) {
  const Status& error = authority.active_server().channel_error;
  if (error.ok()) return;
  ForEachEntryOf(authority, [&](XdsCacheEntry& entry) { NotifyError(entry, error); });
}

void XdsResourceCache::CountResourceUpdates(XdsServerState& server, std::string_view type_name,
                                            uint64_t valid, uint64_t invalid) {
  if (valid == 0 && invalid == 0) return;
  auto it = server.updates.find(type_name);
  if (it == server.updates.end())
    it = server.updates.emplace(std::string(type_name), XdsServerState::UpdateCounters{}).first;
  it->second.valid += valid;
  it->second.invalid += invalid;
}

// --- Reads ---------------------------------------------------------------------

void XdsResourceCache::DumpGenericXdsConfigs(
    envoy::service::status::v3::ClientConfig& config) const {
  for (const auto& [type_url, by_name] : entries_) {
    for (const auto& [key, entry] : by_name) {
      auto* out = config.add_generic_xds_configs();
      out->set_type_url(type_url);
      out->set_name(key);
      out->set_client_status(
          static_cast<envoy::admin::v3::ClientResourceStatus>(static_cast<int>(entry->state)));
      if (entry->resource != nullptr) {
        out->set_version_info(entry->version);
        SetTimestamp(entry->last_updated, out->mutable_last_updated());
        auto* any = out->mutable_xds_config();
        any->set_type_url(type_url);
        any->set_value(entry->serialized);
      }
      if (!entry->error.ok()) {
        auto* failure = out->mutable_error_state();
        failure->set_details(entry->failed_details);
        failure->set_version_info(entry->failed_version);
        SetTimestamp(entry->failed_update_time, failure->mutable_last_update_attempt());
      }
    }
  }
}

namespace {

XdsResourceSnapshot SnapshotOf(const std::string& type_url, const std::string& key,
                               const XdsCacheEntry& entry, bool with_resource_json) {
  XdsResourceSnapshot out;
  out.type_url = type_url;
  out.name = key;
  out.authority = entry.name.authority;
  out.state = entry.state;
  out.has_resource = entry.resource != nullptr;
  if (out.has_resource && with_resource_json) {
    out.resource_json = entry.type.ResourceToJson(entry.resource);
  }
  out.version = entry.version;
  out.last_updated = entry.last_updated;
  out.error = entry.error;
  out.failed_version = entry.failed_version;
  out.last_update_attempt = entry.failed_update_time;
  out.watchers = entry.watchers.size();
  if (entry.source_priority != XdsAuthorityState::kNoServer) {
    out.server_uri = entry.authority.servers[entry.source_priority]->config.server_uri;
  }
  return out;
}

}  // namespace

std::vector<XdsResourceSnapshot> XdsResourceCache::Snapshot() const {
  std::vector<XdsResourceSnapshot> snapshot;
  for (const auto& [type_url, by_name] : entries_) {
    for (const auto& [key, entry] : by_name) {
      snapshot.push_back(SnapshotOf(type_url, key, *entry, /*with_resource_json=*/true));
    }
  }
  return snapshot;
}

std::optional<XdsResourceSnapshot> XdsResourceCache::Lookup(const XdsResourceType& type,
                                                            std::string_view key,
                                                            bool with_resource_json) const {
  auto type_it = entries_.find(type.type_url());
  if (type_it == entries_.end()) return std::nullopt;
  auto it = type_it->second.find(key);
  if (it == type_it->second.end()) return std::nullopt;
  return SnapshotOf(type_it->first, it->first, *it->second, with_resource_json);
}

XdsClientMetrics XdsResourceCache::Metrics() const {
  XdsClientMetrics metrics;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> gauges;
  for (const auto& [type_url, by_name] : entries_) {
    for (const auto& [key, entry] : by_name) {
      ++gauges[{entry->name.authority, std::string(entry->type.type_name()),
                std::string(CacheStateLabel(entry->state, entry->resource != nullptr))}];
    }
  }
  for (const auto& [labels, count] : gauges) {
    metrics.resources.push_back(
        {std::get<0>(labels), std::get<1>(labels), std::get<2>(labels), count});
  }
  for (const auto& [key, server] : servers_) {
    metrics.servers.push_back(
        {server->config.server_uri, server->connected, server->server_failures});
    for (const auto& [type_name, counters] : server->updates) {
      metrics.resource_updates.push_back(
          {server->config.server_uri, type_name, counters.valid, counters.invalid});
    }
  }
  return metrics;
}

}  // namespace uxds::xds_internal
