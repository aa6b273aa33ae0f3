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

namespace ring_internal {

// Memory for the arrays a pick reads at random places. From 2 MiB on it is
// aligned to 2 MiB and marked for transparent huge pages (where the kernel
// gives them on request), so a lookup costs its cache miss and not also a
// page walk; an unaligned block would leave up to 2 MiB at each end on
// small pages. Smaller arrays come from operator new.
void* AllocateForRandomReads(size_t bytes, size_t alignment);
void FreeForRandomReads(void* memory, size_t bytes, size_t alignment);

template <typename T>
struct RandomReadAllocator {
  using value_type = T;
  RandomReadAllocator() = default;
  template <typename U>
  RandomReadAllocator(const RandomReadAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(AllocateForRandomReads(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* memory, size_t n) { FreeForRandomReads(memory, n * sizeof(T), alignof(T)); }
  template <typename U>
  bool operator==(const RandomReadAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using RandomReadVector = std::vector<T, RandomReadAllocator<T>>;

}  // namespace ring_internal

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
    const size_t index = FindIndexInTable(hash);
    if (index == kCrowdedBucket) [[unlikely]]
      return BinarySearchInBucket(hash);
    return index;
  }
  // FindIndex without the binary search of a crowded bucket: kCrowdedBucket
  // then. Nothing here calls a function, so a caller that sends crowded
  // buckets elsewhere keeps its own fast path free of calls.
  static constexpr size_t kCrowdedBucket = SIZE_MAX;
  size_t FindIndexInTable(uint64_t hash) const {
    const uint64_t bucket = hash >> bucket_shift_;
    const uint32_t lo = bucket_start_[bucket];
    const uint32_t in_bucket = bucket_start_[bucket + 1] - lo;
    if (in_bucket > window_) [[unlikely]] {
      return kCrowdedBucket;
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
  // The endpoint of FindIndexInTable's entry, or kNotInLine for a crowded
  // bucket.
  uint32_t FindEndpointInTable(uint64_t hash) const {
    const size_t index = FindIndexInTable(hash);
    return index == kCrowdedBucket ? kNotInLine : entries_[index].endpoint;
  }

  // The endpoint of the entry FindIndex(hash) finds, from one cache line:
  // what a pick reads when that endpoint is READY. Rings of kLinesFrom
  // entries and more are also laid out as 64-byte lines, one per range of
  // hashes (see NarrowLine and WideLine); a pick compares the query's key
  // with the line's keys at once and takes the endpoint beside the first
  // key not below it. A narrow line's range that holds more entries than
  // fit continues in the next line (FindEndpointPastNarrowLine). A key
  // equal to the query's (the entries' full hashes decide), a wide line
  // whose range holds more entries than fit, or a ring with too many
  // endpoints for 16 bits answers through FindIndex.
  uint32_t FindEndpoint(uint64_t hash) const {
    uint32_t endpoint = kNotInLine;
    if (line_kind_ == LineKind::kNarrow) {
      endpoint = FindEndpointInNarrowLine(hash);
      if (endpoint == kNotInLine) endpoint = FindEndpointPastNarrowLine(hash);
    } else if (line_kind_ == LineKind::kWide) {
      endpoint = FindEndpointInWideLine(hash);
    }
    if (endpoint != kNotInLine) [[likely]]
      return endpoint;
    return entries_[FindIndex(hash)].endpoint;
  }
  // FindEndpoint's answer from a line alone, or kNotInLine when that needs
  // FindIndex: lets a caller keep the common path free of calls.
  static constexpr uint32_t kNotInLine = UINT32_MAX;
  enum class LineKind : uint8_t {
    kNone,    // FindIndex answers every pick (small rings stay in cache)
    kNarrow,  // NarrowLine: rings of at most NarrowLine::kMaxEndpoints endpoints
    kWide,    // WideLine: up to 65536 endpoints
  };
  LineKind line_kind() const { return line_kind_; }
  // How a ring's narrow lines came out (all zero without narrow lines):
  // for tests, and to see what the lines cost.
  struct NarrowLineCounts {
    size_t lines = 0;
    size_t continuing = 0;        // the range goes on in the next line
    size_t overflowing = 0;       // FindIndex answers the range's picks
    bool last_continues = false;  // the last range does not fit its line
  };
  NarrowLineCounts CountNarrowLines() const;
  // kNotInLine also when the query's range continues in the next line
  // (about 1 pick in 80): FindEndpointPastNarrowLine answers those.
  uint32_t FindEndpointInNarrowLine(uint64_t hash) const {
    // The line is the hash's place among line_count_ equal ranges; the key
    // its place inside that range: the high and low halves of one
    // 32x32-bit product. Both only grow with the hash. (Entries that share
    // their top 32 bits share a key: the equal-key check below sends those
    // picks to FindIndex.)
    const uint64_t place = (hash >> 32) * line_count_;
    const NarrowLine& line = narrow_lines_[static_cast<size_t>(place >> 32)];
    const uint16_t query = OwnKey(place);
    // The keys are sorted: those below the query form a run from slot 0.
    const unsigned slot = static_cast<unsigned>(std::countr_one(line.Below(query)));
    const uint32_t endpoint = line.endpoint[slot];
    // Elsewhere (an overflowing line, or the range continues in the next
    // line), or a key equal to the query's. Slot kSlots has no key (every
    // key was below): what KeyAt reads there are endpoint bytes, which at
    // worst send a pick the long way.
    if (endpoint == NarrowLine::kElsewhere || line.KeyAt(slot) == query) [[unlikely]] {
      return kNotInLine;
    }
    return endpoint;
  }
  // For a pick FindEndpointInNarrowLine could not answer: the endpoint
  // from the next line when the query's range continues there, else
  // kNotInLine (FindIndex answers).
  uint32_t FindEndpointPastNarrowLine(uint64_t hash) const;
  uint32_t FindEndpointInWideLine(uint64_t hash) const {
    const WideLine& line = wide_lines_[hash >> line_shift_];
    const uint16_t query = KeyOf(hash << (64 - line_shift_));
    const WideLine::Masks masks = line.Compare(query);
    // No key equal to the query, and not an overflowing line (its keys are
    // all 0 in the count below, so its last slot counts too).
    if (((masks.below & WideLine::kLastSlotBit) | masks.equal) != 0) return kNotInLine;
    // The keys are sorted: the bits of those below form a run from bit 0,
    // and the last slot's key (all ones) is never below.
    return line.endpoint[std::countr_one(masks.below)];
  }

  // The same answer by a binary search over the whole ring: what Envoy and
  // gRPC do; kept as the benchmark's baseline and the tests' reference.
  size_t FindIndexByBinarySearch(uint64_t hash) const;

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
  // FindIndex for a bucket of more than window_ entries.
  size_t BinarySearchInBucket(uint64_t hash) const;
  void BuildIndexAndSort(std::span<const Entry> unsorted);
  // Build's scratch buffers are kept for rings up to this size.
  static constexpr size_t kKeptScratchEntries = size_t{1} << 16;
  void BuildPickLines(size_t endpoint_count);
  void BuildNarrowLines();
  void BuildWideLines();
  // Rings of at least kLinesFrom entries get lines: from there on, a pick
  // through the table misses the cache twice (table, then entries) and
  // through a line once (measured: bench/ring_pick_bench.cc).
  static constexpr size_t kLinesFrom = kWideFrom;

  // A line's keys: the 16 bits of a hash's place inside its line's range
  // (the top bits of `place`), sign bit flipped so that a signed compare
  // orders them as unsigned.
  static constexpr uint16_t kSignBit = 0x8000;
  static uint16_t KeyOf(uint64_t place) {
    return static_cast<uint16_t>(static_cast<uint16_t>(place >> 48) ^ kSignBit);
  }
  static constexpr uint16_t kLowestKey = 0x0000 ^ kSignBit;
  static constexpr uint16_t kHighestKey = 0xFFFF ^ kSignBit;
  // A narrow line's keys, from a hash's place (hash >> 32) * line_count_:
  // the 15 bits below the line's number (bits 17-31 of `place`), and
  // above them whether the entry belongs to the line's own range (1) or
  // to the previous line's (0); sign bit flipped as in KeyOf. So every key
  // of the previous range orders below every key of the line's own.
  static uint16_t OwnKey(uint64_t place) {
    return static_cast<uint16_t>(static_cast<uint32_t>(place) >> 17);
  }
  static uint16_t CarriedKey(uint64_t place) {
    return static_cast<uint16_t>(OwnKey(place) | kSignBit);
  }

  // The entries whose hashes fall in one of line_count_ equal ranges, in
  // one cache line: their keys, sorted, then kHighestKey; each key's
  // entry's endpoint, and one more endpoint, at slot kSlots. A slot past
  // the range's entries (kHighestKey) and slot kSlots hold the endpoint of
  // the first entry after the range (wrapping to entry 0).
  //
  // A range of more entries than the line has room for continues in the
  // next line: its slot kSlots holds kElsewhere, and the next line begins
  // with the entries that did not fit (CarriedKey keys, below all of its
  // own). About 16 entries per line (kEntriesPerLine) make an 8M-entry ring
  // 32 MB; 9 % of the ranges continue, and about 1 pick in 80 reads a
  // second line. Without the continuation a line needs room for its whole
  // range: at 12 entries per line 0.6 % of ranges still overflowed to
  // FindIndex (two dependent misses), in 43 MB. A line that
  // cannot take even the previous range's rest (only with hashes chosen
  // to collide) has every key kLowestKey and every endpoint kElsewhere:
  // FindIndex answers its picks.
  //
  // Endpoints take one byte, so a line holds 21 entries where WideLine
  // holds 15.
  struct alignas(64) NarrowLine {
    static constexpr unsigned kSlots = 21;
    static constexpr uint8_t kElsewhere = 0xFF;
    static constexpr size_t kMaxEndpoints = kElsewhere;  // ids 0..254
    static constexpr size_t kEntriesPerLine = 16;
    // Bit i: key[i] < query; bits kSlots and up are zeros, so a run of
    // ones from bit 0 ends at kSlots at the latest.
    uint32_t Below(uint16_t query) const {
      constexpr uint32_t kKeyBits = (uint32_t{1} << kSlots) - 1;
#if defined(__SSE2__)
      // 24 lanes of 16 bits in three loads; lanes 21-23 are endpoint
      // bytes, cut off by kKeyBits. Few instructions wait on the
      // line's load, so the loads of independent picks overlap.
      const __m128i q = _mm_set1_epi16(static_cast<int16_t>(query));
      const auto* lanes = reinterpret_cast<const __m128i*>(this);
      const __m128i a = _mm_cmpgt_epi16(q, _mm_load_si128(lanes));
      const __m128i b = _mm_cmpgt_epi16(q, _mm_load_si128(lanes + 1));
      const __m128i c = _mm_cmpgt_epi16(q, _mm_load_si128(lanes + 2));
      const auto low = static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(a, b)));
      const auto high = static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(c, c)));
      return (low | (high << 16)) & kKeyBits;
#else
      uint32_t below = 0;
      for (unsigned i = 0; i < kSlots; ++i) {
        below |= static_cast<uint32_t>(static_cast<int16_t>(key[i]) < static_cast<int16_t>(query))
                 << i;
      }
      return below;
#endif
    }
    // key[slot] for slot < kSlots; for slot kSlots, the first two endpoint
    // bytes (inside the line: no read past it).
    uint16_t KeyAt(unsigned slot) const {
      uint16_t k;
      __builtin_memcpy(&k, reinterpret_cast<const unsigned char*>(this) + 2 * slot, sizeof(k));
      return k;
    }
    uint16_t key[kSlots];
    uint8_t endpoint[kSlots + 1];
  };
  static_assert(sizeof(NarrowLine) == 64);

