// The picker of a policy that is IDLE: gRPC's queueing picker with a
// parent. The first pick asks the policy, on the control loop, to exit IDLE
// (start connecting); every pick queues until the policy reports again.
// Without it a policy whose children all wait for a pick (ring_hash under
// weighted_target) would never connect.
#pragma once

#include <atomic>
#include <memory>

#include "lb/lb_policy.h"
#include "uxds/loop.h"

namespace uxds {

class IdleExitPicker;

// Owned by the policy. Pickers hold its target, not the policy: a picker
// may be picked after the policy is gone, and its request then does
// nothing.
class IdleExitHandle {
 public:
  IdleExitHandle(Loop& loop, LbPolicy& policy);
  ~IdleExitHandle();  // control thread
  IdleExitHandle(const IdleExitHandle&) = delete;
  IdleExitHandle& operator=(const IdleExitHandle&) = delete;

  std::shared_ptr<const Picker> MakePicker() const;

  struct Target {
    Loop& loop;
    LbPolicy* policy;  // read and cleared on the control thread only
  };

 private:
  std::shared_ptr<Target> target_;
};

class IdleExitPicker final : public Picker {
 public:
  explicit IdleExitPicker(std::shared_ptr<IdleExitHandle::Target> target)
      : target_(std::move(target)) {}
  PickResult Pick(const PickArgs&) const override {
    // One request per picker: later picks only read the flag.
    if (!requested_.load(std::memory_order_relaxed) &&
        !requested_.exchange(true, std::memory_order_relaxed)) {
      RequestExitIdle();
    }
    return PickResult::Queue();
  }

 private:
  void RequestExitIdle() const;

  std::shared_ptr<IdleExitHandle::Target> target_;
  mutable std::atomic<bool> requested_{false};
};

}  // namespace uxds
