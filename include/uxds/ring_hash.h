// The ring of the ring_hash LB policy (gRFC A42, A76): built exactly as Envoy
// and gRPC build it, so that for the same endpoints, weights and request hash
// every implementation picks the same endpoint, with an O(1) lookup.
//
// The ring_hash policy, `uxds ring` and the pick benchmarks all use this code.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/status.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace uxds {

// A42 sizes. The xDS limit on both sizes is 8M; the local cap (gRPC's
// default 4096) then limits both, so a control plane cannot make a client
// build (and keep) an 8M-entry ring unless the client allows it.
struct RingSizeConfig {
  static constexpr uint64_t kDefaultMinRingSize = 1024;
  static constexpr uint64_t kDefaultMaxRingSize = 8388608;
  static constexpr uint64_t kMaxRingSizeLimit = 8388608;
  static constexpr uint64_t kDefaultRingSizeCap = 4096;

  uint64_t min_ring_size = kDefaultMinRingSize;
  uint64_t max_ring_size = kDefaultMaxRingSize;
  uint64_t ring_size_cap = kDefaultRingSizeCap;

  // A42: both sizes in [1, 8388608] and min <= max; the cap at least 1.
  // The message names the field, as the Cluster decoder does.
  Status Validate() const;
  // min(min_ring_size, cap), min(max_ring_size, cap).
  uint64_t effective_min() const;
  uint64_t effective_max() const;
};

// One endpoint as the ring sees it.
struct RingEndpoint {
  // What is hashed to place the endpoint: the A76 hash key when the endpoint
  // has one, else its first address as "ip:port" ("[v6]:port").
  std::string hash_key;
  // Locality weight x endpoint weight (A42); 0 counts as 1.
  uint64_t weight = 1;
};

// One endpoint as a resolver or EDS hands it to ring_hash, before
// de-duplication.
struct RingHashAddress {
  std::string address;   // "ip:port" / "[v6]:port", as RingHashAddressText gives it
  std::string hash_key;  // A76: the EDS `envoy.lb` `hash_key` (empty: none)
  uint64_t weight = 1;   // locality weight x endpoint weight; 0 counts as 1
};

// NOTES.md "Ring hash": de-duplicates by address, summing the weights into
// the first occurrence (whose hash key is kept), and keys each endpoint by
// its A76 hash key, else its address. The ring_hash policy and `uxds ring`
// both build their ring input here. `kept`, when given, receives for each
// returned endpoint the index in `addresses` of the occurrence kept.
std::vector<RingEndpoint> BuildRingEndpoints(std::span<const RingHashAddress> addresses,
                                             std::vector<size_t>* kept = nullptr);

// "ip:port" text in the form the ring hashes ("10.0.0.1:80",
// "[2001:db8::1]:443"), or why `host_port` is not an IP address and port.
StatusOr<std::string> RingHashAddressText(std::string_view host_port);

class Ring {
 public:
  struct Entry {
    uint64_t hash;
    uint32_t endpoint;  // index into the endpoint list the ring was built from
  };

  Ring() = default;
  // Builds the ring (NOTES.md "Ring hash"): normalized weights, scale from
  // the smallest weight and the (capped) sizes, `<key>_<n>` hashed with XXH64
  // seed 0, entries sorted by hash. An empty list gives an empty ring;
  // `sizes` must be valid. Endpoints sharing a hash key get equal hashes
  // (ties keep list order).
  static Ring Build(std::span<const RingEndpoint> endpoints, const RingSizeConfig& sizes);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Entry& operator[](size_t i) const { return entries_[i]; }
  std::span<const Entry> entries() const { return {entries_.data(), size_}; }

