#include "xds/client/watcher_notification_queue.h"

#include <utility>

namespace uxds::xds_internal {

WatcherNotificationQueue::WatcherNotificationQueue(Loop& loop, std::string node_id)
    : queue_(loop), node_id_suffix_(" (node ID:" + node_id + ")"), loop_(loop) {}

uint64_t WatcherNotificationQueue::Pause() {
  open_pauses_.insert(++last_ticket_);
  return last_ticket_;
}

void WatcherNotificationQueue::Resume(std::span<const uint64_t> tickets) {
  for (uint64_t ticket : tickets) open_pauses_.erase(ticket);
  if (resumed_ != nullptr) resumed_->Set();
}

void WatcherNotificationQueue::Queue(Notification notification) {
  // Everything the open pauses' responses produced is queued by now.
  notification.gate = open_pauses_.empty() ? 0 : last_ticket_;
  queue_.Send(std::move(notification));
}

Status WatcherNotificationQueue::WithNodeId(const Status& status) const {
  if (status.ok()) return status;
  return Status(status.code(), status.message() + node_id_suffix_);
}

void WatcherNotificationQueue::ResourceChanged(
    const std::shared_ptr<WatcherRegistration>& registration, XdsResourceData resource) {
  Queue({registration, Notification::Kind::kResource, std::move(resource), Status()});
}

void WatcherNotificationQueue::ResourceChanged(
    const std::shared_ptr<WatcherRegistration>& registration, const Status& error) {
  Queue({registration, Notification::Kind::kError, nullptr, WithNodeId(error)});
}

void WatcherNotificationQueue::AmbientError(
    const std::shared_ptr<WatcherRegistration>& registration, const Status& status) {
  Queue({registration, Notification::Kind::kAmbient, nullptr, WithNodeId(status)});
}

Task<void> WatcherNotificationQueue::Run() {
  size_t delivered_in_slice = 0;
  for (;;) {
    // Thousands of callbacks in a row would hold the loop: let it run what
    // is due between slices.
    if (++delivered_in_slice > kNotificationsPerSlice) {
      delivered_in_slice = 0;
      co_await loop_.Yield();
    }
    std::optional<Notification> notification = co_await queue_.Receive();
    if (!notification.has_value()) co_return;
    while (Held(*notification)) {
      Event resumed(loop_);
      resumed_ = &resumed;
      const Status waited = co_await resumed.Wait();
      resumed_ = nullptr;
      if (!waited.ok()) co_return;
    }
    WatcherRegistration& registration = *notification->registration;
    if (registration.cancelled) continue;
    // The watcher may cancel itself (or others) or start new watches from its
    // callback: those only queue further notifications behind this one.
    switch (notification->kind) {
      case Notification::Kind::kResource:
        registration.watcher->OnGenericResourceChanged(std::move(notification->resource));
        break;
      case Notification::Kind::kError:
        registration.watcher->OnGenericResourceChanged(std::move(notification->status));
        break;
      case Notification::Kind::kAmbient:
        registration.watcher->OnAmbientError(std::move(notification->status));
        break;
    }
  }
}

void WatcherNotificationQueue::Close() {
  queue_.Close();
  while (queue_.TryReceive().has_value()) {
  }
}

}  // namespace uxds::xds_internal
