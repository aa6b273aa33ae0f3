// XdsClientImpl: what the public XdsClient forwards to. Other layers of uxds
// (the CSDS service, fallback) reach it through ImplOf(XdsClient&).
//
// Loop-thread only, like XdsClient.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/config/core/v3/base.pb.h"
#include "envoy/service/status/v3/csds.pb.h"
#include "uxds/bootstrap.h"
#include "uxds/load_reporting.h"
#include "uxds/loop.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"
#include "xds/client/watcher_notification_queue.h"
#include "xds/client/xds_resource_cache.h"
#include "xds/client/xds_server_channel.h"

namespace uxds {
class LoadReportingClient;
}  // namespace uxds

namespace uxds::xds_internal {

class XdsClientImpl final : private XdsServerEvents {
 public:
  XdsClientImpl(Loop& loop, Bootstrap bootstrap, XdsClientOptions options);
  // Must follow a completed Shutdown(); see DestroyAfterShutdown().
  ~XdsClientImpl();

  // Idempotent: every caller returns once the one teardown is over.
  Task<void> Shutdown();
  bool shut_down() const { return shutdown_ == ShutdownState::kDone; }
  // What ~XdsClient does: silences every watcher now and frees `self` at
  // once if the shutdown is done; otherwise finishes it in a task on the
  // loop that then frees `self`. Callers of Shutdown() still queued to
  // resume return safely either way (their join owns its wake).
  static void DestroyAfterShutdown(std::unique_ptr<XdsClientImpl> self);
  void WatchResource(const XdsResourceType& type, std::string_view name,
                     std::shared_ptr<XdsResourceWatcherInterface> watcher);
  void CancelWatch(const XdsResourceType& type, std::string_view name,
                   const XdsResourceWatcherInterface* watcher);

  // A40: node, every cache entry, client_scope.
  envoy::service::status::v3::ClientConfig DumpClientConfig() const;
  std::vector<XdsResourceSnapshot> Snapshot() const { return cache_.Snapshot(); }
  std::optional<XdsResourceSnapshot> Lookup(const XdsResourceType& type, std::string_view name,
                                            bool with_resource_json) const;
  XdsClientMetrics Metrics() const { return cache_.Metrics(); }

  Loop& loop() const { return loop_; }
  const Bootstrap& bootstrap() const { return bootstrap_; }
  const XdsClientOptions& options() const { return options_; }
  // The Node sent on each stream (and reported by CSDS).
  const envoy::config::core::v3::Node& node() const { return node_; }
  // The LRS streams of every channel on this client: one per LRS server,
  // as gRPC's XdsClient has one LrsClient. Made on first use with the
  // options of that first caller; nullptr once Shutdown() has begun.
  LoadReportingClient* load_reporting(const LoadReportingOptions& options);

 private:
  // A watch that subscribes nothing (invalid name, unknown authority): its
  // one notification is all there is of it.
  struct FailedWatch {
    const XdsResourceType* type;
    std::string name;  // as given to WatchResource()
    // Held by the queued notification only: once that is delivered (or
    // dropped) nothing is left to cancel, so failed watches never pile up
    // when callers do not cancel them.
    std::weak_ptr<WatcherRegistration> registration;
  };
  Task<void> TearDown();
  void FailWatch(const XdsResourceType& type, std::string_view name,
                 std::shared_ptr<XdsResourceWatcherInterface> watcher, Status error);
  XdsServerChannel& GetOrCreateChannel(XdsServerState& server);

  // A71 fallback (xds_client_fallback.cc).
  void OnServerFailure(XdsServerState& server, const Status& error) override;
  void OnServerResponding(XdsServerState& server) override;
  // Falls back to the next servers of the authority when a watched resource
  // is not cached; true if it did.
  bool MaybeFallBack(XdsAuthorityState& authority);
  // Uses servers[priority] again and stops using the ones after it.
  void SwitchBack(XdsAuthorityState& authority, size_t priority);
  // (Un)subscribes every watched name of the authority on one of its servers.
  void SubscribeAll(XdsAuthorityState& authority, XdsServerState& server);
  void UnsubscribeAll(XdsAuthorityState& authority, XdsServerState& server);

  Loop& loop_;
  const Bootstrap bootstrap_;
  const XdsClientOptions options_;
  envoy::config::core::v3::Node node_;
  WatcherNotificationQueue notifications_;
  XdsResourceCache cache_;
  // Resource types watched so far, by type URL: one type object per URL.
  std::map<std::string, const XdsResourceType*, std::less<>> types_;
  std::map<std::string, std::unique_ptr<XdsServerChannel>, std::less<>> channels_;  // by Key()
  // Watches that failed at once, until their notification is delivered;
  // CancelWatch() must still silence them before that.
  std::vector<FailedWatch> failed_watches_;
  TaskGroup tasks_;  // the channels' Run() and the notification delivery
  std::unique_ptr<LoadReportingClient> load_reporting_;
  enum class ShutdownState { kNone, kRunning, kDone };
  ShutdownState shutdown_ = ShutdownState::kNone;
  // Runs TearDown(): every Shutdown() caller joins it, and a join is not cut
  // short by cancellation, so no caller goes on (and maybe frees the client)
  // before the teardown is over.
  TaskGroup shutdown_tasks_;
};

XdsClientImpl& ImplOf(XdsClient& client);

}  // namespace uxds::xds_internal