  // A42: the index of the first entry whose hash is >= `hash`, or 0 if there
  // is none (the ring wraps). Expected O(1): a table indexed by the hash's
  // top bits gives the first entry of its bucket (about one entry per
  // bucket); a crowded bucket falls back to a binary search inside it.
  size_t FindIndex(uint64_t hash) const {
    const uint64_t bucket = hash >> bucket_shift_;
    const uint32_t lo = bucket_start_[bucket];
    const uint32_t in_bucket = bucket_start_[bucket + 1] - lo;
    if (in_bucket > window_) [[unlikely]] {
      return BinarySearchIn(hash, lo, lo + in_bucket);
    }
    // Entries are sorted, so the answer is `lo` plus the number of the
    // bucket's entries below `hash`. The window may run past the bucket:
    // later buckets' entries (and the padding after the last entry, at
    // UINT64_MAX) are never below `hash`, so they add nothing. No branch
    // depends on the hashes: one would be mispredicted about once a pick,
    // and a misprediction also discards the cache misses that later,
    // independent picks had already started.
    const Entry* e = entries_.data() + lo;
    size_t index = lo + CountBelow(e, hash);
    // Large rings have fewer, fuller buckets (see BuildIndexAndSort); the
    // branch goes the same way for every pick of a ring.
    if (window_ == kWideScanWindow) index += CountBelow(e + kScanWindow, hash);
    return index == size_ ? 0 : index;
  }

  // The endpoint of the entry FindIndex(hash) finds, from one cache line:
  // what a pick reads when that endpoint is READY. The ring is also laid
  // out as one 64-byte line per range of hashes (see PickLine); a pick
  // compares the 16 hash bits below the line's with the line's 16-bit keys
  // at once and takes the endpoint beside the first key not below them.
  // A key equal to the query's bits (the entry's full hash decides, about 1
  // pick in 8000), a line whose range holds more entries than fit, or a ring
  // with too many endpoints for 16 bits answers through FindIndex.
  uint32_t FindEndpoint(uint64_t hash) const {
    const uint32_t endpoint = FindEndpointInLine(hash);
    if (endpoint != kNotInLine) [[likely]]
      return endpoint;
    return entries_[FindIndex(hash)].endpoint;
  }
  // FindEndpoint's answer from the line alone, or kNotInLine when that
  // needs FindIndex: lets a caller keep the common path free of calls.
  static constexpr uint32_t kNotInLine = UINT32_MAX;
  uint32_t FindEndpointInLine(uint64_t hash) const {
    if (lines_.empty()) return kNotInLine;
    const PickLine& line = lines_[hash >> line_shift_];
    const uint16_t query = static_cast<uint16_t>(hash >> key_shift_) ^ PickLine::kSignBit;
    const PickLine::Masks masks = line.Compare(query);
    // No key equal to the query, and not an overflowing line (its keys are
    // all 0 in the count below, so its last slot counts too).
    if (((masks.below & PickLine::kLastSlotBit) | masks.equal) != 0) return kNotInLine;
    // The keys are sorted: the bits of those below form a run from bit 0,
    // and the last slot's key (all ones) is never below.
    return line.endpoint[std::countr_one(masks.below)];
  }

  // The same answer by a binary search over the whole ring: what Envoy and
  // gRPC do; kept as the benchmark's baseline and the tests' reference.
  size_t FindIndexByBinarySearch(uint64_t hash) const;
  // Whether FindEndpoint answers from the packed lines (tests).
  bool has_pick_lines() const { return !lines_.empty(); }

 private:
  // Buckets of up to window_ entries are scanned; fuller ones (about 2 %
  // of them) are binary searched.
  static constexpr uint32_t kScanWindow = 4;
  // Rings of at least kWideFrom entries use about 4 entries per bucket and
  // scan 8: a quarter of the table, which then stays in cache.
  static constexpr uint32_t kWideScanWindow = 8;
  static constexpr size_t kWideFrom = size_t{1} << 18;
  static size_t CountBelow(const Entry* e, uint64_t hash) {
    static_assert(kScanWindow == 4);
    return static_cast<size_t>(e[0].hash < hash) + static_cast<size_t>(e[1].hash < hash) +
           static_cast<size_t>(e[2].hash < hash) + static_cast<size_t>(e[3].hash < hash);
  }
  static constexpr uint32_t kInsertionSortLimit = 32;
  size_t BinarySearchIn(uint64_t hash, uint32_t lo, uint32_t hi) const;
  void BuildIndexAndSort(std::span<const Entry> unsorted);
  // Build's scratch buffers are kept for rings up to this size.
  static constexpr size_t kKeptScratchEntries = size_t{1} << 16;
  void BuildPickLines(size_t endpoint_count);

