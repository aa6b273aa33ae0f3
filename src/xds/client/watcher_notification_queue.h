// Watcher notifications are queued while the cache changes and delivered
// afterwards, on a later turn of the control loop, one at a time and in
// order: a watcher is never called from inside a cache update, nor from
// inside WatchResource()/CancelWatch() (DESIGN.md).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <variant>

#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "uxds/xds_resource_type.h"

namespace uxds::xds_internal {

// One WatchResource() call. CancelWatch() marks it cancelled, which drops
// the notifications still queued for it.
struct WatcherRegistration {
  std::shared_ptr<XdsResourceWatcherInterface> watcher;
  bool cancelled = false;
};

class WatcherNotificationQueue {
 public:
  // `node_id` is appended to every status a watcher gets (" (node ID:<id>)"),
  // as gRPC does, so errors can be matched with the control plane's logs.
  WatcherNotificationQueue(Loop& loop, std::string node_id);

  void ResourceChanged(const std::shared_ptr<WatcherRegistration>& registration,
                       XdsResourceData resource);
  void ResourceChanged(const std::shared_ptr<WatcherRegistration>& registration,
                       const Status& error);
  void AmbientError(const std::shared_ptr<WatcherRegistration>& registration, const Status& status);

  // Callbacks run between two yields to the loop.
  static constexpr size_t kNotificationsPerSlice = 256;
  // Delivers notifications until cancelled or Close()d.
  Task<void> Run();
  // An ADS stream pauses delivery while a response's ACK or NACK is on its
  // way, so the control plane hears the verdict before any watcher callback
  // runs (however slow the callbacks). Pause() returns the pause's ticket,
  // which Resume() ends. A notification waits only for the pauses open when
  // it was queued, not for later ones: a control plane that keeps sending
  // responses faster than their ACKs go out must not hold every callback
  // back for good.
  uint64_t Pause();
  void Resume(std::span<const uint64_t> tickets);
  // Drops what is queued; later notifications are dropped too.
  void Close();

 private:
  struct Notification {
    std::shared_ptr<WatcherRegistration> registration;
    enum class Kind { kResource, kError, kAmbient } kind;
    XdsResourceData resource;
    Status status;
    uint64_t gate = 0;  // waits while a pause with a ticket up to this is open
  };
  void Queue(Notification notification);
  bool Held(const Notification& notification) const {
    return !open_pauses_.empty() && *open_pauses_.begin() <= notification.gate;
  }
  Status WithNodeId(const Status& status) const;

  AsyncQueue<Notification> queue_;
  const std::string node_id_suffix_;
  Loop& loop_;
  uint64_t last_ticket_ = 0;
  std::set<uint64_t> open_pauses_;
  Event* resumed_ = nullptr;  // what Run() waits on while held
};

}  // namespace uxds::xds_internal
