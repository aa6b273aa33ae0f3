#include "lb/priority.h"

namespace uxds {

PriorityPolicy::PriorityPolicy(Loop& loop, const LbPolicyOptions& options, ChildFactory factory,
                               LbPolicy::Reporter reporter)
    : loop_(loop),
      options_(options),
      factory_(std::move(factory)),
      reporter_(std::move(reporter)) {}

PriorityPolicy::~PriorityPolicy() {
  updating_ = true;
  children_.clear();
}

size_t PriorityPolicy::child_count() const {
  size_t n = 0;
  for (const auto& c : children_) n += c != nullptr;
  return n;
}

bool PriorityPolicy::child_failover_timer_pending(size_t priority) const {
  return priority < children_.size() && children_[priority] != nullptr &&
         children_[priority]->failover_timer.pending();
}

bool PriorityPolicy::child_deactivated(size_t priority) const {
  return priority < children_.size() && children_[priority] != nullptr &&
         children_[priority]->retention_timer.pending();
}

void PriorityPolicy::Update(const std::vector<LocalityList>& priorities) {
  updating_ = true;
  config_ = priorities;
  if (children_.size() < config_.size()) children_.resize(config_.size());
  for (size_t p = 0; p < children_.size(); ++p) {
    if (children_[p] == nullptr) continue;
    if (p < config_.size()) {
      children_[p]->policy->Update(config_[p]);
    } else {
      Deactivate(p);  // the priority is gone; kept for the retention interval
    }
  }
  updating_ = false;
  ChoosePriority();
}

void PriorityPolicy::ExitIdle() {
  if (current_ < 0 || children_[current_] == nullptr) return;
  children_[current_]->policy->ExitIdle();
}

PriorityPolicy::Child& PriorityPolicy::CreateChild(size_t p) {
  children_[p] = std::make_unique<Child>(loop_);
  Child& child = *children_[p];
  child.policy = factory_([this, p](ConnectivityState state, const Status& status,
                                    std::shared_ptr<const Picker> picker) {
    OnChildReport(p, state, status, std::move(picker));
  });
  // A56: the failover timer starts when the child is created.
  StartFailoverTimer(p);
  const bool was_updating = std::exchange(updating_, true);
  child.policy->Update(config_[p]);
  updating_ = was_updating;
  return child;
}

void PriorityPolicy::StartFailoverTimer(size_t p) {
  children_[p]->failover_timer.Start(options_.priority_failover_timeout,
                                     [this, p] { OnFailoverTimer(p); });
}

void PriorityPolicy::OnFailoverTimer(size_t p) {
  // A56: the child counts as failed; the next priority gets its chance.
  Child& child = *children_[p];
  child.state = ConnectivityState::kTransientFailure;
  child.status = UnavailableError("priority " + std::to_string(p) +
                                  ": failover timer fired before the child connected");
  child.seen_ready_or_idle_since_failure = false;
  ChoosePriority();
}

void PriorityPolicy::OnChildReport(size_t p, ConnectivityState state, const Status& status,
                                   std::shared_ptr<const Picker> picker) {
  Child& child = *children_[p];
  child.state = state;
  child.status = status;
  child.picker = std::move(picker);
  switch (state) {
    case ConnectivityState::kConnecting:
      // A42: restart the timer on CONNECTING unless TRANSIENT_FAILURE was
      // reported more recently than READY or IDLE.
      if (child.seen_ready_or_idle_since_failure && !child.failover_timer.pending()) {
        StartFailoverTimer(p);
      }
      break;
    case ConnectivityState::kReady:
    case ConnectivityState::kIdle:
      child.seen_ready_or_idle_since_failure = true;
      child.failover_timer.Cancel();
      break;
    case ConnectivityState::kTransientFailure:
      child.seen_ready_or_idle_since_failure = false;
      child.failover_timer.Cancel();
      break;
  }
  if (!updating_) ChoosePriority();
}

void PriorityPolicy::Deactivate(size_t p) {
  Child& child = *children_[p];
  if (child.retention_timer.pending()) return;
  child.failover_timer.Cancel();
  child.retention_timer.Start(options_.child_retention_interval, [this, p] {
    // A56: deleted after the retention interval unless reused.
    children_[p].reset();
  });
}

// A56 "Choosing a priority" (NOTES.md): the first child READY or IDLE; else
// the first whose failover timer is pending; else the first CONNECTING;
// else the last.
void PriorityPolicy::ChoosePriority() {
  if (updating_) return;
  if (config_.empty()) {
    current_ = -1;
    const Status none = UnavailableError("priority: no priorities (no endpoints)");
    reporter_(ConnectivityState::kTransientFailure, none, std::make_shared<FailPicker>(none));
    return;
  }
  for (size_t p = 0; p < config_.size(); ++p) {
    if (children_[p] == nullptr) {
      CreateChild(p);
    } else {
      children_[p]->retention_timer.Cancel();  // reactivated
    }
    const Child& child = *children_[p];
    if (child.state == ConnectivityState::kReady || child.state == ConnectivityState::kIdle) {
      SetCurrent(p, /*deactivate_lower=*/true);
      return;
    }
    if (child.failover_timer.pending()) {
      SetCurrent(p, /*deactivate_lower=*/false);
      return;
    }
  }
  for (size_t p = 0; p < config_.size(); ++p) {
    if (children_[p] != nullptr && children_[p]->state == ConnectivityState::kConnecting) {
      SetCurrent(p, false);
      return;
    }
  }
  SetCurrent(config_.size() - 1, false);
}

void PriorityPolicy::SetCurrent(size_t p, bool deactivate_lower) {
  current_ = static_cast<int>(p);
  if (deactivate_lower) {
    for (size_t q = p + 1; q < children_.size(); ++q) {
      if (children_[q] != nullptr) Deactivate(q);
    }
  }
  const Child& child = *children_[p];
  reporter_(child.state, child.status, child.picker);
}

}  // namespace uxds
