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

// Picks the READY endpoints in turn. The position is a per-thread counter,
// not a shared one: each thread walks the list round robin, and no pick
// writes a line another thread writes.
class RoundRobinPicker final : public Picker {
 public:
  explicit RoundRobinPicker(std::vector<SubchannelRef> ready);
  PickResult Pick(const PickArgs& args) const override;

 private:
  std::vector<SubchannelRef> ready_;
  std::vector<const Endpoint*> endpoints_;
};

}  // namespace uxds
