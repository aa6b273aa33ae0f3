// XdsClientImpl's A71 fallback between the servers of an authority: when to
// go down the authority's server list, and when to come back up.
#include <cassert>

#include "xds/client/xds_client_impl.h"

namespace uxds::xds_internal {

void XdsClientImpl::OnServerFailure(XdsServerState& server, const Status& error) {
  if (shutdown_ == ShutdownState::kNone) {
    // A71: "There is a connectivity failure on the ADS stream" of the server
    // an authority uses. A higher-priority server failing again while a
    // fallback server is in use changes nothing for the authority.
    cache_.ForEachAuthority([&](XdsAuthorityState& authority) {
      if (&authority.active_server() == &server) MaybeFallBack(authority);
    });
  }
  // NOTES (A71): "If a lower-priority server is usable, watchers are not told
  // about the primary's failure": the authorities that fell back no longer
  // use `server`, so only the others' watchers hear of it.
  cache_.OnServerFailure(server, error);
}

bool XdsClientImpl::MaybeFallBack(XdsAuthorityState& authority) {
  // A71: "At least one watcher exists for a resource that is not cached." A
  // client that has everything cached keeps using it, however long the
  // server is down.
  if (!cache_.HasUncachedResource(authority)) return false;
  if (authority.active + 1 >= authority.servers.size()) return false;
  while (authority.active + 1 < authority.servers.size()) {
    ++authority.active;
    XdsServerState& next = authority.active_server();
    // A71: "establish a connection to the next xDS control plane ... Then
    // XdsClient will subscribe to all watched resources on that server." The
    // higher-priority servers keep their subscriptions and their retries.
    SubscribeAll(authority, next);
    // As gRPC C++: a server another authority already found failing is
    // passed over for the next one.
    if (next.channel_error.ok()) return true;
  }
  // Every server of the list is failing: the watchers hear the last one.
  cache_.NotifyActiveServerError(authority);
  return true;
}

void XdsClientImpl::OnServerResponding(XdsServerState& server) {
  // A71: "Once such a resource is received, the XdsClient will close
  // connections to the lower-priority server(s) and will use the resources
  // from the higher priority servers." NOTES: the first decodable response.
  cache_.ForEachAuthority([&](XdsAuthorityState& authority) {
    const size_t priority = authority.PriorityOf(server);
    if (priority < authority.active) SwitchBack(authority, priority);
  });
  cache_.OnServerResponding(server);
}

void XdsClientImpl::SwitchBack(XdsAuthorityState& authority, size_t priority) {
  assert(priority < authority.active);
  while (authority.active > priority) {
    XdsServerState& lower = authority.active_server();
    --authority.active;
    // A channel left without subscriptions closes its stream and connection.
    UnsubscribeAll(authority, lower);
  }
  // A57: the timers the lower-priority server started are its own; the
  // server in use times the names it has sent from now on.
  cache_.ForEachEntryOf(authority, [](XdsCacheEntry& entry) { entry.timer.Cancel(); });
  GetOrCreateChannel(authority.active_server()).StartResourceTimers();
}

void XdsClientImpl::SubscribeAll(XdsAuthorityState& authority, XdsServerState& server) {
  XdsServerChannel& channel = GetOrCreateChannel(server);
  cache_.ForEachEntryOf(
      authority, [&](XdsCacheEntry& entry) { channel.Subscribe(entry.type, entry.name.key); });
}

void XdsClientImpl::UnsubscribeAll(XdsAuthorityState& authority, XdsServerState& server) {
  auto it = channels_.find(server.config.Key());
  if (it == channels_.end()) return;
  XdsServerChannel& channel = *it->second;
  cache_.ForEachEntryOf(
      authority, [&](XdsCacheEntry& entry) { channel.Unsubscribe(entry.type, entry.name.key); });
}

}  // namespace uxds::xds_internal
