// The ring_hash picker (A42 "Picker Behavior", A76 request_hash_header).
// Immutable; endpoint states are read live from each subchannel's atomic
// state byte, so a state change needs no new picker to take effect.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lb/subchannel.h"
#include "uxds/channel.h"
#include "uxds/ring_hash.h"

namespace uxds {

class RingHashPicker final : public Picker {
 public:
  // `subchannels[i]` is the endpoint the ring's entries call i.
  // `any_connecting`: some endpoint was CONNECTING when the picker was made
  // (A76 picker_has_a_child_connecting). `failure`: what a pick that finds
  // no usable endpoint fails with.
  RingHashPicker(std::shared_ptr<const Ring> ring, std::vector<SubchannelRef> subchannels,
                 std::string request_hash_header, bool any_connecting, Status failure);

  PickResult Pick(const PickArgs& args) const override;
  // A42's pick for a known request hash (the channel's hash policies).
  PickResult PickForHash(uint64_t hash) const;

 private:
  PickResult PickForRandomHash(uint64_t hash, const EndpointMask* unreachable) const;
  // A42's pick where some endpoints are taken as TRANSIENT_FAILURE
  // (PickArgs::unreachable): the whole pick through FindIndex.
  [[gnu::noinline]] PickResult PickAvoiding(uint64_t hash, const EndpointMask& unreachable) const;
  // Out of line, so PickForHash's READY path is a leaf: PickForHash when
  // the ring's line cannot answer (a narrow line's range continuing in the
  // next line is tried first), and when the first endpoint is not READY.
  [[gnu::noinline]] PickResult PickFromIndexOf(uint64_t hash) const;
  // PickForHash for rings with wide lines (more than 255 endpoints).
  [[gnu::noinline]] PickResult PickFromWideLine(uint64_t hash) const;
  // `endpoint` (a line's answer for `hash`, or Ring::kNotInLine) if it is
  // READY; else the whole pick through FindIndex.
  PickResult PickEndpointIfReady(uint32_t endpoint, uint64_t hash) const {
    if (const Subchannel* subchannel = ReadySubchannel(endpoint)) [[likely]] {
      return PickResult::Complete(&subchannel->endpoint());
    }
    return PickFromIndexOf(hash);
  }
  // The subchannel of `endpoint` (or of none: Ring::kNotInLine) if READY.
  const Subchannel* ReadySubchannel(uint32_t endpoint) const {
    if (endpoint == Ring::kNotInLine) [[unlikely]]
      return nullptr;
    const Subchannel* subchannel = subchannels_[endpoint];
    if (subchannel->state() != ConnectivityState::kReady) [[unlikely]]
      return nullptr;
    return subchannel;
  }
  // A42's pseudo-code from the entry FindIndex found, in state `state`.
  PickResult PickFromFirst(size_t first, ConnectivityState state,
                           const EndpointMask* unreachable = nullptr) const;
  // The state of the entry's endpoint; TRANSIENT_FAILURE for one in
  // `unreachable`.
  ConnectivityState StateAt(size_t ring_index, const EndpointMask* unreachable = nullptr) const {
    const Subchannel* subchannel = subchannels_[ring_->operator[](ring_index).endpoint];
    if (unreachable != nullptr && unreachable->Contains(subchannel->endpoint().index)) {
      return ConnectivityState::kTransientFailure;
    }
    return subchannel->state();
  }
  PickResult CompleteAt(size_t ring_index) const {
    return PickResult::Complete(&subchannels_[(*ring_)[ring_index].endpoint]->endpoint());
  }
  // Asks the entry's endpoint to connect; not one in `unreachable`, which
  // the picking thread reconnects itself.
  void ConnectAt(size_t ring_index, const EndpointMask* unreachable = nullptr) const {
    Subchannel* subchannel = subchannels_[(*ring_)[ring_index].endpoint];
    if (unreachable != nullptr && unreachable->Contains(subchannel->endpoint().index)) return;
    subchannel->RequestConnectionFromAnyThread();
  }

  std::shared_ptr<const Ring> ring_;
  std::vector<SubchannelRef> refs_;
  std::vector<Subchannel*> subchannels_;
  std::string request_hash_header_;
  bool any_connecting_;
  Status failure_;
  Status no_hash_;
};

}  // namespace uxds
