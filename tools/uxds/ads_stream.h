// AdsStream: one StreamAggregatedResources call of `uxds control-plane`
// (control_plane_ads.h describes the rules it follows).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "control_plane_ads.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "uxds/async_condition.h"
#include "uxds/service_registry.h"

namespace uxds::tool {

class AdsStream {
 public:
  AdsStream(AggregatedDiscoveryService& service, ServerCall& call);
  ~AdsStream();
  AdsStream(const AdsStream&) = delete;
  AdsStream& operator=(const AdsStream&) = delete;

  // Serves the call until the client half-closes or cancels it.
  Task<Status> Run();
  // A new snapshot is being served.
  void OnSnapshot() { wake_.NotifyAll(); }

 private:
  // What this stream has subscribed to, and what it was sent, for one type.
  struct Subscription {
    bool wildcard = false;
    std::set<std::string> names;
    // What the client holds of each resource, as last sent ("r" + bytes, or
    // "e" + code + message for a TP3 error): a resource is sent again only
    // when this changes. Kept for NACKed sends too: a NACKed resource is not
    // re-sent until it changes.
    std::map<std::string, std::string> sent;
    std::string last_nonce;  // of the latest response; "" before the first
    std::string last_version;
    bool answer_due = false;  // a request subscribed to a new name
  };

  Task<void> ReadRequests();
  // Applies one request; an error ends the stream.
  Status HandleRequest(const envoy::service::discovery::v3::DiscoveryRequest& request);
  void LogRequest(const envoy::service::discovery::v3::DiscoveryRequest& request) const;
  // One line when this side ends the stream (too many names): the peer and why.
  void LogStreamEnded(const Status& status) const;
  // The response owed to this subscription for the current snapshot, if any.
  std::optional<envoy::service::discovery::v3::DiscoveryResponse> ResponseFor(
      const std::string& type_url, Subscription& subscription);

  AggregatedDiscoveryService& service_;
  ServerCall& call_;
  AsyncCondition wake_;     // a request was read, or a new snapshot is served
  AsyncCondition drained_;  // the request queue has room again
  std::deque<envoy::service::discovery::v3::DiscoveryRequest> requests_;
  Status read_end_;  // set with reading_done_: why reading stopped
  bool reading_done_ = false;
  std::map<std::string, Subscription> subscriptions_;  // by type URL
};

}  // namespace uxds::tool
