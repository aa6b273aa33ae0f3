// XdsClient: ADS streams to the xDS servers of a bootstrap, a cache of the
// resources being watched, and watchers notified as gRFC A88 says.
//
//   auto client = XdsClient::Create(loop, bootstrap);
//   (*client)->WatchResource(ClusterResourceType::Get(), "c1", watcher);
//   ...
//   co_await (*client)->Shutdown();
//
// Threads: an XdsClient lives on one Loop (the control thread). Every method
// except loop() and bootstrap() must be called on that loop's thread; other
// threads hop there with loop.Post() (or LoopThread::RunSync()). Watcher
// callbacks run on that thread too.
//
// What the client does (the details cite the specs in src/xds/client/):
//  - A47: a resource named "xdstp://<authority>/<type>/<id>" is fetched from
//    the authority's xds_servers (the top-level ones if it lists none); any
//    other name from the top-level xds_servers.
//  - One ADS stream per xDS server multiplexes every resource type; it closes
//    when the last watched name of that server is cancelled.
//  - A46: a response with some invalid resources is NACKed, and its valid
//    resources are used.
//  - A57: resource timers run only while a stream is up; failed streams are
//    retried with exponential backoff.
//  - A88 / TP3: cache entry states, data errors vs. transient errors,
//    fail_on_data_errors, resource_timer_is_transient_error, resource_errors.
//  - A40 / A78: a CSDS dump and metrics read from the same cache.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "uxds/xds_resource_type.h"

