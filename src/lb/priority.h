// The priority LB policy (A56, with A42's failover-timer change): children
// in priority order; picks go to the highest-priority child that is READY
// or IDLE; a child that does not connect within the failover timeout lets
// the next priority start; children no longer needed are kept (deactivated)
// for the retention interval, so a flapping priority keeps its connections.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "lb/lb_policy.h"
#include "uxds/loop.h"

namespace uxds {

class PriorityPolicy {
 public:
  using ChildFactory = std::function<std::unique_ptr<LbPolicy>(LbPolicy::Reporter)>;
  PriorityPolicy(Loop& loop, const LbPolicyOptions& options, ChildFactory factory,
                 LbPolicy::Reporter reporter);
  ~PriorityPolicy();

  // One LocalityList per priority, index = priority.
  void Update(const std::vector<LocalityList>& priorities);
  // As gRPC's priority policy: the current priority's child exits IDLE.
  void ExitIdle();

  // The priority picks go to now; -1 before the first update.
  int current_priority() const { return current_; }
  // Children that exist (active or retained); for tests.
  size_t child_count() const;
  bool child_failover_timer_pending(size_t priority) const;
  bool child_deactivated(size_t priority) const;

 private:
  struct Child {
    explicit Child(Loop& loop) : failover_timer(loop), retention_timer(loop) {}
    std::unique_ptr<LbPolicy> policy;
    ConnectivityState state = ConnectivityState::kConnecting;
    Status status;
    std::shared_ptr<const Picker> picker = std::make_shared<QueuePicker>();
    // A42: the failover timer restarts on CONNECTING only if READY or IDLE
    // was reported more recently than TRANSIENT_FAILURE.
    bool seen_ready_or_idle_since_failure = true;
    Timer failover_timer;
    Timer retention_timer;  // pending while deactivated
  };
  Child& CreateChild(size_t priority);
  void OnChildReport(size_t priority, ConnectivityState state, const Status& status,
                     std::shared_ptr<const Picker> picker);
  void OnFailoverTimer(size_t priority);
  void StartFailoverTimer(size_t priority);
  void Deactivate(size_t priority);
  void ChoosePriority();
  void SetCurrent(size_t priority, bool deactivate_lower);

  Loop& loop_;
  LbPolicyOptions options_;
  ChildFactory factory_;
  LbPolicy::Reporter reporter_;
  std::vector<LocalityList> config_;
  std::vector<std::unique_ptr<Child>> children_;  // by priority; null = none
  int current_ = -1;
  bool updating_ = false;
};

}  // namespace uxds
