#include "lb/pick_first.h"

#include <set>

namespace uxds {

PickFirstPolicy::PickFirstPolicy(SubchannelPool& pool, std::function<void()> request_reresolution,
                                 Reporter reporter, bool shuffle_address_list)
    : pool_(pool),
      request_reresolution_(std::move(request_reresolution)),
      reporter_(std::move(reporter)),
      shuffle_address_list_(shuffle_address_list) {}

PickFirstPolicy::~PickFirstPolicy() { DetachAll(); }

void PickFirstPolicy::DetachAll() {
  for (Entry& e : entries_) e.subchannel->RemoveWatcher(e.watcher);
  entries_.clear();
}

void PickFirstPolicy::Update(const LocalityList& localities) {
  std::vector<const WeightedEndpoint*> addresses;
  std::set<std::string> seen;
  for (const WeightedLocality& locality : localities) {
    for (const WeightedEndpoint& e : locality.endpoints) {
      if (seen.insert(e.address.ToString()).second) addresses.push_back(&e);
    }
  }
  // The same list again (a re-resolution with the same answer, an EDS
  // resource sent again): nothing changes, not even a shuffled order.
  std::vector<std::string> keys;
  keys.reserve(addresses.size());
  for (const WeightedEndpoint* e : addresses) {
    keys.push_back(SubchannelPool::KeyOf(e->address.ToString(), e->tls.get()));
  }
  if (keys == update_keys_ && picker_ != nullptr) {
    reporter_(state_, status_, picker_);
    return;
  }
  update_keys_ = std::move(keys);
  if (shuffle_address_list_) {
    // A62: "randomly shuffle the order of the addresses" of each new list
    // (Fisher-Yates), so that clients given one EDS resource spread out.
    for (size_t i = addresses.size(); i > 1; --i) {
      std::swap(addresses[i - 1], addresses[ThreadRandom() % i]);
    }
  }
  // The subchannel in use, by its key (its address and security).
  std::string selected_key;
  if (selected_ >= 0) selected_key = entries_[selected_].subchannel->key();
  std::vector<Entry> next;
  next.reserve(addresses.size());
  for (const WeightedEndpoint* e : addresses) {
    next.push_back(Entry{pool_.Get(e->address, e->tls), -1});
  }
  DetachAll();
  entries_ = std::move(next);
  selected_ = -1;
  failed_pass_ = false;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Subchannel* s = entries_[i].subchannel.get();
    entries_[i].watcher = s->AddWatcher([this, i](ConnectivityState state, const Status& status) {
      OnStateChange(i, state, status);
    });
  }
  if (entries_.empty()) {
    const Status empty = UnavailableError("pick_first: empty address list");
    Report(ConnectivityState::kTransientFailure, empty, std::make_shared<FailPicker>(empty));
    return;
  }
  // A62: the connection in use stays in use while its address is still
  // in the list.
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].subchannel->key() == selected_key &&
        entries_[i].subchannel->state() == ConnectivityState::kReady) {
      Select(i);
      return;
    }
  }
  ConnectFrom(0);
}

void PickFirstPolicy::ConnectFrom(size_t index) {
  for (size_t i = index; i < entries_.size(); ++i) {
    Subchannel* s = entries_[i].subchannel.get();
    const ConnectivityState state = s->state();
    if (state == ConnectivityState::kReady) {
      Select(i);
      return;
    }
    // Asked even when in backoff: it connects once the backoff ends, and
    // the first READY one is used (A62 keeps trying after a failed pass).
    s->RequestConnection();
    if (s->state() != ConnectivityState::kTransientFailure) {
      attempting_ = i;
      ReportConnecting();
      return;
    }
    if (!s->last_failure().ok()) last_failure_ = s->last_failure();
  }
  // A62: every address failed: TRANSIENT_FAILURE (sticky until READY), and
  // the resolver is asked for a new answer (A37: re-resolution of the
  // LOGICAL_DNS name).
  attempting_ = entries_.size();
  failed_pass_ = true;
  const Status failed =
      UnavailableError("pick_first: connections to all addresses failing; last error: " +
                       (last_failure_.ok() ? std::string("none") : last_failure_.ToString()));
  Report(ConnectivityState::kTransientFailure, failed, std::make_shared<FailPicker>(failed));
  RequestReresolution();
}

void PickFirstPolicy::OnStateChange(size_t index, ConnectivityState state, const Status& status) {
  if (!status.ok()) last_failure_ = status;
  if (selected_ >= 0) {
    if (index != static_cast<size_t>(selected_) || state == ConnectivityState::kReady) return;
    // The connection in use is lost. gRPC's pick_first goes IDLE and asks
    // for re-resolution; the next pick reconnects. uxds has no channel
    // idleness (round_robin reconnects at once too), so the pass starts
    // again now, from the first address, while the resolver resolves.
    selected_ = -1;
    RequestReresolution();
    ConnectFrom(0);
    return;
  }
  if (state == ConnectivityState::kReady) {
    Select(index);
    return;
  }
  if (state == ConnectivityState::kTransientFailure && index == attempting_) {
    ConnectFrom(index + 1);
  }
}

void PickFirstPolicy::Select(size_t index) {
  selected_ = static_cast<int>(index);
  failed_pass_ = false;
  Report(ConnectivityState::kReady, Status(),
         std::make_shared<PickFirstPicker>(entries_[index].subchannel));
}

void PickFirstPolicy::ReportConnecting() {
  if (failed_pass_) return;  // A62: sticky TRANSIENT_FAILURE
  Report(ConnectivityState::kConnecting, Status(), std::make_shared<QueuePicker>());
}

void PickFirstPolicy::Report(ConnectivityState state, const Status& status,
                             std::shared_ptr<const Picker> picker) {
  state_ = state;
  status_ = status;
  picker_ = std::move(picker);
  reporter_(state_, status_, picker_);
}

void PickFirstPolicy::RequestReresolution() {
  if (request_reresolution_) request_reresolution_();
}

}  // namespace uxds
