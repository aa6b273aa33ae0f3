#include "lb/idle_exit_picker.h"

namespace uxds {

IdleExitHandle::IdleExitHandle(Loop& loop, LbPolicy& policy)
    : target_(std::make_shared<Target>(Target{loop, &policy})) {}

IdleExitHandle::~IdleExitHandle() { target_->policy = nullptr; }

std::shared_ptr<const Picker> IdleExitHandle::MakePicker() const {
  return std::make_shared<IdleExitPicker>(target_);
}

void IdleExitPicker::RequestExitIdle() const {
  // Picks may run on any thread; the policy lives on the control loop.
  // Posted, never inline: a pick must not re-enter the policy that is
  // reporting this picker.
  target_->loop.Post([target = target_] {
    if (target->policy != nullptr) target->policy->ExitIdle();
  });
}

}  // namespace uxds