  // The hashes in [b << line_shift_, (b + 1) << line_shift_): the keys of
  // the range's entries (the 16 hash bits below the line's, sign bit
  // flipped so a signed compare orders them as unsigned), sorted, each with
  // its entry's endpoint; then all-ones keys beside the endpoint of the
  // range's first later entry (wrapping to entry 0). A range of more than
  // kEntries entries has every key 0 (an overflow: a pick sees its last
  // key below or equal to the query's).
  struct alignas(64) PickLine {
    static constexpr size_t kSlots = 16;
    static constexpr size_t kEntries = kSlots - 1;  // the last slot is always padding
    static constexpr uint16_t kSignBit = 0x8000;
    static constexpr uint32_t kLastSlotBit = uint32_t{1} << (kSlots - 1);
    struct Masks {
      uint32_t below;  // bit i: key[i] < query
      uint32_t equal;  // bit i: key[i] == query
    };
    Masks Compare(uint16_t query) const {
#if defined(__SSE2__)
      // Both halves of the keys at once, a bit per key: a few instructions
      // after the line's load, where a pick's time goes (the loads of other
      // picks overlap only while this work is short).
      const __m128i q = _mm_set1_epi16(static_cast<int16_t>(query));
      const __m128i low = _mm_load_si128(reinterpret_cast<const __m128i*>(key));
      const __m128i high = _mm_load_si128(reinterpret_cast<const __m128i*>(key) + 1);
      const __m128i below = _mm_packs_epi16(_mm_cmpgt_epi16(q, low), _mm_cmpgt_epi16(q, high));
      const __m128i equal = _mm_packs_epi16(_mm_cmpeq_epi16(q, low), _mm_cmpeq_epi16(q, high));
      return {static_cast<uint32_t>(_mm_movemask_epi8(below)),
              static_cast<uint32_t>(_mm_movemask_epi8(equal))};
#else
      Masks masks{0, 0};
      for (size_t i = 0; i < kSlots; ++i) {
        const auto k = static_cast<int16_t>(key[i]);
        const auto q = static_cast<int16_t>(query);
        masks.below |= static_cast<uint32_t>(k < q) << i;
        masks.equal |= static_cast<uint32_t>(k == q) << i;
      }
      return masks;
#endif
    }
    uint16_t key[kSlots];
    uint16_t endpoint[kSlots];
  };
  static_assert(sizeof(PickLine) == 64);
  std::vector<PickLine> lines_;  // empty: FindEndpoint uses FindIndex
  unsigned line_shift_ = 63;
  unsigned key_shift_ = 47;  // line_shift_ - 16

  // The sorted entries, then kWideScanWindow padding entries that FindIndex
  // may read but never counts.
  std::vector<Entry> entries_ = std::vector<Entry>(kWideScanWindow, Entry{UINT64_MAX, 0});
  size_t size_ = 0;
  uint32_t window_ = kScanWindow;  // kScanWindow or kWideScanWindow
  // bucket_start_[b] = first entry whose hash >> bucket_shift_ >= b; one
  // extra element (= size()) closes the last bucket.
  std::vector<uint32_t> bucket_start_{0, 0, 0};
  unsigned bucket_shift_ = 63;
};

// XXH64 with seed 0: the hash A42 uses for ring entries and request hashes.
uint64_t XxHash64(std::string_view data);

}  // namespace uxds