namespace uxds {

class XdsClient;
namespace xds_internal {
class XdsClientImpl;
// For other layers of uxds (the CSDS service, fallback); declared with the
// implementation in src/xds/client/xds_client_impl.h.
XdsClientImpl& ImplOf(XdsClient& client);
}  // namespace xds_internal

struct XdsClientOptions {
  // xDS protocol: "Knowing when a requested resource does not exist".
  static constexpr std::chrono::milliseconds kDefaultResourceDoesNotExistTimeout{15'000};
  // A88: the timer with the resource_timer_is_transient_error server feature.
  static constexpr std::chrono::milliseconds kDefaultResourceTransientErrorTimeout{30'000};
  // A57 / gRPC connection backoff for ADS stream retries.
  static constexpr std::chrono::milliseconds kDefaultBackoffInitial{1'000};
  static constexpr double kDefaultBackoffMultiplier = 1.6;
  static constexpr double kDefaultBackoffJitter = 0.2;
  static constexpr std::chrono::milliseconds kDefaultBackoffMax{120'000};
  static constexpr std::chrono::milliseconds kDefaultConnectTimeout{20'000};
  // What gRPC's xDS clients use on their ADS connection: gRPC C++ sets
  // GRPC_ARG_KEEPALIVE_TIME_MS to 5 minutes on the xDS channel
  // (src/core/xds/grpc/xds_transport_grpc.cc) and keeps the 20 s default
  // keepalive timeout; gRPC servers accept PINGs that often by default.
  static constexpr std::chrono::milliseconds kDefaultKeepaliveTime{300'000};
  static constexpr std::chrono::milliseconds kDefaultKeepaliveTimeout{20'000};
  // gRPC's xDS clients keep gRPC's default receive limit on the ADS channel:
  // gRPC C++ sets no GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH there
  // (src/core/xds/grpc/xds_transport_grpc.cc sets only the keepalive time),
  // so GRPC_DEFAULT_MAX_RECV_MESSAGE_LENGTH, 4 MiB, applies. A mesh whose
  // full LDS or CDS response is larger must raise it.
  static constexpr size_t kDefaultMaxAdsResponseSize = 4 << 20;

  std::chrono::milliseconds resource_does_not_exist_timeout = kDefaultResourceDoesNotExistTimeout;
  std::chrono::milliseconds resource_transient_error_timeout =
      kDefaultResourceTransientErrorTimeout;
  std::chrono::milliseconds backoff_initial = kDefaultBackoffInitial;
  double backoff_multiplier = kDefaultBackoffMultiplier;
  // Each delay is multiplied by a random factor in [1 - jitter, 1 + jitter].
  double backoff_jitter = kDefaultBackoffJitter;
  std::chrono::milliseconds backoff_max = kDefaultBackoffMax;
  // TCP connect + TLS handshake + HTTP/2 SETTINGS of a connection to an xDS
  // server.
  std::chrono::milliseconds connect_timeout = kDefaultConnectTimeout;
  // HTTP/2 PING on the ADS connection every keepalive_time (0: never); one
  // not acknowledged within keepalive_timeout closes the connection, so a
  // control plane that hangs or a path that silently drops everything
  // (a half-open connection) ends the stream like any other failure (A57).
  std::chrono::milliseconds keepalive_time = kDefaultKeepaliveTime;
  std::chrono::milliseconds keepalive_timeout = kDefaultKeepaliveTimeout;
  // Largest ADS response accepted, in bytes (the gRPC message, before
  // decoding). A larger one ends the stream (RESOURCE_EXHAUSTED) without
  // resetting the reconnection backoff.
  size_t max_ads_response_size = kDefaultMaxAdsResponseSize;

  // Node.user_agent_name / user_agent_version sent to the servers.
  std::string user_agent_name = "uxds";
  std::string user_agent_version;  // empty: the library's version
  // A40/A71: ClientConfig.client_scope in the CSDS dump (the data-plane
  // target this client serves); also the grpc.target of the metrics.
  std::string client_scope;
};

// A88 cache entry states. The values are CSDS's ClientResourceStatus.
enum class XdsCacheState : int {
  kRequested = 1,      // subscribed, nothing received yet
  kDoesNotExist = 2,   // timer fired, or LDS/CDS deletion
  kAcked = 3,          // valid resource
  kNacked = 4,         // the last version received was invalid
  kReceivedError = 5,  // TP3 error from the server
  kTimeout = 6,        // timer fired with resource_timer_is_transient_error
};
// "REQUESTED", "DOES_NOT_EXIST", ...
std::string_view XdsCacheStateName(XdsCacheState state);

// One cache entry, as CSDS and `uxds watch` show it.
struct XdsResourceSnapshot {
  std::string type_url;
  std::string name;
  std::string authority;  // A78 label: the xdstp authority, "#old" for other names
  XdsCacheState state = XdsCacheState::kRequested;
  // The resource in use (absent after a dropped data error or before any).
  bool has_resource = false;
  std::string resource_json;  // XdsResourceType::ResourceToJson
  std::string version;        // version_info the resource came with
  std::chrono::system_clock::time_point last_updated{};
  // The entry's last error (NACK, TP3 error, deletion, timer) and the version
  // and time it came with; OK when none. Without the node ID suffix.
  Status error;
  std::string failed_version;
  std::chrono::system_clock::time_point last_update_attempt{};
  size_t watchers = 0;
  // The xDS server whose response (or resource timer) set the state: the
  // authority's primary, or a fallback server (A71). Empty while REQUESTED.
  std::string server_uri;
};

// A78 metrics as counted so far (labels without grpc.target, which is
// XdsClientOptions::client_scope).
struct XdsClientMetrics {
  // grpc.xds_client.resources: entries per authority, type, cache state.
  struct ResourceGauge {
    std::string authority;      // "#old" for non-xdstp names
    std::string resource_type;  // type name, e.g. "envoy.config.cluster.v3.Cluster"
    std::string cache_state;    // A78/A88: requested, does_not_exist, ..., timeout
    uint64_t count = 0;
  };
  // grpc.xds_client.connected and grpc.xds_client.server_failure.
  struct ServerStats {
    std::string server_uri;
    bool connected = false;
    uint64_t server_failures = 0;
  };
  // grpc.xds_client.resource_updates_valid / _invalid.
  struct ResourceUpdateCounters {
    std::string server_uri;
    std::string resource_type;
    uint64_t valid = 0;
    uint64_t invalid = 0;
  };
  std::vector<ResourceGauge> resources;
  std::vector<ServerStats> servers;
  std::vector<ResourceUpdateCounters> resource_updates;

  // Lookups (0 / nullptr when absent).
  uint64_t ResourceCount(std::string_view authority, std::string_view resource_type,
                         std::string_view cache_state) const;
  const ServerStats* FindServer(std::string_view server_uri) const;
  uint64_t ValidUpdates(std::string_view server_uri, std::string_view resource_type) const;
  uint64_t InvalidUpdates(std::string_view server_uri, std::string_view resource_type) const;
};

class XdsClient {
 public:
  // Checks the bootstrap (Bootstrap::Validate) and the options; connects
  // nothing until the first watch.
  static StatusOr<std::unique_ptr<XdsClient>> Create(Loop& loop, Bootstrap bootstrap,
                                                     XdsClientOptions options = {});
  // Call on the client's loop thread. After a completed Shutdown() it frees
  // everything before it returns, even while other callers of Shutdown()
  // are still queued to resume (they return without touching the client).
  // Without one (or during one) it is still safe: no watcher callback runs
  // after it returns, and the shutdown finishes in a task on the loop, which
  // then frees the rest; that needs the loop to keep running (a Loop being
  // destroyed finishes its tasks first).
  ~XdsClient();
  XdsClient(const XdsClient&) = delete;
  XdsClient& operator=(const XdsClient&) = delete;

  // Closes every stream and connection, stops timers, drops queued watcher
  // notifications, and waits for the client's tasks. Watches are dropped;
  // later WatchResource() calls are ignored.
  Task<void> Shutdown();
  // Shutdown() in a task on the client's loop, then destroys the client.
  static void ShutdownAndDestroy(std::unique_ptr<XdsClient> client);

  // Starts watching resource `name` of `type`. Several watchers of one
  // resource share one subscription. A watcher of a resource already cached
  // first gets the resource, then the standing error (A88: "in that order").
  // An invalid name (not UTF-8, or an invalid xdstp:// name) is reported to
  // the watcher as OnResourceChanged(INVALID_ARGUMENT), an authority missing
  // from the bootstrap as OnResourceChanged(FAILED_PRECONDITION); nothing is
  // subscribed. `type` must outlive the client; two types with one type URL
  // may not be used in one client. The watcher's resource type is the
  // type's: anything else is a compile error.
  template <typename T>
  void WatchResource(const XdsResourceTypeImpl<T>& type, std::string_view name,
                     std::shared_ptr<XdsResourceWatcher<std::type_identity_t<T>>> watcher) {
    WatchAnyResource(type, name, std::move(watcher));
  }
  // The same for a watcher that takes resources of any type untyped.
  void WatchUntypedResource(const XdsResourceType& type, std::string_view name,
                            std::shared_ptr<XdsUntypedResourceWatcher> watcher) {
    WatchAnyResource(type, name, std::move(watcher));
  }
  // Stops one watch; the last watcher of a name unsubscribes it. No callback
  // reaches `watcher` after this returns.
  void CancelWatch(const XdsResourceType& type, std::string_view name,
                   const XdsResourceWatcherInterface* watcher);

  // A40: every cache entry as a serialized envoy.service.status.v3.ClientConfig
  // (node, generic_xds_configs, client_scope).
  std::string DumpClientConfig() const;
  // Every cache entry, ordered by type URL then name.
  std::vector<XdsResourceSnapshot> Snapshot() const;
  // The cache entry of one watched name, as WatchResource() was given it
  // (an xdstp:// name in any spelling of its context parameters), in
  // O(log n) and without the resource's JSON unless asked; nullopt if the
  // name is not watched or invalid. What a watcher callback uses to learn
  // the entry's version.
  std::optional<XdsResourceSnapshot> Lookup(const XdsResourceType& type, std::string_view name,
                                            bool with_resource_json = false) const;
  // A78 metrics.
  XdsClientMetrics GetMetrics() const;

  Loop& loop() const;
  const Bootstrap& bootstrap() const;

 private:
  friend xds_internal::XdsClientImpl& xds_internal::ImplOf(XdsClient& client);
  explicit XdsClient(std::unique_ptr<xds_internal::XdsClientImpl> impl);
  void WatchAnyResource(const XdsResourceType& type, std::string_view name,
                        std::shared_ptr<XdsResourceWatcherInterface> watcher);
  std::unique_ptr<xds_internal::XdsClientImpl> impl_;
};

}  // namespace uxds
