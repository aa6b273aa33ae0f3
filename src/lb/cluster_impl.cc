#include "lb/cluster_impl.h"

#include <algorithm>
#include <functional>

namespace uxds {

ClusterImplPicker::ClusterImplPicker(const std::vector<EndpointResource::DropCategory>& drops,
                                     std::shared_ptr<CallCounter> counter, uint32_t max_requests,
                                     std::shared_ptr<const Picker> child, ClusterLoadCounters load)
    : counter_(std::move(counter)),
      max_requests_(max_requests),
      child_(std::move(child)),
      // gRPC's texts for both kinds of drop.
      circuit_breaker_drop_(UnavailableError("circuit breaker drop")),
      load_(std::move(load.cluster)) {
  drops_.reserve(drops.size());
  for (const auto& d : drops) {
    drops_.push_back(Drop{d.requests_per_million,
                          UnavailableError("EDS-configured drop: " + d.category),
                          load_ != nullptr ? load_->DropCategory(d.category) : nullptr});
  }
  if (load_ == nullptr) return;
  localities_.reserve(load.localities.size());
  for (auto& [address, stats] : load.localities) {
    const size_t hash = std::hash<std::string_view>{}(address);
    localities_.push_back(LocalityEntry{hash, std::move(address), std::move(stats)});
  }
  std::sort(localities_.begin(), localities_.end(),
            [](const LocalityEntry& a, const LocalityEntry& b) { return a.hash < b.hash; });
}

LocalityLoadStats* ClusterImplPicker::LocalityOf(std::string_view address) const {
  const size_t hash = std::hash<std::string_view>{}(address);
  auto it = std::lower_bound(localities_.begin(), localities_.end(), hash,
                             [](const LocalityEntry& e, size_t h) { return e.hash < h; });
  for (; it != localities_.end() && it->hash == hash; ++it) {
    if (it->address == address) return it->stats.get();
  }
  return nullptr;
}

PickResult ClusterImplPicker::Pick(const PickArgs& args) const {
  // A27: each category drops its share independently, in order.
  for (const Drop& d : drops_) {
    if (ThreadRandom() % 1000000 < d.requests_per_million) {
      if (d.reported != nullptr) d.reported->Add();
      return PickResult::Drop(&d.status);
    }
  }
  // A32: over max_requests the call is dropped, before the child picks.
  // gRPC reports these drops without a category.
  if (counter_->Load() >= static_cast<int64_t>(max_requests_)) {
    if (load_ != nullptr) load_->uncategorized_drops().Add();
    return PickResult::Drop(&circuit_breaker_drop_);
  }
  PickResult result = child_->Pick(args);
  if (result.kind == PickResult::Kind::kComplete) {
    if (!counter_->TryAcquire(max_requests_)) {
      if (load_ != nullptr) load_->uncategorized_drops().Add();
      return PickResult::Drop(&circuit_breaker_drop_);
    }
    result.call_counter = counter_.get();
    if (load_ != nullptr) {
      // A42: the call counts in the locality of the endpoint the child
      // picked, from now until the channel reports its end (CallFinished).
      result.locality_stats = LocalityOf(result.endpoint->address);
      if (result.locality_stats != nullptr) result.locality_stats->CallStarted();
    }
  }
  return result;
}

void CallFinished(const PickResult& picked, bool ok) {
  if (picked.call_counter != nullptr) picked.call_counter->Release();
  if (picked.locality_stats != nullptr) picked.locality_stats->CallFinished(ok);
}

void CallNotStarted(const PickResult& picked) {
  if (picked.call_counter != nullptr) picked.call_counter->Release();
  if (picked.locality_stats != nullptr) picked.locality_stats->CallNotStarted();
}

}  // namespace uxds
