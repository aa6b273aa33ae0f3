#include "lb/priority.h"

namespace uxds {

namespace {
// The name of priority `p` when the caller names none.
std::string PositionalName(size_t p) { return "priority" + std::to_string(p); }
}  // namespace

PriorityPolicy::PriorityPolicy(Loop& loop, const LbPolicyOptions& options, ChildFactory factory,
                               LbPolicy::Reporter reporter, ChildFactory pick_first_factory)
    : loop_(loop),
      options_(options),
      factory_(std::move(factory)),
      pick_first_factory_(std::move(pick_first_factory)),
      reporter_(std::move(reporter)) {}

PriorityPolicy::~PriorityPolicy() {
  updating_ = true;
  children_.clear();
}

size_t PriorityPolicy::child_count() const { return children_.size(); }

PriorityPolicy::Child* PriorityPolicy::Find(const std::string& name) const {
  auto it = children_.find(name);
  return it == children_.end() ? nullptr : it->second.get();
}

const PriorityPolicy::Child* PriorityPolicy::FindAt(size_t p) const {
  return Find(p < names_.size() ? names_[p].name : PositionalName(p));
}

bool PriorityPolicy::child_failover_timer_pending(size_t priority) const {
  const Child* child = FindAt(priority);
  return child != nullptr && child->failover_timer.pending();
}

bool PriorityPolicy::child_deactivated(size_t priority) const {
  const Child* child = FindAt(priority);
  return child != nullptr && child->retention_timer.pending();
}

bool PriorityPolicy::child_failover_timer_pending(const std::string& name) const {
  const Child* child = Find(name);
  return child != nullptr && child->failover_timer.pending();
}

bool PriorityPolicy::child_deactivated(const std::string& name) const {
  const Child* child = Find(name);
  return child != nullptr && child->retention_timer.pending();
}

void PriorityPolicy::Update(const std::vector<LocalityList>& priorities,
                            std::vector<PriorityChildConfig> children) {
  updating_ = true;
  config_ = priorities;
  names_ = std::move(children);
  names_.resize(config_.size());
  for (size_t p = 0; p < names_.size(); ++p) {
    if (names_[p].name.empty()) names_[p].name = PositionalName(p);
  }
  std::map<std::string, size_t> position;
  for (size_t p = 0; p < names_.size(); ++p) position.emplace(names_[p].name, p);
  for (auto it = children_.begin(); it != children_.end();) {
    Child& child = *it->second;
    auto at = position.find(child.name);
    if (at != position.end() && names_[at->second].pick_first != child.pick_first) {
      // Another kind of child under the same name: a new one replaces it.
      it = children_.erase(it);
      continue;
    }
    if (at != position.end()) {
      child.policy->Update(config_[at->second]);
    } else {
      Deactivate(&child);  // the priority is gone; kept for the retention interval
    }
    ++it;
  }
  updating_ = false;
  ChoosePriority();
}

void PriorityPolicy::ExitIdle() {
  if (current_ < 0) return;
  if (Child* child = Find(names_[current_].name)) child->policy->ExitIdle();
}

PriorityPolicy::Child& PriorityPolicy::CreateChild(size_t p) {
  auto owned = std::make_unique<Child>(loop_);
  Child* child = owned.get();
  child->name = names_[p].name;
  child->pick_first = names_[p].pick_first;
  children_[child->name] = std::move(owned);
  const ChildFactory& factory =
      child->pick_first && pick_first_factory_ ? pick_first_factory_ : factory_;
  child->policy = factory([this, child](ConnectivityState state, const Status& status,
                                        std::shared_ptr<const Picker> picker) {
    OnChildReport(child, state, status, std::move(picker));
  });
  // A56: the failover timer starts when the child is created.
  StartFailoverTimer(child);
  const bool was_updating = std::exchange(updating_, true);
  child->policy->Update(config_[p]);
  updating_ = was_updating;
  return *child;
}

void PriorityPolicy::StartFailoverTimer(Child* child) {
  child->failover_timer.Start(options_.priority_failover_timeout,
                              [this, child] { OnFailoverTimer(child); });
}

void PriorityPolicy::OnFailoverTimer(Child* child) {
  // A56: the child counts as failed; the next priority gets its chance.
  child->state = ConnectivityState::kTransientFailure;
  child->status = UnavailableError("priority " + child->name +
                                   ": failover timer fired before the child connected");
  child->seen_ready_or_idle_since_failure = false;
  ChoosePriority();
}

void PriorityPolicy::OnChildReport(Child* child, ConnectivityState state, const Status& status,
                                   std::shared_ptr<const Picker> picker) {
  child->state = state;
  child->status = status;
  child->picker = std::move(picker);
  switch (state) {
    case ConnectivityState::kConnecting:
      // A42: restart the timer on CONNECTING unless TRANSIENT_FAILURE was
      // reported more recently than READY or IDLE.
      if (child->seen_ready_or_idle_since_failure && !child->failover_timer.pending()) {
        StartFailoverTimer(child);
      }
      break;
    case ConnectivityState::kReady:
    case ConnectivityState::kIdle:
      child->seen_ready_or_idle_since_failure = true;
      child->failover_timer.Cancel();
      break;
    case ConnectivityState::kTransientFailure:
      child->seen_ready_or_idle_since_failure = false;
      child->failover_timer.Cancel();
      break;
  }
  if (!updating_) ChoosePriority();
}

void PriorityPolicy::Deactivate(Child* child) {
  if (child->retention_timer.pending()) return;
  child->failover_timer.Cancel();
  child->retention_timer.Start(options_.child_retention_interval, [this, child] {
    // A56: deleted after the retention interval unless reused.
    auto it = children_.find(child->name);
    if (it != children_.end()) children_.erase(it);
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
    Child* child = Find(names_[p].name);
    if (child == nullptr) {
      child = &CreateChild(p);
    } else if (child->retention_timer.pending()) {
      child->retention_timer.Cancel();  // reactivated
    }
    if (child->state == ConnectivityState::kReady || child->state == ConnectivityState::kIdle) {
      SetCurrent(p, /*deactivate_lower=*/true);
      return;
    }
    if (child->failover_timer.pending()) {
      SetCurrent(p, /*deactivate_lower=*/false);
      return;
    }
  }
  for (size_t p = 0; p < config_.size(); ++p) {
    const Child* child = Find(names_[p].name);
    if (child != nullptr && child->state == ConnectivityState::kConnecting) {
      SetCurrent(p, false);
      return;
    }
  }
  SetCurrent(config_.size() - 1, false);
}

void PriorityPolicy::SetCurrent(size_t p, bool deactivate_lower) {
  current_ = static_cast<int>(p);
  if (deactivate_lower) {
    for (size_t q = p + 1; q < names_.size(); ++q) {
      if (Child* child = Find(names_[q].name)) Deactivate(child);
    }
  }
  const Child& child = *Find(names_[p].name);
  reporter_(child.state, child.status, child.picker);
}

}  // namespace uxds
