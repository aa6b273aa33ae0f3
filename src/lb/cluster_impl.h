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
#include "lb/upstream_tls.h"
#include "uxds/resources/cluster.h"
#include "uxds/resources/endpoint.h"
#include "xds/lrs/load_stats.h"

namespace uxds {

// A42: per Endpoint::index, the stats of the endpoint's locality. Built on
// the control thread when the endpoints (or the pool's subchannels) change,
// and shared by every picker made until then: a report makes a picker
// without walking the endpoints.
class LocalityTable {
 public:
  // (Endpoint::index, stats) pairs; an index listed twice counts where it
  // was listed first.
  explicit LocalityTable(
      std::vector<std::pair<uint32_t, std::shared_ptr<LocalityLoadStats>>> entries);
  LocalityTable(const LocalityTable&) = delete;
  LocalityTable& operator=(const LocalityTable&) = delete;

  uint32_t first_index() const { return first_index_; }
  // Indexed by Endpoint::index - first_index() (null: not counted).
  const std::vector<LocalityLoadStats*>& by_index() const { return by_index_; }

 private:
  uint32_t first_index_ = 0;
  std::vector<LocalityLoadStats*> by_index_;
  // Keeps what by_index_ points to alive.
  std::vector<std::shared_ptr<LocalityLoadStats>> owned_;
};

// The load report counters a picker writes (all null: no LRS).
struct ClusterLoadCounters {
  // Where drops count (null: drops are not reported).
  std::shared_ptr<ClusterLoadStats> drops;
  // Where picked calls count, by endpoint (null: not counted). An aggregate
  // cluster's endpoints count in the localities of their leaf clusters
  // (A37).
  std::shared_ptr<const LocalityTable> localities;
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
  // A29: how connections to the cluster's endpoints are secured (null:
  // plaintext).
  std::shared_ptr<const UpstreamTls> tls;
};

class ClusterImplPicker final : public Picker {
 public:
  // `load.drops` is where drops count; `config.load` is not looked at here.
  // `report`: the status the cluster's tree reported with `child`.
  ClusterImplPicker(const ClusterImplConfig& config, std::shared_ptr<const Picker> child,
                    ClusterLoadCounters load = {}, Status report = Status());
  PickResult Pick(const PickArgs& args) const override;
  // The tree's last failure as of this picker (a connection error while it
  // retries), for the deadline message of a call that waited on any loop.
  const Status& report() const { return report_; }

 private:
  // A27's drops and A32's max_requests: the status of a dropped call (its
  // A32 slot not taken), else null with the call's slot taken.
  const Status* Admit() const;
  struct Drop {
    uint32_t requests_per_million;
    Status status;
    std::shared_ptr<ShardedCounter> reported;  // LRS: dropped_requests of the category
  };
  // A42: the picked endpoint's locality: one subtraction and one load, by
  // the index the endpoint carries (no hash, no search on the data path).
  LocalityLoadStats* LocalityOf(const Endpoint& endpoint) const {
    const uint32_t slot = endpoint.index - first_index_;
    return slot < locality_count_ ? locality_by_index_[slot] : nullptr;
  }

  std::vector<Drop> drops_;
  std::shared_ptr<CallCounter> counter_;
  uint32_t max_requests_;
  std::shared_ptr<const Picker> child_;
  Status circuit_breaker_drop_;
  std::shared_ptr<ClusterLoadStats> drop_stats_;
  // The table's array, copied out of it so that a pick reads it without
  // going through the table (0 entries: calls are not counted).
  uint32_t first_index_ = 0;
  uint32_t locality_count_ = 0;
  LocalityLoadStats* const* locality_by_index_ = nullptr;
  std::shared_ptr<const LocalityTable> localities_;
  Status report_;
};

}  // namespace uxds
