// XdsClientImpl: what the public XdsClient forwards to. Other layers of uxds
// (the CSDS service, fallback) reach it through XdsClient::impl().
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
#include "uxds/loop.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"
#include "xds/client/watcher_notification_queue.h"
#include "xds/client/xds_resource_cache.h"
#include "xds/client/xds_server_channel.h"

namespace uxds::xds_internal {

class XdsClientImpl {
 public:
  XdsClientImpl(Loop& loop, Bootstrap bootstrap, XdsClientOptions options);
  // Must follow Shutdown().
  ~XdsClientImpl();

  Task<void> Shutdown();
  void WatchResource(const XdsResourceType& type, std::string_view name,
                     std::shared_ptr<XdsResourceWatcherInterface> watcher);
  void CancelWatch(const XdsResourceType& type, std::string_view name,
                   const XdsResourceWatcherInterface* watcher);

  // A40: node, every cache entry, client_scope.
  envoy::service::status::v3::ClientConfig DumpClientConfig() const;
  std::vector<XdsResourceSnapshot> Snapshot() const { return cache_.Snapshot(); }
  XdsClientMetrics Metrics() const { return cache_.Metrics(); }

  Loop& loop() const { return loop_; }
  const Bootstrap& bootstrap() const { return bootstrap_; }
  const XdsClientOptions& options() const { return options_; }
  // The Node sent on each stream (and reported by CSDS).
  const envoy::config::core::v3::Node& node() const { return node_; }

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
  void FailWatch(const XdsResourceType& type, std::string_view name,
                 std::shared_ptr<XdsResourceWatcherInterface> watcher, Status error);
  XdsServerChannel& GetOrCreateChannel(XdsServerState& server);

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
  bool shut_down_ = false;
};

}  // namespace uxds::xds_internal
