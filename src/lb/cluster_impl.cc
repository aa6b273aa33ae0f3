#include "lb/cluster_impl.h"

#include <algorithm>

namespace uxds {

ClusterImplPicker::ClusterImplPicker(const ClusterImplConfig& config,
                                     std::shared_ptr<const Picker> child, ClusterLoadCounters load,
                                     Status report)
    : counter_(config.counter),
      max_requests_(config.max_requests),
      child_(std::move(child)),
      // gRPC's texts for both kinds of drop.
      circuit_breaker_drop_(UnavailableError("circuit breaker drop")),
      drop_stats_(std::move(load.drops)),
      localities_(std::move(load.localities)),
      report_(std::move(report)) {
  drops_.reserve(config.drops.size());
  for (const auto& d : config.drops) {
    drops_.push_back(
        Drop{d.requests_per_million, UnavailableError("EDS-configured drop: " + d.category),
             drop_stats_ != nullptr ? drop_stats_->DropCategory(d.category) : nullptr});
  }
  if (localities_ != nullptr && !localities_->by_index().empty()) {
    first_index_ = localities_->first_index();
    locality_count_ = static_cast<uint32_t>(localities_->by_index().size());
    locality_by_index_ = localities_->by_index().data();
  }
}

LocalityTable::LocalityTable(
    std::vector<std::pair<uint32_t, std::shared_ptr<LocalityLoadStats>>> entries) {
  if (entries.empty()) return;
  // Endpoint indices are dense per pool, and a cluster's endpoints were
  // mostly made together: the span they cover is short.
  auto [lowest, highest] =
      std::minmax_element(entries.begin(), entries.end(),
                          [](const auto& a, const auto& b) { return a.first < b.first; });
  first_index_ = lowest->first;
  by_index_.assign(size_t{highest->first} - first_index_ + 1, nullptr);
  owned_.reserve(entries.size());
  for (auto& [index, stats] : entries) {
    LocalityLoadStats*& slot = by_index_[index - first_index_];
    // An address listed twice counts where it was listed first.
    if (slot == nullptr) slot = stats.get();
    owned_.push_back(std::move(stats));
  }
}

PickResult ClusterImplPicker::Pick(const PickArgs& args) const {
  // One named result, returned on every path: the child builds its result
  // in the caller's, never copied. A copy of a struct just written field
  // by field reads it back in wider loads than were stored, and stalls on
  // store forwarding at every level of the picker tree.
  const Status* dropped = Admit();
  PickResult result = dropped != nullptr ? PickResult::Drop(dropped) : child_->Pick(args);
  if (dropped != nullptr) return result;
  if (result.kind != PickResult::Kind::kComplete) {
    counter_->Release();
    return result;
  }
  result.call_counter = counter_.get();
  if (locality_count_ != 0) {
    // A42: the call counts in the locality of the endpoint the child
    // picked, from now until the channel reports its end (CallFinished).
    result.locality_stats = LocalityOf(*result.endpoint);
    if (result.locality_stats != nullptr) result.locality_stats->CallStarted();
  }
  return result;
}

const Status* ClusterImplPicker::Admit() const {
  // A27: each category drops its share independently, in order.
  for (const Drop& d : drops_) {
    if (ThreadRandom() % 1000000 < d.requests_per_million) {
      if (d.reported != nullptr) d.reported->Add();
      return &d.status;
    }
  }
  // A32: over max_requests the call is dropped, before the child picks.
  // gRPC reports these drops without a category. The check takes the slot
  // in the same step (one sum of the counter's shards, one add); a pick
  // the child does not complete gives it back.
  if (!counter_->TryAcquire(max_requests_)) {
    if (drop_stats_ != nullptr) drop_stats_->uncategorized_drops().Add();
    return &circuit_breaker_drop_;
  }
  return nullptr;
}

}  // namespace uxds
