// The ring_hash LB policy (A42, A76) for one priority: every endpoint of
// every locality on one ring, weighted by locality weight x endpoint weight.
// Connects lazily (on picks), except that while it reports CONNECTING or
// TRANSIENT_FAILURE it keeps one connection attempt going (A42).
#pragma once

#include <memory>
#include <vector>

#include "lb/lb_policy.h"

namespace uxds {

class RingHashPolicy final : public LbPolicy {
 public:
  RingHashPolicy(SubchannelPool& pool, const LbPolicyOptions& options, Reporter reporter);
  ~RingHashPolicy() override;

  void Update(const LocalityList& localities) override;
  void ExitIdle() override;

  // A42 aggregation rules 1-6 over endpoint states.
  static ConnectivityState Aggregate(size_t ready, size_t connecting, size_t idle,
                                     size_t transient_failure);

 private:
  struct Endpoint {
    SubchannelRef subchannel;
    int watcher = -1;
  };
  void DetachAll();
  void OnEndpointStateChange(const Status& status);
  void Report();

  SubchannelPool& pool_;
  LbPolicyOptions options_;
  Reporter reporter_;
  std::vector<RingEndpoint> ring_input_;
  std::shared_ptr<const Ring> ring_;
  std::vector<Endpoint> endpoints_;  // the ring's endpoint indices
  Status last_failure_;
};

}  // namespace uxds
