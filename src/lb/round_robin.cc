#include "lb/round_robin.h"

#include "lb/least_request_picker.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <set>
#include <unordered_map>

namespace uxds {

namespace {

std::atomic<uint64_t> g_next_picker_id{1};

// A thread's positions in the pickers it used last (RoundRobinPicker).
struct PickerPosition {
  uint64_t picker_id = 0;
  uint64_t position = 0;
};
constexpr size_t kPositionSlots = 16;
thread_local constinit std::array<PickerPosition, kPositionSlots> t_positions{};

}  // namespace

RoundRobinPicker::RoundRobinPicker(std::vector<SubchannelRef> ready)
    : ready_(std::move(ready)), id_(g_next_picker_id.fetch_add(1, std::memory_order_relaxed)) {
  endpoints_.reserve(ready_.size());
  for (const SubchannelRef& r : ready_) endpoints_.push_back(&r->endpoint());
}

PickResult RoundRobinPicker::Pick(const PickArgs& args) const {
  PickerPosition& slot = t_positions[id_ % kPositionSlots];
  if (slot.picker_id != id_) [[unlikely]] {
    // A picker this thread has not used (or lost its slot): a random start,
    // so threads and pickers do not move in step.
    slot.picker_id = id_;
    slot.position = ThreadRandom();
  }
  const Endpoint* picked = endpoints_[slot.position++ % endpoints_.size()];
  if (args.unreachable != nullptr) [[unlikely]] {
    // The next READY endpoint this thread can reach, if any; else the one
    // in turn (the caller treats it as a failed pick).
    for (size_t tried = 1; tried < endpoints_.size() && args.unreachable->Contains(picked->index);
         ++tried) {
      picked = endpoints_[slot.position++ % endpoints_.size()];
    }
  }
  return PickResult::Complete(picked);
}

RoundRobinPolicy::RoundRobinPolicy(SubchannelPool& pool, Reporter reporter)
    : RoundRobinPolicy(pool, std::move(reporter), 0) {}

RoundRobinPolicy::RoundRobinPolicy(SubchannelPool& pool, Reporter reporter,
                                   uint32_t least_request_choice_count)
    : pool_(pool),
      reporter_(std::move(reporter)),
      least_request_choice_count_(least_request_choice_count) {}

std::unique_ptr<RoundRobinPolicy> RoundRobinPolicy::LeastRequest(SubchannelPool& pool,
                                                                 Reporter reporter,
                                                                 uint32_t choice_count) {
  // A48's range, whoever made the config.
  return std::unique_ptr<RoundRobinPolicy>(
      new RoundRobinPolicy(pool, std::move(reporter), std::clamp(choice_count, 2u, 10u)));
}

RoundRobinPolicy::~RoundRobinPolicy() { DetachAll(); }

void RoundRobinPolicy::DetachAll() {
  for (Endpoint& e : endpoints_) e.subchannel->RemoveWatcher(e.watcher);
  endpoints_.clear();
}

void RoundRobinPolicy::Update(const LocalityList& localities) {
  // A48: an endpoint that stays keeps its count (its calls in flight).
  std::unordered_map<const Subchannel*, std::shared_ptr<CallCounter>> counts;
  if (least_request_choice_count_ != 0) {
    for (const Endpoint& e : endpoints_) counts.emplace(e.subchannel.get(), e.outstanding);
  }
  std::vector<Endpoint> next;
  std::set<std::string> seen;
  for (const WeightedLocality& locality : localities) {
    for (const WeightedEndpoint& e : locality.endpoints) {
      // A48 as round_robin: an address listed twice is one endpoint.
      if (!seen.insert(e.address.ToString()).second) continue;
      next.push_back(Endpoint{pool_.Get(e.address, e.tls), -1, nullptr});
      if (least_request_choice_count_ != 0) {
        std::shared_ptr<CallCounter>& count = counts[next.back().subchannel.get()];
        if (count == nullptr) count = CallCounter::Create();
        next.back().outstanding = count;
      }
    }
  }
  DetachAll();
  endpoints_ = std::move(next);
  for (Endpoint& e : endpoints_) {
    Subchannel* s = e.subchannel.get();
    e.watcher = s->AddWatcher([this, s](ConnectivityState state, const Status& status) {
      OnEndpointStateChange(s, state, status);
    });
    // round_robin connects to everything it is given.
    s->RequestConnection();
  }
  Report();
}

// round_robin is never IDLE for long (it reconnects at once); an endpoint
// between its IDLE report and its reconnection is asked again.
void RoundRobinPolicy::ExitIdle() {
  for (Endpoint& e : endpoints_) {
    if (e.subchannel->state() == ConnectivityState::kIdle) e.subchannel->RequestConnection();
  }
}

void RoundRobinPolicy::OnEndpointStateChange(Subchannel* s, ConnectivityState state,
                                             const Status& status) {
  if (!status.ok()) last_failure_ = status;
  // A lost connection (IDLE) is re-established at once.
  if (state == ConnectivityState::kIdle) s->RequestConnection();
  Report();
}

std::shared_ptr<const Picker> RoundRobinPolicy::ReadyPicker() const {
  if (least_request_choice_count_ == 0) {
    std::vector<SubchannelRef> ready;
    for (const Endpoint& e : endpoints_) {
      if (e.subchannel->state() == ConnectivityState::kReady) ready.push_back(e.subchannel);
    }
    return std::make_shared<RoundRobinPicker>(std::move(ready));
  }
  std::vector<LeastRequestPicker::Entry> ready;
  for (const Endpoint& e : endpoints_) {
    if (e.subchannel->state() == ConnectivityState::kReady) {
      ready.push_back(LeastRequestPicker::Entry{e.subchannel, e.outstanding});
    }
  }
  return std::make_shared<LeastRequestPicker>(std::move(ready), least_request_choice_count_);
}

void RoundRobinPolicy::Report() {
  const char* name = least_request_choice_count_ == 0 ? "round_robin" : "least_request";
  if (endpoints_.empty()) {
    const Status empty = UnavailableError(std::string(name) + ": empty address list");
    reporter_(ConnectivityState::kTransientFailure, empty, std::make_shared<FailPicker>(empty));
    return;
  }
  bool ready = false;
  bool connecting = false;
  for (const Endpoint& e : endpoints_) {
    const ConnectivityState state = e.subchannel->state();
    if (state == ConnectivityState::kReady) ready = true;
    if (state == ConnectivityState::kConnecting || state == ConnectivityState::kIdle) {
      connecting = true;
    }
  }
  // A61's aggregation (A48's too): READY if any READY, else CONNECTING if
  // any is trying (IDLE ones are being reconnected), else
  // TRANSIENT_FAILURE.
  if (ready) {
    reporter_(ConnectivityState::kReady, Status(), ReadyPicker());
  } else if (connecting) {
    reporter_(ConnectivityState::kConnecting, Status(), std::make_shared<QueuePicker>());
  } else {
    const Status failed =
        UnavailableError(std::string(name) + ": connections to all backends failing; last error: " +
                         (last_failure_.ok() ? std::string("none") : last_failure_.ToString()));
    reporter_(ConnectivityState::kTransientFailure, failed, std::make_shared<FailPicker>(failed));
  }
}

}  // namespace uxds
