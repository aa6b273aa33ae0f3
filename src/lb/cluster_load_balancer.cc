#include "lb/cluster_load_balancer.h"

#include "lb/cluster_impl.h"
#include "lb/pick_first.h"
#include "lb/ring_hash_policy.h"
#include "lb/round_robin.h"
#include "lb/weighted_target.h"

namespace uxds {

namespace {
// Retired pickers are reclaimed this long after the first of a batch, and
// again as long as some remain: readers hold a scope for the length of one
// pick, so one look almost always frees them. Reports in the meantime
// (a config touching many clusters, subchannels changing state) share the
// look, and so its membarrier: the clusters' timers that fire in one turn
// cost one scan of the readers (PickerSlot keeps the bound it proved).
constexpr std::chrono::milliseconds kReclaimDelay{1};
// Reports that retire this many pickers before the timer fires reclaim at
// once, so memory stays bounded whatever the report rate; counted from
// what a scan left waiting (readers stuck in a scope), so such readers do
// not bring back one scan per report.
constexpr size_t kReclaimBatch = 64;
}  // namespace

ClusterLoadBalancer::ClusterLoadBalancer(Loop& loop, std::shared_ptr<SubchannelPool> pool,
                                         LbPolicyOptions options)
    : loop_(loop),
      pool_(std::move(pool)),
      base_options_(std::move(options)),
      reclaim_timer_(loop),
      reclaim_at_(kReclaimBatch) {}

ClusterLoadBalancer::~ClusterLoadBalancer() {
  reclaim_timer_.Cancel();
  priority_.reset();
  // ~PickerSlot frees the pickers (and their subchannel references).
}

std::vector<LocalityList> ClusterLoadBalancer::ToPriorities(const EndpointResource& endpoints) {
  std::vector<LocalityList> priorities;
  priorities.reserve(endpoints.priorities.size());
  for (const auto& priority : endpoints.priorities) {
    LocalityList list;
    for (const auto& locality : priority.localities) {
      WeightedLocality l;
      l.name = locality.name.ToString();
      l.weight = locality.weight;
      for (const auto& e : locality.endpoints) {
        if (!e.usable() || e.addresses.empty()) continue;
        auto address = SocketAddress::Parse(e.addresses.front());
        if (!address.ok()) continue;  // the decoder only keeps parseable addresses
        l.endpoints.push_back(WeightedEndpoint{*address, e.hash_key, e.weight, nullptr});
      }
      // A27: a locality with no usable endpoint takes no traffic.
      if (!l.endpoints.empty()) list.push_back(std::move(l));
    }
    priorities.push_back(std::move(list));
  }
  return priorities;
}

void ClusterLoadBalancer::Update(const ClusterResource& cluster, const EndpointResource& endpoints,
                                 std::shared_ptr<const UpstreamTls> tls) {
  auto own = std::make_shared<ClusterImplConfig>();
  own->tls = std::move(tls);
  own->drops = endpoints.drop_overloads;
  own->max_requests = cluster.max_concurrent_requests;
  own->counter = counter_;
  Update(cluster, endpoints, std::move(own));
}

void ClusterLoadBalancer::Update(const ClusterResource& cluster, const EndpointResource& endpoints,
                                 std::shared_ptr<const ClusterImplConfig> own,
                                 std::vector<std::shared_ptr<const ClusterImplConfig>> by_priority,
                                 std::vector<PriorityChildConfig> children) {
  own_ = std::move(own);
  by_priority_ = std::move(by_priority);
  std::vector<std::pair<std::string, std::shared_ptr<LocalityLoadStats>>> endpoint_localities;
  for (size_t p = 0; p < endpoints.priorities.size(); ++p) {
    const ClusterImplConfig& config = ConfigOf(static_cast<int>(p));
    const std::shared_ptr<ClusterLoadStats>& stats = config.load;
    if (stats == nullptr) continue;
    for (const auto& locality : endpoints.priorities[p].localities) {
      std::shared_ptr<LocalityLoadStats> locality_stats = stats->Locality(locality.name);
      for (const auto& e : locality.endpoints) {
        if (e.addresses.empty()) continue;
        // The subchannel's key: the address as it spells it, and the
        // priority's security.
        auto address = SocketAddress::Parse(e.addresses.front());
        if (address.ok()) {
          endpoint_localities.emplace_back(
              SubchannelPool::KeyOf(address->ToString(), config.tls.get()), locality_stats);
        }
      }
    }
  }
  if (endpoint_localities != endpoint_localities_) {
    endpoint_localities_ = std::move(endpoint_localities);
    locality_table_ = nullptr;
  }
  if (!have_tree_ || !(cluster.lb_policy == lb_config_)) {
    lb_config_ = cluster.lb_policy;
    LbPolicyOptions options = base_options_;
    options.ring_sizes.min_ring_size = lb_config_.min_ring_size;
    options.ring_sizes.max_ring_size = lb_config_.max_ring_size;
    options.request_hash_header = lb_config_.request_hash_header;
    BuildTree(options);
  }
  std::vector<LocalityList> priorities = ToPriorities(endpoints);
  // A29: each priority's endpoints are secured as its cluster says (an
  // aggregate cluster's leaves may differ).
  for (size_t p = 0; p < priorities.size(); ++p) {
    const std::shared_ptr<const UpstreamTls>& tls = ConfigOf(static_cast<int>(p)).tls;
    if (tls == nullptr) continue;
    for (WeightedLocality& locality : priorities[p]) {
      for (WeightedEndpoint& e : locality.endpoints) e.tls = tls;
    }
  }
  priority_->Update(priorities, std::move(children));
}

const ClusterImplConfig& ClusterLoadBalancer::ConfigOf(int priority) const {
  if (priority >= 0 && static_cast<size_t>(priority) < by_priority_.size() &&
      by_priority_[priority] != nullptr) {
    return *by_priority_[priority];
  }
  return *own_;
}

ClusterLoadCounters ClusterLoadBalancer::LoadCounters(const ClusterImplConfig& config) {
  ClusterLoadCounters counters;
  counters.drops = config.load;
  if (endpoint_localities_.empty()) return counters;
  // The table depends on the endpoints and on which of them have a
  // subchannel: rebuilt only when either changed, not per report.
  if (locality_table_ == nullptr || table_pool_version_ != pool_->version()) {
    std::vector<std::pair<uint32_t, std::shared_ptr<LocalityLoadStats>>> entries;
    entries.reserve(endpoint_localities_.size());
    for (const auto& [key, stats] : endpoint_localities_) {
      // Endpoints the policies have made a subchannel for: only those can
      // be picked (a priority not started yet has none; its first report
      // comes with a new picker, and its subchannels with a new version).
      if (const Subchannel* s = pool_->Find(key)) entries.emplace_back(s->endpoint().index, stats);
    }
    locality_table_ = std::make_shared<const LocalityTable>(std::move(entries));
    table_pool_version_ = pool_->version();
  }
  counters.localities = locality_table_;
  return counters;
}

void ClusterLoadBalancer::BuildTree(const LbPolicyOptions& options) {
  tree_options_ = options;
  have_tree_ = true;
  SubchannelPool& pool = *pool_;
  const LbPolicyOptions& tree = tree_options_;
  using EndpointPicking = ClusterResource::LbPolicy::EndpointPicking;
  const EndpointPicking picking = lb_config_.endpoint_picking;
  const bool shuffle = lb_config_.shuffle_address_list;
  const uint32_t choice_count = lb_config_.choice_count;
  // The policy that picks an endpoint among a list (of one locality, or of
  // a whole priority).
  auto endpoint_policy = [&pool, &tree, picking, shuffle,
                          choice_count](LbPolicy::Reporter r) -> std::unique_ptr<LbPolicy> {
    switch (picking) {
      case EndpointPicking::kRingHash:
        return std::make_unique<RingHashPolicy>(pool, tree, std::move(r));
      case EndpointPicking::kPickFirst:
        // A62 over EDS: re-resolution asks nothing of an EDS cluster.
        return std::make_unique<PickFirstPolicy>(pool, tree.request_reresolution, std::move(r),
                                                 shuffle);
      case EndpointPicking::kLeastRequest:
        return RoundRobinPolicy::LeastRequest(pool, std::move(r), choice_count);
      case EndpointPicking::kRoundRobin:
        break;
    }
    return std::make_unique<RoundRobinPolicy>(pool, std::move(r));
  };
  PriorityPolicy::ChildFactory child_factory;
  if (lb_config_.weighted_locality) {
    child_factory = [endpoint_policy,
                     &loop = loop_](LbPolicy::Reporter r) -> std::unique_ptr<LbPolicy> {
      return std::make_unique<WeightedTargetPolicy>(loop, endpoint_policy, std::move(r));
    };
  } else {
    child_factory = endpoint_policy;
  }
  // A37: a LOGICAL_DNS cluster's priority is pick_first over its addresses,
  // whatever the cluster's LB policy.
  PriorityPolicy::ChildFactory pick_first =
      [&pool, &tree](LbPolicy::Reporter r) -> std::unique_ptr<LbPolicy> {
    return std::make_unique<PickFirstPolicy>(pool, tree.request_reresolution, std::move(r));
  };
  priority_.reset();
  priority_ = std::make_unique<PriorityPolicy>(
      loop_, tree_options_, std::move(child_factory),
      [this](ConnectivityState state, const Status& status, std::shared_ptr<const Picker> picker) {
        OnReport(state, status, std::move(picker));
      },
      std::move(pick_first));
}

Status ClusterLoadBalancer::PublishedStatus() const {
  PickScope scope(slot_);
  const auto* picker = static_cast<const ClusterImplPicker*>(scope.picker());
  return picker != nullptr ? picker->report() : Status();
}

void ClusterLoadBalancer::OnReport(ConnectivityState state, const Status& status,
                                   std::shared_ptr<const Picker> picker) {
  state_ = state;
  status_ = status;
  // A37: cluster_impl sits between the priority policy and the priority's
  // child, with the config of the cluster the priority comes from. The
  // priority policy hands every pick to the child of its current priority
  // (the one it reports), so wrapping that child's picker here puts one
  // cluster_impl on the pick path, as a plain cluster has.
  const ClusterImplConfig& config = ConfigOf(priority_->current_priority());
  slot_.Publish(new ClusterImplPicker(config, std::move(picker), LoadCounters(config), status));
  ++pickers_published_;
  ScheduleReclaim();
  if (observer_) observer_(state, status);
}

void ClusterLoadBalancer::ScheduleReclaim() {
  if (slot_.retired() >= reclaim_at_) Reclaim();
  if (slot_.retired() == 0 || reclaim_timer_.pending()) return;
  reclaim_timer_.Start(kReclaimDelay, [this] {
    Reclaim();
    ScheduleReclaim();
  });
}

void ClusterLoadBalancer::Reclaim() { reclaim_at_ = slot_.Reclaim() + kReclaimBatch; }

}  // namespace uxds
