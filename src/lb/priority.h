// The priority LB policy (A56, with A42's failover-timer change): children
// in priority order; picks go to the highest-priority child that is READY
// or IDLE; a child that does not connect within the failover timeout lets
// the next priority start; children no longer needed are kept (deactivated)
// for the retention interval, so a flapping priority keeps its connections.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lb/lb_policy.h"
#include "uxds/loop.h"

namespace uxds {

// A37: one priority's child. The name is how the policy knows the child
// across updates (A56's children map): a priority that moves keeps its
// child, its connections and its failover timer.
struct PriorityChildConfig {
  std::string name;
  // A37: a LOGICAL_DNS cluster's priority: pick_first over its addresses.
  bool pick_first = false;
};

class PriorityPolicy {
 public:
  using ChildFactory = std::function<std::unique_ptr<LbPolicy>(LbPolicy::Reporter)>;
  // `pick_first_factory` makes the children of priorities marked pick_first
  // (`factory` makes them too when it is null).
  PriorityPolicy(Loop& loop, const LbPolicyOptions& options, ChildFactory factory,
                 LbPolicy::Reporter reporter, ChildFactory pick_first_factory = nullptr);
  ~PriorityPolicy();

  // One LocalityList per priority, index = priority, and its child's name
  // and kind; without `children` the children are named by position.
  void Update(const std::vector<LocalityList>& priorities,
              std::vector<PriorityChildConfig> children = {});
  // As gRPC's priority policy: the current priority's child exits IDLE.
  void ExitIdle();

  // The priority picks go to now; -1 before the first update.
  int current_priority() const { return current_; }
  // Children that exist (active or retained); for tests.
  size_t child_count() const;
  // By the priority's position in the last update, or (past its end) the
  // position it was last named by default.
  bool child_failover_timer_pending(size_t priority) const;
  bool child_deactivated(size_t priority) const;
  // By name; for tests.
  bool child_failover_timer_pending(const std::string& name) const;
  bool child_deactivated(const std::string& name) const;
  bool has_child(const std::string& name) const { return children_.contains(name); }

 private:
  struct Child {
    explicit Child(Loop& loop) : failover_timer(loop), retention_timer(loop) {}
    std::string name;
    bool pick_first = false;
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
  Child* Find(const std::string& name) const;
  const Child* FindAt(size_t priority) const;
  void OnChildReport(Child* child, ConnectivityState state, const Status& status,
                     std::shared_ptr<const Picker> picker);
  void OnFailoverTimer(Child* child);
  void StartFailoverTimer(Child* child);
  void Deactivate(Child* child);
  void ChoosePriority();
  void SetCurrent(size_t priority, bool deactivate_lower);

  Loop& loop_;
  LbPolicyOptions options_;
  ChildFactory factory_;
  ChildFactory pick_first_factory_;
  LbPolicy::Reporter reporter_;
  std::vector<LocalityList> config_;
  std::vector<PriorityChildConfig> names_;                  // by priority, as config_
  std::map<std::string, std::unique_ptr<Child>> children_;  // by name
  int current_ = -1;
  bool updating_ = false;
};

}  // namespace uxds
