#include "lb/weighted_target.h"

#include <algorithm>

namespace uxds {

WeightedPicker::WeightedPicker(std::vector<Entry> entries)
    : entries_(std::move(entries)), total_(entries_.back().cumulative_weight) {}

PickResult WeightedPicker::Pick(const PickArgs& args) const {
  const uint64_t point = ThreadRandom() % total_;
  auto it = std::upper_bound(entries_.begin(), entries_.end(), point,
                             [](uint64_t p, const Entry& e) { return p < e.cumulative_weight; });
  PickResult result = it->picker->Pick(args);
  if (args.unreachable == nullptr) [[likely]]
    return result;
  return PickAroundUnreachable(static_cast<size_t>(it - entries_.begin()), result, args);
}

PickResult WeightedPicker::PickAroundUnreachable(size_t drawn, const PickResult& result,
                                                 const PickArgs& args) const {
  if (result.kind != PickResult::Kind::kComplete ||
      !args.unreachable->Contains(result.endpoint->index)) {
    return result;
  }
  // The drawn locality has nothing the picking thread can reach: as a
  // locality in TRANSIENT_FAILURE, it gives way to the others, in turn
  // from the drawn one; with none, its pick stands (the caller fails it).
  // A pick put aside is ended at once (a least_request child counted it).
  for (size_t k = 1; k < entries_.size(); ++k) {
    PickResult other = entries_[(drawn + k) % entries_.size()].picker->Pick(args);
    if (other.kind != PickResult::Kind::kComplete) continue;
    if (!args.unreachable->Contains(other.endpoint->index)) {
      CallNotStarted(result);
      return other;
    }
    CallNotStarted(other);
  }
  return result;
}

WeightedTargetPolicy::WeightedTargetPolicy(Loop& loop, ChildFactory factory, Reporter reporter)
    : factory_(std::move(factory)), reporter_(std::move(reporter)), idle_exit_(loop, *this) {}

WeightedTargetPolicy::~WeightedTargetPolicy() {
  updating_ = true;  // children's reports during teardown go nowhere
  children_.clear();
}

void WeightedTargetPolicy::Update(const LocalityList& localities) {
  updating_ = true;
  std::map<std::string, std::unique_ptr<Child>> next;
  for (const WeightedLocality& locality : localities) {
    auto it = children_.find(locality.name);
    std::unique_ptr<Child> child;
    if (it != children_.end()) {
      child = std::move(it->second);
      children_.erase(it);
    } else {
      child = std::make_unique<Child>();
      Child* raw = child.get();
      child->policy = factory_([this, raw](ConnectivityState state, const Status& status,
                                           std::shared_ptr<const Picker> picker) {
        raw->state = state;
        raw->status = status;
        raw->picker = std::move(picker);
        if (!updating_) Report();
      });
    }
    child->weight = locality.weight == 0 ? 1 : locality.weight;
    next.emplace(locality.name, std::move(child));
  }
  children_.clear();  // localities that are gone
  children_ = std::move(next);
  for (const WeightedLocality& locality : localities) {
    children_[locality.name]->policy->Update(LocalityList{locality});
  }
  updating_ = false;
  Report();
}

void WeightedTargetPolicy::ExitIdle() {
  for (auto& [name, child] : children_) child->policy->ExitIdle();
}

// A27's weighted_target aggregation: READY if any child is READY, else
// CONNECTING if any is, else IDLE if any is, else TRANSIENT_FAILURE; the
// picker spreads over the children in that state.
void WeightedTargetPolicy::Report() {
  if (children_.empty()) {
    const Status empty = UnavailableError("weighted_target: no localities");
    reporter_(ConnectivityState::kTransientFailure, empty, std::make_shared<FailPicker>(empty));
    return;
  }
  auto any = [this](ConnectivityState s) {
    return std::any_of(children_.begin(), children_.end(),
                       [s](const auto& c) { return c.second->state == s; });
  };
  ConnectivityState state = ConnectivityState::kTransientFailure;
  for (ConnectivityState s :
       {ConnectivityState::kReady, ConnectivityState::kConnecting, ConnectivityState::kIdle}) {
    if (any(s)) {
      state = s;
      break;
    }
  }
  if (state == ConnectivityState::kConnecting) {
    reporter_(state, Status(), std::make_shared<QueuePicker>());
    return;
  }
  if (state == ConnectivityState::kIdle) {
    // As gRPC's weighted_target: every child waits for a pick (ring_hash
    // connects on the first one); the first pick makes them all exit IDLE.
    reporter_(state, Status(), idle_exit_.MakePicker());
    return;
  }
  std::vector<WeightedPicker::Entry> entries;
  uint64_t cumulative = 0;
  Status status;
  for (const auto& [name, child] : children_) {
    if (child->state != state || child->picker == nullptr) continue;
    cumulative += child->weight;
    entries.push_back({cumulative, child->picker});
    if (status.ok()) status = child->status;
  }
  reporter_(state, status, std::make_shared<WeightedPicker>(std::move(entries)));
}

}  // namespace uxds
