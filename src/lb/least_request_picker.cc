#include "lb/least_request_picker.h"

namespace uxds {

LeastRequestPicker::LeastRequestPicker(std::vector<Entry> ready, uint32_t choice_count)
    : ready_(std::move(ready)), choice_count_(choice_count) {
  candidates_.reserve(ready_.size());
  for (const Entry& e : ready_) {
    candidates_.push_back(Candidate{&e.subchannel->endpoint(), e.outstanding.get()});
  }
}

PickResult LeastRequestPicker::Pick(const PickArgs& args) const {
  const size_t n = candidates_.size();
  const Candidate* best = nullptr;
  int64_t best_outstanding = 0;
  // A48's pseudo-code: the first draw is the candidate; a later one takes
  // its place only with strictly fewer outstanding calls.
  for (uint32_t i = 0; i < choice_count_; ++i) {
    const Candidate& drawn = candidates_[ThreadRandom() % n];
    // An endpoint the picking loop cannot reach is not a candidate (as
    // round_robin passes over it).
    if (args.unreachable != nullptr && args.unreachable->Contains(drawn.endpoint->index))
        [[unlikely]] {
      continue;
    }
    const int64_t outstanding = drawn.outstanding->Load();
    if (best == nullptr || outstanding < best_outstanding) {
      best = &drawn;
      best_outstanding = outstanding;
    }
  }
  if (best == nullptr) [[unlikely]]
    best = &AnyReachable(*args.unreachable);
  // A48: counted once picked; every kComplete pick's end is given once.
  best->outstanding->Acquire();
  PickResult result = PickResult::Complete(best->endpoint);
  result.endpoint_calls = best->outstanding;
  return result;
}

const LeastRequestPicker::Candidate& LeastRequestPicker::AnyReachable(
    const EndpointMask& unreachable) const {
  const size_t n = candidates_.size();
  const size_t start = ThreadRandom() % n;
  for (size_t k = 0; k < n; ++k) {
    const Candidate& c = candidates_[(start + k) % n];
    if (!unreachable.Contains(c.endpoint->index)) return c;
  }
  return candidates_[start];
}

}  // namespace uxds
