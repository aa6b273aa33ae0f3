// cluster_impl (A27 drops, A32 circuit breaking, A42 load reporting): the
// top of a cluster's policy tree. Its picker drops a share of calls per
// drop category, fails calls over the cluster's max_requests, hands the
// rest to the priority policy's picker and, when the cluster reports load
// (LRS), counts each picked call in its locality and each drop.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lb/call_counter.h"
#include "lb/lb_policy.h"
#include "uxds/resources/cluster.h"
#include "uxds/resources/endpoint.h"
#include "xds/lrs/load_stats.h"

namespace uxds {

// The load report counters a picker writes (all null/empty: no LRS).
struct ClusterLoadCounters {
  // Where drops count (null: drops are not reported).
  std::shared_ptr<ClusterLoadStats> drops;
  // Per Endpoint::index, the stats of the endpoint's locality. An aggregate
  // cluster's endpoints count in the localities of their leaf clusters (A37).
  std::vector<std::pair<uint32_t, std::shared_ptr<LocalityLoadStats>>> localities;
};

// A37 xds_cluster_impl: what the picks of one cluster are subject to. An
// aggregate cluster's priorities each carry the config of the leaf cluster
// they come from.
struct ClusterImplConfig {
  // A27: the EDS drop_overloads of the cluster's endpoints.
  std::vector<EndpointResource::DropCategory> drops;
  // A32: the cluster's max_requests (1024 when the Cluster sets none).
  uint32_t max_requests = ClusterResource::kDefaultMaxConcurrentRequests;
  // A37: shared by everything that uses the same cluster.
  std::shared_ptr<CallCounter> counter;
  // A42: where the cluster's calls and drops are reported (null: no LRS).
  std::shared_ptr<ClusterLoadStats> load;
};

class ClusterImplPicker final : public Picker {
 public:
  // `load.drops` is where drops count; `config.load` is not looked at here.
  ClusterImplPicker(const ClusterImplConfig& config, std::shared_ptr<const Picker> child,
                    ClusterLoadCounters load = {});
  PickResult Pick(const PickArgs& args) const override;

 private:
  struct Drop {
    uint32_t requests_per_million;
    Status status;
    std::shared_ptr<ShardedCounter> reported;  // LRS: dropped_requests of the category
  };
  // A42: the picked endpoint's locality: one subtraction and one load, by
  // the index the endpoint carries (no hash, no search on the data path).
  LocalityLoadStats* LocalityOf(const Endpoint& endpoint) const {
    const uint32_t slot = endpoint.index - first_index_;
    return slot < locality_by_index_.size() ? locality_by_index_[slot] : nullptr;
  }

  std::vector<Drop> drops_;
  std::shared_ptr<CallCounter> counter_;
  uint32_t max_requests_;
  std::shared_ptr<const Picker> child_;
  Status circuit_breaker_drop_;
  std::shared_ptr<ClusterLoadStats> drop_stats_;
  // Indexed by Endpoint::index - first_index_ (null: not counted).
  uint32_t first_index_ = 0;
  std::vector<LocalityLoadStats*> locality_by_index_;
  // Keeps what locality_by_index_ points to alive.
  std::vector<std::shared_ptr<LocalityLoadStats>> localities_;
};

}  // namespace uxds
