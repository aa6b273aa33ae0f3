// XdsResourceCache: the one owner of every cache entry transition (A88).
//
// Each event (a valid or invalid resource, a TP3 error, an LDS/CDS deletion,
// a resource timer, a server going unhealthy or healthy again) is one method
// here. It changes the entry and queues exactly the watcher notifications A88
// prescribes for it, so watchers, the CSDS dump (A40) and the metrics (A78),
// which are all read from the same entries, never disagree.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/service/status/v3/csds.pb.h"
#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/xds_client.h"
#include "uxds/xds_resource_type.h"
#include "xds/client/watcher_notification_queue.h"
#include "xds/client/xds_resource_name.h"

namespace uxds::xds_internal {

// What the cache knows about one xDS server: its connectivity as watchers see
// it (A57) and its A78 counters. Lives as long as the client.
struct XdsServerState {
  explicit XdsServerState(XdsServerConfig c) : config(std::move(c)) {}

  struct UpdateCounters {
    uint64_t valid = 0;
    uint64_t invalid = 0;
  };

  const XdsServerConfig config;
  // Not OK while the server is failing: the last ADS stream ended without a
  // response, or no connection could be made (A57). Cleared by a response.
  Status channel_error;
  // A78 grpc.xds_client.connected: set when the first stream starts, cleared
  // by a failure, set again by the next response.
  bool connected = false;
  uint64_t server_failures = 0;                                // A78 grpc.xds_client.server_failure
  std::map<std::string, UpdateCounters, std::less<>> updates;  // by type name
};

// A71: the servers of one authority in bootstrap order (servers[0] is the
// primary) and how far down that list the client has fallen back. Every
// server of servers[0..active] has an ADS channel subscribed to every watched
// resource of the authority, so the higher-priority ones keep being retried;
// servers[active] is the one whose data is used. Lives as long as the client.
struct XdsAuthorityState {
  static constexpr size_t kNoServer = static_cast<size_t>(-1);

  std::string name;  // the xdstp authority, or kOldStyleAuthority
  std::vector<XdsServerState*> servers;
  size_t active = 0;

  XdsServerState& active_server() const { return *servers[active]; }
  // The server's index in `servers`, or kNoServer.
  size_t PriorityOf(const XdsServerState& server) const;
};

struct XdsCacheEntry {
  XdsCacheEntry(Loop& loop, const XdsResourceType& t, XdsResourceName n, XdsAuthorityState& a)
      : type(t), name(std::move(n)), authority(a), timer(loop) {}

  const XdsResourceType& type;
  const XdsResourceName name;
  XdsAuthorityState& authority;  // A47: the name's authority
  // The server in use for the entry (A71: its authority's active server):
  // its connectivity is the watchers' ambient error, its features apply.
  XdsServerState& server() const { return authority.active_server(); }
  // A71: the entry takes data (resources, errors, deletions) from the server
  // its authority uses, whichever server set it before.
  bool TakesDataFrom(const XdsServerState& server) const;

  XdsCacheState state = XdsCacheState::kRequested;
  // The resource in use and what it came with; null if none.
  XdsResourceData resource;
  std::string serialized;  // raw bytes, for CSDS (A40: "expose the xDS config as is")
  // The name of `serialized` came from a Resource wrapper, not from the bytes.
  bool named_by_wrapper = false;
  // The server whose decode context turned `serialized` into `resource`
  // (XdsDecodeContext: a Cluster's lrs_server `self` is that server).
  const XdsServerState* decoded_from = nullptr;
  std::string version;
  std::chrono::system_clock::time_point last_updated{};
  // A88: "the most recent error seen": what the watchers were told (without
  // the node ID), the CSDS details and the version and time it came with.
  Status error;
  std::string failed_details;
  std::string failed_version;
  std::chrono::system_clock::time_point failed_update_time{};
  // The last version that failed validation and why: a control plane that
  // re-sends it byte for byte is answered without decoding it again (#9).
  struct RejectedVersion {
    std::string serialized;
    bool named_by_wrapper = false;
    const XdsServerState* decoded_from = nullptr;
    std::string details;
  };
  std::optional<RejectedVersion> rejected;

