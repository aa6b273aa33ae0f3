// round_robin (A27 inside each locality; bare round_robin over a whole
// priority): connects to every endpoint, reconnects any that goes IDLE, and
// spreads picks over the READY ones.
#pragma once

#include <vector>

#include "lb/lb_policy.h"

namespace uxds {

class RoundRobinPolicy final : public LbPolicy {
 public:
  RoundRobinPolicy(SubchannelPool& pool, Reporter reporter);
  ~RoundRobinPolicy() override;

  void Update(const LocalityList& localities) override;
  void ExitIdle() override;

 private:
  struct Endpoint {
    SubchannelRef subchannel;
    int watcher = -1;
  };
  void DetachAll();
  void OnEndpointStateChange(Subchannel* s, ConnectivityState state, const Status& status);
  void Report();

  SubchannelPool& pool_;
  Reporter reporter_;
  std::vector<Endpoint> endpoints_;
  Status last_failure_;
};

// Picks the READY endpoints in turn, each picker from a random start (as
// gRPC's). The position lives in the picking thread, not in the picker:
// no pick writes a line another thread writes. Each thread keeps the
// positions of the last pickers it used in a small table keyed by picker
// id, so a thread that alternates between clusters walks each cluster's
// list in turn; two pickers that share a slot restart each other at
// random points, which spreads picks evenly, if not in strict turn.
class RoundRobinPicker final : public Picker {
 public:
  explicit RoundRobinPicker(std::vector<SubchannelRef> ready);
  PickResult Pick(const PickArgs& args) const override;

 private:
  std::vector<SubchannelRef> ready_;
  std::vector<const Endpoint*> endpoints_;
  const uint64_t id_;  // unique per picker, never 0
};

}  // namespace uxds