  // For rings of more than NarrowLine::kMaxEndpoints endpoints: 2^k lines,
  // one per range of the hash's top k bits, 4 to 8 entries each. 16 keys
  // of 16 bits (the hash bits below the line's) and 16 endpoints of 16
  // bits: the range's entries, then kHighestKey keys beside the endpoint of
  // the range's first later entry. A range of more than kEntries entries
  // has every key kLowestKey (an overflow: a pick sees its last key below
  // or equal to the query's).
  struct alignas(64) WideLine {
    static constexpr size_t kSlots = 16;
    static constexpr size_t kEntries = kSlots - 1;  // the last slot is always padding
    static constexpr uint32_t kLastSlotBit = uint32_t{1} << (kSlots - 1);
    struct Masks {
      uint32_t below;  // bit i: key[i] < query
      uint32_t equal;  // bit i: key[i] == query
    };
    Masks Compare(uint16_t query) const {
#if defined(__SSE2__)
      // Both halves of the keys at once, a bit per key.
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
  static_assert(sizeof(WideLine) == 64);

  LineKind line_kind_ = LineKind::kNone;
  ring_internal::RandomReadVector<NarrowLine> narrow_lines_;
  uint64_t line_count_ = 0;  // narrow lines; below 2^32
  ring_internal::RandomReadVector<WideLine> wide_lines_;
  unsigned line_shift_ = 63;  // wide lines: a hash's top 64 - line_shift_ bits

  // The sorted entries, then kWideScanWindow padding entries that FindIndex
  // may read but never counts.
  ring_internal::RandomReadVector<Entry> entries_ =
      ring_internal::RandomReadVector<Entry>(kWideScanWindow, Entry{UINT64_MAX, 0});
  size_t size_ = 0;
  uint32_t window_ = kScanWindow;  // kScanWindow or kWideScanWindow
  // bucket_start_[b] = first entry whose hash >> bucket_shift_ >= b; one
  // extra element (= size()) closes the last bucket.
  ring_internal::RandomReadVector<uint32_t> bucket_start_{0, 0, 0};
  unsigned bucket_shift_ = 63;
};

// XXH64 with seed 0: the hash A42 uses for ring entries and request hashes.
uint64_t XxHash64(std::string_view data);

}  // namespace uxds