  std::vector<std::shared_ptr<WatcherRegistration>> watchers;
  // The ambient error the watchers were last given (OK: none standing), so
  // that a cleared error can be cleared for them too (A88: "The error
  // condition is considered to be cleared when ... OnAmbientError() is
  // invoked again with an OK status").
  Status delivered_ambient_error;
  Timer timer;  // the resource timer (A57)
  // The priority (index in authority.servers) of the server whose response
  // or resource timer last set the entry's state; kNoServer while REQUESTED.
  size_t source_priority = XdsAuthorityState::kNoServer;
  // The last response (XdsResourceCache::NextResponseStamp) that spoke of
  // the entry: a response marks the names it holds here instead of copying
  // 100 000 of them into a set it must then free.
  uint64_t response_stamp = 0;
};

class XdsResourceCache {
 public:
  struct TimerOptions {
    std::chrono::milliseconds does_not_exist_timeout;
    std::chrono::milliseconds transient_error_timeout;
  };

  XdsResourceCache(Loop& loop, WatcherNotificationQueue& notifications, TimerOptions timers);
  ~XdsResourceCache();

  XdsServerState& GetOrCreateServer(const XdsServerConfig& config);
  // The authority's state; `servers` (bootstrap order, not empty) are used
  // when it is created.
  XdsAuthorityState& GetOrCreateAuthority(const std::string& name,
                                          const std::vector<XdsServerConfig>& servers);
  template <typename F>
  void ForEachAuthority(F f) {
    for (auto& [name, authority] : authorities_) f(*authority);
  }
  template <typename F>
  void ForEachEntryOf(const XdsAuthorityState& authority, F f) {
    for (auto& [type_url, by_name] : entries_) {
      for (auto& [key, entry] : by_name) {
        if (&entry->authority == &authority) f(*entry);
      }
    }
  }
  // A71: true if a watched resource of the authority is not cached (still
  // REQUESTED: received resources and ones known not to exist, NACKed or
  // timed out are cached).
  bool HasUncachedResource(const XdsAuthorityState& authority);

  // --- Watches -------------------------------------------------------------
  // Adds a watcher; a new entry starts REQUESTED. The watcher is first told
  // what the entry already holds: the resource, then the entry's error, then
  // the server's error (A88 "New Watchers Started After Ambient Errors").
  struct AddWatcherResult {
    XdsCacheEntry* entry;
    bool new_entry;
  };
  AddWatcherResult AddWatcher(const XdsResourceType& type, const XdsResourceName& name,
                              XdsAuthorityState& authority,
                              std::shared_ptr<WatcherRegistration> registration);
  // Removes a watcher (marking it cancelled). If that was the entry's last
  // watcher, the entry is gone and its authority is returned: the name must
  // be unsubscribed from the authority's servers. Otherwise nullptr.
  XdsAuthorityState* RemoveWatcher(const XdsResourceType& type, std::string_view key,
                                   const XdsResourceWatcherInterface* watcher);
  XdsCacheEntry* Find(const XdsResourceType& type, std::string_view key);

  // --- Events from an ADS stream (A88, TP3, A46) ------------------------------
  // A valid resource. An identical copy of the cached one notifies no
  // OnResourceChanged, only clears a standing ambient error.
  // `named_by_wrapper`: the name came from a Resource wrapper.
  void OnValidResource(XdsCacheEntry& entry, XdsResourceData resource, std::string serialized,
                       bool named_by_wrapper, const std::string& version,
                       std::chrono::system_clock::time_point now);
  // A resource that failed validation (NACK). A data error; the same
  // rejection again notifies nobody.
  void OnInvalidResource(XdsCacheEntry& entry, const std::string& details, std::string serialized,
                         bool named_by_wrapper, const std::string& version,
                         std::chrono::system_clock::time_point now);
  // The bytes of the entry's cached resource, or of its last rejected
  // version, again from the server that decoded them (#9): the verdict they
  // got before, with the new version and time for CSDS.
  void OnAcceptedVersionResent(XdsCacheEntry& entry, const std::string& version,
                               std::chrono::system_clock::time_point now);
  void OnRejectedVersionResent(XdsCacheEntry& entry, const std::string& version,
                               std::chrono::system_clock::time_point now);
  // TP3: the server's error for a resource. NOT_FOUND and PERMISSION_DENIED
  // are data errors, every other code transient.
  void OnResourceError(XdsCacheEntry& entry, const Status& error, const std::string& version,
                       std::chrono::system_clock::time_point now);
  // An LDS/CDS resource missing from a response. Applies only to an entry that
  // holds a resource it has not already marked deleted, and not to one in
  // RECEIVED_ERROR (TP3 errors are sent once). A data error.
  void OnResourceMissing(XdsCacheEntry& entry, const std::string& version,
                         std::chrono::system_clock::time_point now);

