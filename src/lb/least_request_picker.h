// least_request's picker (A48): of `choice_count` READY endpoints drawn at
// random (with replacement, as Envoy's "all weights equal" algorithm), the
// one with the fewest outstanding calls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lb/call_counter.h"
#include "lb/lb_policy.h"

namespace uxds {

class LeastRequestPicker final : public Picker {
 public:
  struct Entry {
    SubchannelRef subchannel;
    // A48: the policy's count of the endpoint's outstanding calls, kept
    // across pickers while the endpoint stays in the policy's list.
    std::shared_ptr<CallCounter> outstanding;
  };
  // `ready` not empty; `choice_count` in [2, 10].
  LeastRequestPicker(std::vector<Entry> ready, uint32_t choice_count);
  // Counts the call on the endpoint it returns (PickResult::endpoint_calls)
  // until its end is given: the count is sharded per thread (CallCounter),
  // so a pick writes no line other picking threads write, and reads one
  // sum of shards per draw.
  PickResult Pick(const PickArgs& args) const override;

 private:
  struct Candidate {
    const Endpoint* endpoint;
    CallCounter* outstanding;
  };
  // With PickArgs::unreachable: the first READY endpoint the picking thread
  // can reach from a random start, else any (the caller fails that pick).
  const Candidate& AnyReachable(const EndpointMask& unreachable) const;

  std::vector<Entry> ready_;
  std::vector<Candidate> candidates_;
  const uint32_t choice_count_;
};

}  // namespace uxds
