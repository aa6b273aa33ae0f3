// round_robin (A27 inside each locality; bare round_robin over a whole
// priority): connects to every endpoint, reconnects any that goes IDLE, and
// spreads picks over the READY ones. least_request (A48) is the same policy
// ("the same subchannel connectivity management logic ... and the same
// heuristic for the aggregated connectivity state") with another picker.
#pragma once

#include <memory>
#include <vector>

#include "lb/call_counter.h"
#include "lb/lb_policy.h"

namespace uxds {

class RoundRobinPolicy final : public LbPolicy {
 public:
  RoundRobinPolicy(SubchannelPool& pool, Reporter reporter);
  // least_request (A48), drawing `choice_count` endpoints (in [2, 10]).
  static std::unique_ptr<RoundRobinPolicy> LeastRequest(SubchannelPool& pool, Reporter reporter,
                                                        uint32_t choice_count);
  ~RoundRobinPolicy() override;

  void Update(const LocalityList& localities) override;
  void ExitIdle() override;

 private:
  struct Endpoint {
    SubchannelRef subchannel;
    int watcher = -1;
    // least_request: the endpoint's outstanding calls (A48: "local to each
    // instance of the policy", living while the endpoint is in its list).
    std::shared_ptr<CallCounter> outstanding;
  };
  RoundRobinPolicy(SubchannelPool& pool, Reporter reporter, uint32_t least_request_choice_count);
  std::shared_ptr<const Picker> ReadyPicker() const;
  void DetachAll();
  void OnEndpointStateChange(Subchannel* s, ConnectivityState state, const Status& status);
  void Report();

  SubchannelPool& pool_;
  Reporter reporter_;
  // 0: round_robin; else least_request's choice_count.
  const uint32_t least_request_choice_count_;
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