  // --- Resource timers (A57, A88) ---------------------------------------------
  // Called when a request naming the entry has been written on a connected
  // stream. Starts the timer, with its full duration, if the entry is still
  // REQUESTED (never for a cached resource) and the timer is not running.
  void MaybeStartResourceTimer(XdsCacheEntry& entry);
  // The stream ended: timers of the server's entries stop until the next
  // stream has sent the subscriptions.
  void StopResourceTimers(const XdsServerState& server);

  // --- Server connectivity (A57, A88) -------------------------------------------
  // A transient error for every entry of the server: OnAmbientError for cached
  // resources, OnResourceChanged for the others. Cache states do not change.
  void OnServerFailure(XdsServerState& server, const Status& error);
  // The server answered: a standing failure is cleared for the watchers, and
  // the watchers of an entry without a resource get its error again.
  void OnServerResponding(XdsServerState& server);
  // A71: every server of the authority down to its active one has failed:
  // its watchers get the active server's error as OnServerFailure gives it.
  void NotifyActiveServerError(const XdsAuthorityState& authority);

  // A number no response applied before got: see XdsCacheEntry::response_stamp.
  uint64_t NextResponseStamp() { return ++last_response_stamp_; }

  void CountResourceUpdates(XdsServerState& server, std::string_view type_name, uint64_t valid,
                            uint64_t invalid);

  // --- Reads ------------------------------------------------------------------
  // A40: generic_xds_configs of every entry, ordered by type URL then name.
  void DumpGenericXdsConfigs(envoy::service::status::v3::ClientConfig& config) const;
  std::vector<XdsResourceSnapshot> Snapshot() const;
  // One entry by its cache key (the normalized name), without rendering the
  // resource's JSON unless asked.
  std::optional<XdsResourceSnapshot> Lookup(const XdsResourceType& type, std::string_view key,
                                            bool with_resource_json) const;
  XdsClientMetrics Metrics() const;

 private:
  // A88 "Handling Data Errors": with fail_on_data_errors the cached resource
  // is dropped; then OnAmbientError if a resource is still cached, else
  // OnResourceChanged.
  void ApplyDataError(XdsCacheEntry& entry, bool drop_cached_resource);
  // ACKED with `version` at `now`: no error stands any more.
  void MarkAccepted(XdsCacheEntry& entry, const std::string& version,
                    std::chrono::system_clock::time_point now);
  void NotifyError(XdsCacheEntry& entry, const Status& error);
  void NotifyAmbient(XdsCacheEntry& entry, const Status& status);
  // The ambient error the entry's watchers should hold now.
  Status StandingAmbientError(const XdsCacheEntry& entry) const;
  void RefreshAmbientError(XdsCacheEntry& entry);
  void OnResourceTimerFired(XdsCacheEntry& entry);
  template <typename F>
  void ForEachEntryOf(const XdsServerState& server, F f);

  Loop& loop_;
  WatcherNotificationQueue& notifications_;
  const TimerOptions timers_;
  // type URL -> resource key -> entry (unique_ptr: timers point at entries).
  std::map<std::string, std::map<std::string, std::unique_ptr<XdsCacheEntry>, std::less<>>,
           std::less<>>
      entries_;
  std::map<std::string, std::unique_ptr<XdsServerState>, std::less<>> servers_;         // by Key()
  std::map<std::string, std::unique_ptr<XdsAuthorityState>, std::less<>> authorities_;  // by name
  uint64_t last_response_stamp_ = 0;
};

// A78/A88 grpc.xds.cache_state label of an entry.
std::string_view CacheStateLabel(XdsCacheState state, bool has_resource);

}  // namespace uxds::xds_internal
