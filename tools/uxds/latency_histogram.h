// LatencyHistogram: counts of latencies (microseconds) in a fixed number of
// log-linear buckets, so that `uxds call -n 10000000` keeps a constant
// amount of memory for its percentiles.
//
// Values below 256 have a bucket each (exact). Above, every power of two
// [2^e, 2^(e+1)) is split into 128 equal buckets; a percentile is reported
// as the middle of its bucket, within 1/256 (0.4%) of the true value. The
// maximum is kept exactly.
#pragma once

#include <array>
#include <cstdint>

namespace uxds::tool {

class LatencyHistogram {
 public:
  void Add(int64_t value_us);
  // Adds every value `other` holds (histograms of several threads).
  void Merge(const LatencyHistogram& other);
  uint64_t count() const { return count_; }
  int64_t max() const { return max_; }
  // The value at quantile q in [0, 1] (nearest rank), 0 when empty.
  int64_t Percentile(double q) const;

 private:
  static constexpr int kExactBelow = 256;  // 2^8
  static constexpr int kSubBits = 7;       // 128 buckets per power of two
  static constexpr int kBuckets = kExactBelow + (64 - 8) * (1 << kSubBits);

  static int BucketOf(uint64_t value);
  // The middle of bucket `index`.
  static uint64_t ValueOf(int index);

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  int64_t max_ = 0;
};

}  // namespace uxds::tool
