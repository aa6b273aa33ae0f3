// pick_first (A62), the policy A37 gives a LOGICAL_DNS cluster's priority:
// the endpoints in the resolver's order, one connection attempt at a time,
// the next on failure; every pick goes to the one connection made.
// Re-resolution (A37, as gRPC's DNS resolver) is asked for when every
// endpoint has failed and when the connection in use is lost.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lb/lb_policy.h"

namespace uxds {

class PickFirstPolicy final : public LbPolicy {
 public:
  // `request_reresolution` may be null (no resolver to ask).
  // `shuffle_address_list` (A62): each new list is tried in a random order.
  PickFirstPolicy(SubchannelPool& pool, std::function<void()> request_reresolution,
                  Reporter reporter, bool shuffle_address_list = false);
  ~PickFirstPolicy() override;

  void Update(const LocalityList& localities) override;

 private:
  struct Entry {
    SubchannelRef subchannel;
    int watcher = -1;
  };
  void DetachAll();
  // Tries the endpoints from `index` on: the first already READY is used;
  // one that has already failed (sticky TRANSIENT_FAILURE) is passed over.
  void ConnectFrom(size_t index);
  void OnStateChange(size_t index, ConnectivityState state, const Status& status);
  void Select(size_t index);
  void ReportConnecting();
  void Report(ConnectivityState state, const Status& status, std::shared_ptr<const Picker> picker);
  void RequestReresolution();

  SubchannelPool& pool_;
  std::function<void()> request_reresolution_;
  Reporter reporter_;
  const bool shuffle_address_list_;
  // The last update's endpoints (their subchannel keys) in the order it
  // gave them, before any shuffle: the same list again changes nothing.
  std::vector<std::string> update_keys_;
  std::vector<Entry> entries_;
  int selected_ = -1;      // the entry picks go to, READY
  size_t attempting_ = 0;  // the entry being connected while none is selected
  // A62: after a whole pass failed, TRANSIENT_FAILURE sticks until READY.
  bool failed_pass_ = false;
  Status last_failure_;
  // The last report, repeated for an update that changes nothing.
  ConnectivityState state_ = ConnectivityState::kIdle;
  Status status_;
  std::shared_ptr<const Picker> picker_;
};

// Every pick to one endpoint.
class PickFirstPicker final : public Picker {
 public:
  explicit PickFirstPicker(SubchannelRef selected) : selected_(std::move(selected)) {}
  PickResult Pick(const PickArgs&) const override {
    return PickResult::Complete(&selected_->endpoint());
  }

 private:
  SubchannelRef selected_;
};

}  // namespace uxds
