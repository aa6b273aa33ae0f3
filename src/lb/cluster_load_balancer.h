// ClusterLoadBalancer: the LB policy tree of one cluster, fed with its
// Cluster and ClusterLoadAssignment, publishing pickers into a PickerSlot.
// Control thread only, except picker_slot() which application threads
// pick from (through a PickScope).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lb/call_counter.h"
#include "lb/cluster_impl.h"
#include "lb/lb_policy.h"
#include "lb/priority.h"
#include "lb/subchannel.h"
#include "uxds/channel.h"
#include "uxds/loop.h"
#include "uxds/resources/cluster.h"
#include "uxds/resources/endpoint.h"
#include "xds/lrs/load_stats.h"

namespace uxds {

class ClusterLoadBalancer {
 public:
  using StateObserver = std::function<void(ConnectivityState state, const Status& status)>;

  // `options` gives the local limits (ring size cap) and timers; the
  // Cluster's own settings are applied on top at each Update().
  ClusterLoadBalancer(Loop& loop, std::shared_ptr<SubchannelPool> pool,
                      LbPolicyOptions options = {});
  // Destroy before the pool's Shutdown(); no PickScope may be open.
  ~ClusterLoadBalancer();

  // A new Cluster and/or endpoints. A change of LB policy settings rebuilds
  // the tree (subchannels are kept by the pool as long as a policy uses
  // them); otherwise the endpoints are passed down.
  void Update(const ClusterResource& cluster, const EndpointResource& endpoints);
  // A42: from the next Update() on, count calls per locality and drops
  // into these load reports; all null stops counting.
  struct LoadReporting {
    // Drops (A27 categories, A32 circuit breaking).
    std::shared_ptr<ClusterLoadStats> drops;
    // Per priority of the endpoints, whose localities its calls count in:
    // an aggregate cluster's priorities belong to its leaf clusters, and
    // each leaf reports its own load (A37). Missing or null: not counted.
    std::vector<std::shared_ptr<ClusterLoadStats>> priorities;
  };
  void SetLoadStats(LoadReporting load);

  PickerSlot& picker_slot() { return slot_; }
  ConnectivityState state() const { return state_; }
  const Status& status() const { return status_; }
  // Called on every report (control thread).
  void SetStateObserver(StateObserver observer) { observer_ = std::move(observer); }
  // In-flight calls counted against max_requests.
  int64_t calls_in_flight() const { return counter_->Load(); }
  // The counter this cluster's picks count calls on (PickResult::call_counter):
  // a call holds it, so ending the call stays safe after the cluster is gone.
  std::shared_ptr<CallCounter> call_counter() const { return counter_; }
  const PriorityPolicy* priority() const { return priority_.get(); }

  // A27: usable endpoints (HEALTHY / UNKNOWN) of each priority, as the
  // policies see them; an endpoint's first address is used (A61's
  // additional addresses are not connected to).
  static std::vector<LocalityList> ToPriorities(const EndpointResource& endpoints);

 private:
  void BuildTree(const LbPolicyOptions& options);
  void OnReport(ConnectivityState state, const Status& status,
                std::shared_ptr<const Picker> picker);
  void ScheduleReclaim();
  ClusterLoadCounters LoadCounters() const;

  Loop& loop_;
  std::shared_ptr<SubchannelPool> pool_;
  LbPolicyOptions base_options_;
  LbPolicyOptions tree_options_;
  ClusterResource::LbPolicy lb_config_;
  bool have_tree_ = false;
  std::unique_ptr<PriorityPolicy> priority_;
  std::shared_ptr<CallCounter> counter_ = std::make_shared<CallCounter>();
  uint32_t max_requests_ = ClusterResource::kDefaultMaxConcurrentRequests;
  std::vector<EndpointResource::DropCategory> drops_;
  LoadReporting load_;
  // Each endpoint address with the stats of its locality, for the load
  // report.
  std::vector<std::pair<std::string, std::shared_ptr<LocalityLoadStats>>> endpoint_localities_;
  PickerSlot slot_;
  Timer reclaim_timer_;
  ConnectivityState state_ = ConnectivityState::kIdle;
  Status status_;
  StateObserver observer_;
};

}  // namespace uxds
