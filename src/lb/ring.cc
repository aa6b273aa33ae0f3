// A42 ring construction and lookup (see uxds/ring_hash.h).
#include <sys/mman.h>
// Inlined: hashing `<key>_<n>` is a few dozen instructions, less than a
// call into the shared library's length-generic code.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "uxds/ring_hash.h"

namespace uxds {

uint64_t XxHash64(std::string_view data) { return XXH64(data.data(), data.size(), 0); }

namespace ring_internal {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void* AllocateForRandomReads(size_t bytes, size_t alignment) {
  if (bytes < kHugePage) return ::operator new(bytes, std::align_val_t(alignment));
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* memory = std::aligned_alloc(kHugePage, rounded);
  if (memory == nullptr) throw std::bad_alloc();
  // Only a hint: without huge pages the array works the same.
  madvise(memory, rounded, MADV_HUGEPAGE);
  return memory;
}

void FreeForRandomReads(void* memory, size_t bytes, size_t alignment) {
  if (bytes < kHugePage) {
    ::operator delete(memory, std::align_val_t(alignment));
    return;
  }
  std::free(memory);
}

}  // namespace ring_internal

Status RingSizeConfig::Validate() const {
  // A42: the same limits the Cluster decoder applies to ring_hash_lb_config.
  if (min_ring_size == 0 || min_ring_size > kMaxRingSizeLimit) {
    return InvalidArgumentError("min_ring_size: must be in the range of 1 to 8388608");
  }
  if (max_ring_size == 0 || max_ring_size > kMaxRingSizeLimit) {
    return InvalidArgumentError("max_ring_size: must be in the range of 1 to 8388608");
  }
  if (min_ring_size > max_ring_size) {
    return InvalidArgumentError("min_ring_size: cannot be greater than max_ring_size");
  }
  if (ring_size_cap == 0 || ring_size_cap > kMaxRingSizeLimit) {
    return InvalidArgumentError("ring_size_cap: must be in the range of 1 to 8388608");
  }
  return Status();
}

uint64_t RingSizeConfig::effective_min() const { return std::min(min_ring_size, ring_size_cap); }
uint64_t RingSizeConfig::effective_max() const { return std::min(max_ring_size, ring_size_cap); }

namespace {

// Writes `n` in decimal at `out`; returns the number of characters.
size_t FormatDecimal(uint64_t n, char* out) {
  char digits[20];
  size_t len = 0;
  do {
    digits[len++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n != 0);
  for (size_t i = 0; i < len; ++i) out[i] = digits[len - 1 - i];
  return len;
}

// Makes `v` empty with room for `n` elements, untouched yet (so a large
// array's huge pages are not split by a copy into a smaller block first).
template <typename V>
void ReserveEmpty(V& v, size_t n) {
  V().swap(v);
  v.reserve(n);
}

}  // namespace

Ring Ring::Build(std::span<const RingEndpoint> endpoints, const RingSizeConfig& sizes) {
  Ring ring;
  if (endpoints.empty()) return ring;
  // NOTES.md "Ring hash", steps 1-3, with the same double arithmetic as
  // Envoy and gRPC: only that reproduces their rings entry for entry.
  double sum = 0;
  for (const RingEndpoint& e : endpoints) sum += static_cast<double>(e.weight == 0 ? 1 : e.weight);
  double min_normalized = 1.0;
  for (const RingEndpoint& e : endpoints) {
    min_normalized =
        std::min(min_normalized, static_cast<double>(e.weight == 0 ? 1 : e.weight) / sum);
  }
  const double min_ring = static_cast<double>(sizes.effective_min());
  const double max_ring = static_cast<double>(sizes.effective_max());
  const double scale = std::min(std::ceil(min_normalized * min_ring) / min_normalized, max_ring);

  // Scratch kept by the building thread between builds: a ring is rebuilt
  // on every EDS update, and fresh buffers of this size come from the
  // kernel each time (page faults) once the allocator has handed the last
  // ones back. Large rings' scratch is not kept.
  thread_local std::vector<Entry> unsorted;
  unsorted.clear();
  unsorted.reserve(static_cast<size_t>(std::ceil(scale)) + 1);
  // Step 4: walk endpoints in order; `<key>_<n>` hashed, n counting per
  // endpoint. The key is copied once; only the counter is rewritten.
  std::string buffer;
  double current = 0;
  double target = 0;
  for (uint32_t i = 0; i < endpoints.size(); ++i) {
    const RingEndpoint& e = endpoints[i];
    const double normalized = static_cast<double>(e.weight == 0 ? 1 : e.weight) / sum;
    target += scale * normalized;
    buffer.assign(e.hash_key);
    buffer.push_back('_');
    const size_t prefix = buffer.size();
    buffer.resize(prefix + 20);
    for (uint64_t n = 0; current < target; ++n, current += 1.0) {
      const size_t len = FormatDecimal(n, buffer.data() + prefix);
      unsorted.push_back(Entry{XXH64(buffer.data(), prefix + len, 0), i});
    }
  }
  ring.BuildIndexAndSort(unsorted);
  ring.BuildPickLines(endpoints.size());
  if (unsorted.capacity() > kKeptScratchEntries) std::vector<Entry>().swap(unsorted);
  return ring;
}

void Ring::BuildPickLines(size_t endpoint_count) {
  line_kind_ = LineKind::kNone;
  decltype(narrow_lines_)().swap(narrow_lines_);
  decltype(wide_lines_)().swap(wide_lines_);
  // Small rings stay in cache, where the table and the scan are faster.
  if (size_ < kLinesFrom) return;
  if (endpoint_count <= NarrowLine::kMaxEndpoints) {
    BuildNarrowLines();
  } else if (endpoint_count <= size_t{1} << 16) {
    BuildWideLines();
  }
}

void Ring::BuildNarrowLines() {
  const size_t n = size_;
  line_count_ = (n + NarrowLine::kEntriesPerLine - 1) / NarrowLine::kEntriesPerLine;
  ReserveEmpty(narrow_lines_, line_count_);
  narrow_lines_.resize(line_count_);
  // As FindEndpointInNarrowLine places a hash: line = place >> 32.
  auto place = [this](uint64_t hash) { return (hash >> 32) * line_count_; };
  size_t carried = 0;  // the first entry the previous line had no room for
  size_t next = 0;     // the first entry of the current line's range
  for (size_t b = 0; b < line_count_; ++b) {
    size_t end = next;
    while (end < n && (place(entries_[end].hash) >> 32) == b) ++end;
    NarrowLine& line = narrow_lines_[b];
    const size_t carried_count = next - carried;
    if (carried_count > NarrowLine::kSlots) {
      // Not even the previous range's rest fits: neither range can be
      // answered from lines (the previous line's continuation lands here).
      std::fill(std::begin(line.key), std::end(line.key), kLowestKey);
      std::fill(std::begin(line.endpoint), std::end(line.endpoint), NarrowLine::kElsewhere);
      carried = next = end;
      continue;
    }
    size_t slot = 0;
    for (size_t e = carried; e < next; ++e, ++slot) {
      line.key[slot] = CarriedKey(place(entries_[e].hash));
      line.endpoint[slot] = static_cast<uint8_t>(entries_[e].endpoint);
    }
    size_t e = next;
    for (; e < end && slot < NarrowLine::kSlots; ++e, ++slot) {
      line.key[slot] = OwnKey(place(entries_[e].hash));
      line.endpoint[slot] = static_cast<uint8_t>(entries_[e].endpoint);
    }
    // The endpoint of the first entry not in this line, for a query above
    // every key: the next range's first entry (wrapping to entry 0), or
    // kElsewhere when this range continues in the next line.
    const uint8_t after = e < end ? NarrowLine::kElsewhere
                                  : static_cast<uint8_t>(entries_[end == n ? 0 : end].endpoint);
    for (; slot < NarrowLine::kSlots; ++slot) {
      line.key[slot] = kHighestKey;
      line.endpoint[slot] = after;
    }
    line.endpoint[NarrowLine::kSlots] = after;
    carried = e;
    next = end;
  }
  line_kind_ = LineKind::kNarrow;
}

Ring::NarrowLineCounts Ring::CountNarrowLines() const {
  NarrowLineCounts counts;
  if (line_kind_ != LineKind::kNarrow) return counts;
  counts.lines = narrow_lines_.size();
  for (const NarrowLine& line : narrow_lines_) {
    if (line.endpoint[0] == NarrowLine::kElsewhere) {
      ++counts.overflowing;
    } else if (line.endpoint[NarrowLine::kSlots] == NarrowLine::kElsewhere) {
      ++counts.continuing;
      counts.last_continues = &line == &narrow_lines_.back();
    }
  }
  return counts;
}

uint32_t Ring::FindEndpointPastNarrowLine(uint64_t hash) const {
  const uint64_t place = (hash >> 32) * line_count_;
  const size_t b = static_cast<size_t>(place >> 32);
  const NarrowLine& line = narrow_lines_[b];
  // A range that continues: every key of a full line below the query's,
  // and kElsewhere after them. (An overflowing line's keys are all
  // kLowestKey too, but its first endpoint is kElsewhere, which no
  // endpoint of a line in use is.) The last line's range does not
  // continue anywhere lines can answer.
  const bool continues = line.endpoint[0] != NarrowLine::kElsewhere &&
                         line.endpoint[NarrowLine::kSlots] == NarrowLine::kElsewhere &&
                         std::countr_one(line.Below(OwnKey(place))) == NarrowLine::kSlots;
  if (!continues || b + 1 == line_count_) return kNotInLine;
  // The rest of the range leads the next line, keyed below that line's own
  // entries: the first key not below the query's is the answer, one of the
  // rest or the next range's first entry.
  const NarrowLine& next = narrow_lines_[b + 1];
  const uint16_t query = CarriedKey(place);
  const unsigned slot = static_cast<unsigned>(std::countr_one(next.Below(query)));
  const uint32_t endpoint = next.endpoint[slot];
  if (endpoint == NarrowLine::kElsewhere || next.KeyAt(slot) == query) return kNotInLine;
  return endpoint;
}

void Ring::BuildWideLines() {
  const size_t n = size_;
  // 4 to 8 entries per line: with 8, 0.8 % of the lines hold more than
  // WideLine::kEntries (Poisson), and those picks go through FindIndex.
  const unsigned bits = static_cast<unsigned>(std::bit_width(n - 1)) - 3;
  line_shift_ = 64 - bits;
  const size_t line_count = size_t{1} << bits;
  ReserveEmpty(wide_lines_, line_count);
  wide_lines_.resize(line_count);
  auto key_of = [this](uint64_t hash) { return KeyOf(hash << (64 - line_shift_)); };
  size_t next = 0;  // the first entry of the current line's range
  for (size_t b = 0; b < line_count; ++b) {
    size_t end = next;
    while (end < n && (entries_[end].hash >> line_shift_) == b) ++end;
    WideLine& line = wide_lines_[b];
    if (end - next > WideLine::kEntries) {
      std::fill(std::begin(line.key), std::end(line.key), kLowestKey);
      std::fill(std::begin(line.endpoint), std::end(line.endpoint), 0);
      next = end;
      continue;
    }
    const auto after = static_cast<uint16_t>(entries_[end == n ? 0 : end].endpoint);
    size_t i = 0;
    for (; next + i < end; ++i) {
      line.key[i] = key_of(entries_[next + i].hash);
      line.endpoint[i] = static_cast<uint16_t>(entries_[next + i].endpoint);
    }
    for (; i < WideLine::kSlots; ++i) {
      line.key[i] = kHighestKey;
      line.endpoint[i] = after;
    }
    next = end;
  }
  line_kind_ = LineKind::kWide;
}

// Step 5 and the lookup table together: a counting sort by the hash's top
// bits (hashes are uniform, so about one entry per bucket), then an
// insertion sort inside each bucket. Linear time, and the bucket starts are
// the lookup table. Insertion sort is stable: equal hashes keep the order
// in which they were generated.
void Ring::BuildIndexAndSort(std::span<const Entry> unsorted) {
  const size_t n = unsorted.size();
  // About one entry per bucket; about 4 for large rings, whose table
  // would otherwise be a quarter of the ring's size and miss the cache.
  window_ = n >= kWideFrom ? kWideScanWindow : kScanWindow;
  const unsigned wide_shift = window_ == kWideScanWindow ? 2 : 0;
  const unsigned bits = std::max(1u, static_cast<unsigned>(std::bit_width(n - 1)) - wide_shift);
  bucket_shift_ = 64 - bits;
  const size_t buckets = size_t{1} << bits;
  ReserveEmpty(bucket_start_, buckets + 1);
  bucket_start_.assign(buckets + 1, 0);
  for (const Entry& e : unsorted) ++bucket_start_[(e.hash >> bucket_shift_) + 1];
  for (size_t b = 1; b <= buckets; ++b) bucket_start_[b] += bucket_start_[b - 1];
  size_ = n;
  ReserveEmpty(entries_, n + kWideScanWindow);
  entries_.assign(n + kWideScanWindow, Entry{UINT64_MAX, 0});
  thread_local std::vector<uint32_t> fill;  // scratch, as in Build
  fill.assign(bucket_start_.begin(), bucket_start_.end() - 1);
  for (const Entry& e : unsorted) entries_[fill[e.hash >> bucket_shift_]++] = e;
  if (fill.capacity() > kKeptScratchEntries) std::vector<uint32_t>().swap(fill);
  for (size_t b = 0; b < buckets; ++b) {
    const uint32_t lo = bucket_start_[b];
    const uint32_t hi = bucket_start_[b + 1];
    if (hi - lo > kInsertionSortLimit) {
      // Crowded only if hash keys were chosen to collide (A76 keys come
      // from the control plane): stay O(n log n) then.
      std::stable_sort(entries_.begin() + lo, entries_.begin() + hi,
                       [](const Entry& x, const Entry& y) { return x.hash < y.hash; });
      continue;
    }
    for (uint32_t i = lo + 1; i < hi; ++i) {
      const Entry e = entries_[i];
      uint32_t j = i;
      while (j > lo && entries_[j - 1].hash > e.hash) {
        entries_[j] = entries_[j - 1];
        --j;
      }
      entries_[j] = e;
    }
  }
}

size_t Ring::BinarySearchInBucket(uint64_t hash) const {
  const uint64_t bucket = hash >> bucket_shift_;
  const uint32_t lo = bucket_start_[bucket];
  const uint32_t hi = bucket_start_[bucket + 1];
  const auto it = std::lower_bound(entries_.begin() + lo, entries_.begin() + hi, hash,
                                   [](const Entry& e, uint64_t h) { return e.hash < h; });
  const size_t index = static_cast<size_t>(it - entries_.begin());
  return index == size_ ? 0 : index;
}

size_t Ring::FindIndexByBinarySearch(uint64_t hash) const {
  // The loop Envoy and gRPC run: lowbound/highbound over the sorted ring.
  size_t low = 0;
  size_t high = size_;
  while (low < high) {
    const size_t mid = low + (high - low) / 2;
    if (entries_[mid].hash < hash) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low == size_ ? 0 : low;
}

}  // namespace uxds
