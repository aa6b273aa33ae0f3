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
  // them); otherwise the endpoints are passed down. The cluster's own drops
  // (of `endpoints`) and max_requests apply, counted on this balancer's
  // call counter, without load reporting; the endpoints are secured by
  // `tls` (null: plaintext).
  void Update(const ClusterResource& cluster, const EndpointResource& endpoints,
              std::shared_ptr<const UpstreamTls> tls = nullptr);
  // The same with the cluster_impl config given: picks that go to priority
  // p are subject to by_priority[p] (A37: an aggregate cluster's priorities
  // belong to its leaf clusters, each with its own drops, circuit breaker
  // and load report); `own` applies to priorities by_priority leaves out
  // (or null) and while there is no priority to pick from. `children`
  // names each priority's child and its kind (A37; by position when empty).
  void Update(const ClusterResource& cluster, const EndpointResource& endpoints,
              std::shared_ptr<const ClusterImplConfig> own,
              std::vector<std::shared_ptr<const ClusterImplConfig>> by_priority = {},
              std::vector<PriorityChildConfig> children = {});

  // The tree's current priority exits IDLE (its IDLE pickers ask for this
  // themselves on the first pick).
  void ExitIdle() {
    if (priority_ != nullptr) priority_->ExitIdle();
  }

  PickerSlot& picker_slot() { return slot_; }
  ConnectivityState state() const { return state_; }
  const Status& status() const { return status_; }
  // Any thread: status() as of the last picker published (every picker of
  // the slot is a ClusterImplPicker, which carries it).
  Status PublishedStatus() const;
  // Called on every report (control thread).
  void SetStateObserver(StateObserver observer) { observer_ = std::move(observer); }
  // In-flight calls counted against the cluster's own max_requests.
  int64_t calls_in_flight() const { return own_->counter->Load(); }
  const PriorityPolicy* priority() const { return priority_.get(); }
  // Pickers published so far (one per report of the tree).
  uint64_t pickers_published() const { return pickers_published_; }

  // A27: usable endpoints (HEALTHY / UNKNOWN) of each priority, as the
  // policies see them; an endpoint's first address is used (A61's
  // additional addresses are not connected to).
  static std::vector<LocalityList> ToPriorities(const EndpointResource& endpoints);

 private:
  void BuildTree(const LbPolicyOptions& options);
  void OnReport(ConnectivityState state, const Status& status,
                std::shared_ptr<const Picker> picker);
  // After a Publish(): reclaims now if the batch is full, else makes sure
  // the reclaim timer runs.
  void ScheduleReclaim();
  void Reclaim();
  ClusterLoadCounters LoadCounters(const ClusterImplConfig& config);
  const ClusterImplConfig& ConfigOf(int priority) const;

  Loop& loop_;
  std::shared_ptr<SubchannelPool> pool_;
  LbPolicyOptions base_options_;
  LbPolicyOptions tree_options_;
  ClusterResource::LbPolicy lb_config_;
  bool have_tree_ = false;
  std::unique_ptr<PriorityPolicy> priority_;
  // The counter of the two-argument Update().
  const std::shared_ptr<CallCounter> counter_ = CallCounter::Create();
  std::shared_ptr<const ClusterImplConfig> own_ = std::make_shared<ClusterImplConfig>(
      ClusterImplConfig{.drops = {},
                        .max_requests = ClusterResource::kDefaultMaxConcurrentRequests,
                        .counter = counter_,
                        .load = nullptr,
                        .tls = nullptr});
  std::vector<std::shared_ptr<const ClusterImplConfig>> by_priority_;
  // Each endpoint's subchannel key (SubchannelPool::KeyOf) with the stats
  // of its locality (in the load report of its priority's cluster).
  std::vector<std::pair<std::string, std::shared_ptr<LocalityLoadStats>>> endpoint_localities_;
  // A42: endpoint_localities_ by Endpoint::index, for the pickers; made for
  // the pool as it was at table_pool_version_ (null: to be made).
  std::shared_ptr<const LocalityTable> locality_table_;
  uint64_t table_pool_version_ = 0;
  PickerSlot slot_;
  Timer reclaim_timer_;
  // ScheduleReclaim() reclaims at once when this many pickers are retired.
  size_t reclaim_at_ = 0;
  uint64_t pickers_published_ = 0;
  ConnectivityState state_ = ConnectivityState::kIdle;
  Status status_;
  StateObserver observer_;
};

}  // namespace uxds
