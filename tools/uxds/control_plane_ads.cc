#include "control_plane_ads.h"

#include "ads_stream.h"

namespace uxds::tool {

AggregatedDiscoveryService::AggregatedDiscoveryService(JsonLinePrinter& printer)
    : printer_(printer), snapshot_(std::make_shared<Snapshot>()) {}

AggregatedDiscoveryService::~AggregatedDiscoveryService() = default;

void AggregatedDiscoveryService::Register(ServiceRegistry& registry) {
  registry.Register(kStreamAggregatedResourcesPath, [this](ServerCall& call) -> Task<Status> {
    // The stream lives in this coroutine's frame for as long as the call.
    return [](AggregatedDiscoveryService& service, ServerCall& c) -> Task<Status> {
      AdsStream stream(service, c);
      co_return co_await stream.Run();
    }(*this, call);
  });
}

void AggregatedDiscoveryService::Publish(std::shared_ptr<const Snapshot> snapshot) {
  snapshot_ = std::move(snapshot);
  for (AdsStream* stream : streams_) stream->OnSnapshot();
}

}  // namespace uxds::tool
