#include "lb/cluster_impl.h"

namespace uxds {

ClusterImplPicker::ClusterImplPicker(const std::vector<EndpointResource::DropCategory>& drops,
                                     std::shared_ptr<CallCounter> counter, uint32_t max_requests,
                                     std::shared_ptr<const Picker> child)
    : counter_(std::move(counter)),
      max_requests_(max_requests),
      child_(std::move(child)),
      // gRPC's texts for both kinds of drop.
      circuit_breaker_drop_(UnavailableError("circuit breaker drop")) {
  drops_.reserve(drops.size());
  for (const auto& d : drops) {
    drops_.push_back(
        Drop{d.requests_per_million, UnavailableError("EDS-configured drop: " + d.category)});
  }
}

PickResult ClusterImplPicker::Pick(const PickArgs& args) const {
  // A27: each category drops its share independently, in order.
  for (const Drop& d : drops_) {
    if (ThreadRandom() % 1000000 < d.requests_per_million) return PickResult::Drop(&d.status);
  }
  // A32: over max_requests the call is dropped, before the child picks.
  if (counter_->Load() >= static_cast<int64_t>(max_requests_)) {
    return PickResult::Drop(&circuit_breaker_drop_);
  }
  PickResult result = child_->Pick(args);
  if (result.kind == PickResult::Kind::kComplete) {
    if (!counter_->TryAcquire(max_requests_)) return PickResult::Drop(&circuit_breaker_drop_);
    result.call_counter = counter_.get();
  }
  return result;
}

}  // namespace uxds
