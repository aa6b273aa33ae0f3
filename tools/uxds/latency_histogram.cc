#include "latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace uxds::tool {

int LatencyHistogram::BucketOf(uint64_t value) {
  if (value < kExactBelow) return static_cast<int>(value);
  const int exponent = std::bit_width(value) - 1;  // 8..63
  const int sub = static_cast<int>((value >> (exponent - kSubBits)) & ((1 << kSubBits) - 1));
  return kExactBelow + (exponent - 8) * (1 << kSubBits) + sub;
}

uint64_t LatencyHistogram::ValueOf(int index) {
  if (index < kExactBelow) return static_cast<uint64_t>(index);
  const int exponent = 8 + (index - kExactBelow) / (1 << kSubBits);
  const uint64_t sub = static_cast<uint64_t>((index - kExactBelow) % (1 << kSubBits));
  const int shift = exponent - kSubBits;
  const uint64_t low = ((uint64_t{1} << kSubBits) + sub) << shift;
  return low + ((uint64_t{1} << shift) >> 1);
}

void LatencyHistogram::Add(int64_t value_us) {
  const uint64_t value = value_us < 0 ? 0 : static_cast<uint64_t>(value_us);
  ++counts_[static_cast<size_t>(BucketOf(value))];
  ++count_;
  max_ = std::max(max_, static_cast<int64_t>(value));
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
}

int64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  const auto rank = std::clamp<uint64_t>(
      static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))), 1, count_);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[static_cast<size_t>(i)];
    // The middle of the top bucket may lie above the largest value seen.
    if (seen >= rank) return std::min(static_cast<int64_t>(ValueOf(i)), max_);
  }
  return max_;
}

}  // namespace uxds::tool
