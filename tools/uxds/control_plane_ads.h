// The Aggregated Discovery Service (State of the World) of `uxds control-plane`
// on a uxds HTTP/2 server: every stream is answered from the current
// Snapshot, and pushed the changes of each new one.
//
// Follows the xDS protocol's rules for a SotW server:
//  - LDS / CDS responses carry every subscribed resource (all of them for a
//    wildcard subscription: a first request that names none); RDS / EDS
//    responses carry only the resources that changed for this stream;
//  - every response has a fresh nonce and the snapshot's version_info;
//  - a request is an ACK or NACK of the response whose nonce it echoes; one
//    with an older nonce is logged and otherwise ignored (a response it has
//    not seen yet is on its way);
//  - a NACKed resource is not sent again until it changes;
//  - a newly subscribed name is answered at once; an unsubscribed one is
//    forgotten, so subscribing to it again sends it again;
//  - TP3: names in DIR/errors.json go out in resource_errors instead.
// Every request is logged as a JSON line ({"event":"request",...}).
//
// Loop-thread only: Publish() is called on the server's loop.
#pragma once

#include <cstdint>
#include <memory>
#include <set>

#include "control_plane_snapshot.h"
#include "json_line_printer.h"
#include "uxds/loop.h"
#include "uxds/service_registry.h"

namespace uxds::tool {

inline constexpr char kStreamAggregatedResourcesPath[] =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

// Bounds on what one stream may ask for: a request naming more resources
// ends the stream with RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxNamesPerRequest = 10000;
// Requests read ahead of the ones being answered.
inline constexpr size_t kMaxQueuedRequests = 16;
// A DiscoveryRequest larger than this ends the stream (the server's message
// size limit).
inline constexpr size_t kMaxRequestBytes = 4u << 20;

class AdsStream;

class AggregatedDiscoveryService {
 public:
  explicit AggregatedDiscoveryService(JsonLinePrinter& printer);
  ~AggregatedDiscoveryService();
  AggregatedDiscoveryService(const AggregatedDiscoveryService&) = delete;
  AggregatedDiscoveryService& operator=(const AggregatedDiscoveryService&) = delete;

  // Registers StreamAggregatedResources; `this` must outlive the server.
  void Register(ServiceRegistry& registry);
  // Serves `snapshot` from now on and pushes it to every open stream.
  void Publish(std::shared_ptr<const Snapshot> snapshot);

  const std::shared_ptr<const Snapshot>& snapshot() const { return snapshot_; }
  std::string NextNonce() { return std::to_string(++last_nonce_); }
  JsonLinePrinter& printer() { return printer_; }

 private:
  friend class AdsStream;

  JsonLinePrinter& printer_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::set<AdsStream*> streams_;
  uint64_t last_nonce_ = 0;
};

}  // namespace uxds::tool
