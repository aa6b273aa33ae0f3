// weighted_target (A27): one child policy per locality, picks spread over
// the localities by their load_balancing_weight.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lb/idle_exit_picker.h"
#include "lb/lb_policy.h"

namespace uxds {

class WeightedTargetPolicy final : public LbPolicy {
 public:
  // Makes the policy of one locality (round_robin, or ring_hash under
  // wrr_locality).
  using ChildFactory = std::function<std::unique_ptr<LbPolicy>(Reporter)>;
  WeightedTargetPolicy(Loop& loop, ChildFactory factory, Reporter reporter);
  ~WeightedTargetPolicy() override;

  void Update(const LocalityList& localities) override;
  void ExitIdle() override;

 private:
  struct Child {
    uint32_t weight = 1;
    std::unique_ptr<LbPolicy> policy;
    ConnectivityState state = ConnectivityState::kConnecting;
    Status status;
    std::shared_ptr<const Picker> picker;
  };
  void Report();

  ChildFactory factory_;
  Reporter reporter_;
  std::map<std::string, std::unique_ptr<Child>> children_;  // by locality name
  bool updating_ = false;
  IdleExitHandle idle_exit_;
};

// Picks a child by weight (a random point on the cumulative weights), then
// delegates to its picker.
class WeightedPicker final : public Picker {
 public:
  struct Entry {
    uint64_t cumulative_weight;
    std::shared_ptr<const Picker> picker;
  };
  explicit WeightedPicker(std::vector<Entry> entries);
  PickResult Pick(const PickArgs& args) const override;

 private:
  // PickArgs::unreachable: when the child drawn (at `drawn`) picked an
  // endpoint in the mask, another child's pick that is not.
  [[gnu::noinline]] PickResult PickAroundUnreachable(size_t drawn, const PickResult& result,
                                                     const PickArgs& args) const;

  std::vector<Entry> entries_;
  uint64_t total_;
};

}  // namespace uxds
