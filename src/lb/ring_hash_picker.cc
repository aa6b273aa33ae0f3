#include "lb/ring_hash_picker.h"

#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t on the stack: no allocation
#include <xxhash.h>

#include "lb/lb_policy.h"

namespace uxds {

RingHashPicker::RingHashPicker(std::shared_ptr<const Ring> ring,
                               std::vector<SubchannelRef> subchannels,
                               std::string request_hash_header, bool any_connecting, Status failure)
    : ring_(std::move(ring)),
      refs_(std::move(subchannels)),
      request_hash_header_(std::move(request_hash_header)),
      any_connecting_(any_connecting),
      failure_(std::move(failure)),
      // A76: without a configured header the xDS config selector always
      // sets a hash; none means the caller skipped it.
      no_hash_(InternalError("ring hash: the request has no hash (set PickArgs::hash)")) {
  subchannels_.reserve(refs_.size());
  for (const SubchannelRef& r : refs_) subchannels_.push_back(r.get());
}

PickResult RingHashPicker::Pick(const PickArgs& args) const {
  if (ring_->empty()) return PickResult::Fail(&failure_);
  if (request_hash_header_.empty()) {
    if (!args.hash.has_value()) return PickResult::Fail(&no_hash_);
    if (args.unreachable != nullptr) [[unlikely]]
      return PickAvoiding(*args.hash, *args.unreachable);
    return PickForHash(*args.hash);
  }
  // A76: the header's values joined with ',' are hashed; XXH64's streaming
  // form hashes the joined text without building it.
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  bool found = false;
  bool non_empty = false;
  for (const auto& [name, value] : args.metadata) {
    if (name != request_hash_header_) continue;
    if (found) XXH64_update(&state, ",", 1);
    XXH64_update(&state, value.data(), value.size());
    found = true;
    non_empty = non_empty || !value.empty();
  }
  // A76: only a header with a non-empty value gives the hash; an empty one
  // counts as missing.
  if (!non_empty) return PickForRandomHash(ThreadRandom(), args.unreachable);
  if (args.unreachable != nullptr) return PickAvoiding(XXH64_digest(&state), *args.unreachable);
  return PickForHash(XXH64_digest(&state));
}

// A42's pseudo-code, branch for branch.
PickResult RingHashPicker::PickForHash(uint64_t hash) const {
  // The common case first: the first entry's endpoint from one cache line
  // of the ring, its state from its subchannel. A pick's time is spent
  // while its ring line is on its way, and the fewer instructions wait on
  // that load, the more picks' loads overlap: what a line cannot answer
  // (about 1 pick in 80, most of them answered by the next line) and a
  // first endpoint that is not READY take one out-of-line call, so the
  // common path keeps few registers and few instructions. Rings too small
  // for pick lines stay in cache: their table lookup is inline, which
  // costs less than a call. Every call here is the pick's last step, so
  // the common path saves one register (the result's address) and no
  // more.
  const Ring& ring = *ring_;
  uint32_t endpoint;
  if (ring.line_kind() == Ring::LineKind::kNarrow) {
    endpoint = ring.FindEndpointInNarrowLine(hash);
  } else if (ring.line_kind() == Ring::LineKind::kNone) {
    endpoint = ring.FindEndpointInTable(hash);
  } else {
    return PickFromWideLine(hash);
  }
  return PickEndpointIfReady(endpoint, hash);
}

PickResult RingHashPicker::PickFromWideLine(uint64_t hash) const {
  return PickEndpointIfReady(ring_->FindEndpointInWideLine(hash), hash);
}

PickResult RingHashPicker::PickFromIndexOf(uint64_t hash) const {
  // A narrow line's range that continues in the next line (about 1 pick
  // in 80): that line answers, if its endpoint is READY.
  if (ring_->line_kind() == Ring::LineKind::kNarrow) {
    if (const Subchannel* subchannel = ReadySubchannel(ring_->FindEndpointPastNarrowLine(hash))) {
      return PickResult::Complete(&subchannel->endpoint());
    }
  }
  const size_t first = ring_->FindIndex(hash);
  const ConnectivityState state = StateAt(first);
  if (state == ConnectivityState::kReady) return CompleteAt(first);
  return PickFromFirst(first, state);
}

PickResult RingHashPicker::PickAvoiding(uint64_t hash, const EndpointMask& unreachable) const {
  const size_t first = ring_->FindIndex(hash);
  return PickFromFirst(first, StateAt(first, &unreachable), &unreachable);
}

PickResult RingHashPicker::PickFromFirst(size_t first, ConnectivityState state,
                                         const EndpointMask* unreachable) const {
  switch (state) {
    case ConnectivityState::kReady:
      return CompleteAt(first);
    case ConnectivityState::kIdle:
      ConnectAt(first);
      return PickResult::Queue();
    case ConnectivityState::kConnecting:
      return PickResult::Queue();
    case ConnectivityState::kTransientFailure:
      break;
  }
  ConnectAt(first, unreachable);
  const uint32_t first_endpoint = (*ring_)[first].endpoint;
  bool found_second = false;
  bool found_first_non_failed = false;
  const size_t n = ring_->size();
  for (size_t i = 1; i < n; ++i) {
    const size_t index = (first + i) % n;
    if ((*ring_)[index].endpoint == first_endpoint) continue;
    const ConnectivityState state = StateAt(index, unreachable);
    if (state == ConnectivityState::kReady) return CompleteAt(index);
    if (!found_second) {
      if (state == ConnectivityState::kConnecting) return PickResult::Queue();
      if (state == ConnectivityState::kIdle) {
        ConnectAt(index);
        return PickResult::Queue();
      }
      found_second = true;
    }
    if (!found_first_non_failed) {
      if (state == ConnectivityState::kTransientFailure) {
        ConnectAt(index, unreachable);
      } else {
        if (state == ConnectivityState::kIdle) ConnectAt(index);
        found_first_non_failed = true;
      }
    }
  }
  return PickResult::Fail(&failure_);
}

// A76: a request without the configured header walks the ring from a
// random point to the first READY endpoint, asking at most one IDLE
// endpoint to connect (none if one was already connecting).
PickResult RingHashPicker::PickForRandomHash(uint64_t hash, const EndpointMask* unreachable) const {
  const size_t first = ring_->FindIndex(hash);
  bool requested_connection = any_connecting_;
  const size_t n = ring_->size();
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (first + i) % n;
    const ConnectivityState state = StateAt(index, unreachable);
    if (state == ConnectivityState::kReady) return CompleteAt(index);
    if (!requested_connection && state == ConnectivityState::kIdle) {
      ConnectAt(index);
      requested_connection = true;
    }
  }
  if (requested_connection) return PickResult::Queue();
  return PickResult::Fail(&failure_);
}

}  // namespace uxds
