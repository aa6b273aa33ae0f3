// cluster_impl (A27 drops, A32 circuit breaking, A42 load reporting): the
// top of a cluster's policy tree. Its picker drops a share of calls per
// drop category, fails calls over the cluster's max_requests, hands the
// rest to the priority policy's picker and, when the cluster reports load
// (LRS), counts each picked call in its locality and each drop.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lb/call_counter.h"
#include "lb/lb_policy.h"
#include "uxds/resources/endpoint.h"
#include "xds/lrs/load_stats.h"

namespace uxds {

// The load report counters a picker writes (all null/empty: no LRS).
struct ClusterLoadCounters {
  std::shared_ptr<ClusterLoadStats> cluster;
  // Per endpoint address, the stats of the locality it is in.
  std::vector<std::pair<std::string, std::shared_ptr<LocalityLoadStats>>> localities;
};

class ClusterImplPicker final : public Picker {
 public:
  ClusterImplPicker(const std::vector<EndpointResource::DropCategory>& drops,
                    std::shared_ptr<CallCounter> counter, uint32_t max_requests,
                    std::shared_ptr<const Picker> child, ClusterLoadCounters load = {});
  PickResult Pick(const PickArgs& args) const override;

 private:
  struct Drop {
    uint32_t requests_per_million;
    Status status;
    std::shared_ptr<ShardedCounter> reported;  // LRS: dropped_requests of the category
  };
  // A42: the picked endpoint's locality, found by its address. A table
  // sorted by the address's hash: no allocation, no lock, O(log n).
  struct LocalityEntry {
    size_t hash;
    std::string address;
    std::shared_ptr<LocalityLoadStats> stats;
  };
  LocalityLoadStats* LocalityOf(std::string_view address) const;

  std::vector<Drop> drops_;
  std::shared_ptr<CallCounter> counter_;
  uint32_t max_requests_;
  std::shared_ptr<const Picker> child_;
  Status circuit_breaker_drop_;
  std::shared_ptr<ClusterLoadStats> load_;
  std::vector<LocalityEntry> localities_;
};

}  // namespace uxds
