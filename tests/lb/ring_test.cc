// The A42 ring (uxds/ring_hash.h) against a naive ring built here from
// NOTES.md "Ring hash" (snprintf, XXH64, std::sort), the O(1) lookup against
// binary search, and a few picks pinned to hashes computed outside uxds.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "uxds/ring_hash.h"

namespace uxds::testing {
namespace {

struct NaiveEntry {
  uint64_t hash;
  uint32_t endpoint;
  friend bool operator<(const NaiveEntry& a, const NaiveEntry& b) {
    // Equal hashes only come from endpoints sharing a hash key; they were
    // generated in endpoint order.
    return a.hash != b.hash ? a.hash < b.hash : a.endpoint < b.endpoint;
  }
};

// NOTES.md "Ring hash", step by step, written for clarity, not speed.
std::vector<NaiveEntry> NaiveRing(const std::vector<RingEndpoint>& endpoints, uint64_t min_ring,
                                  uint64_t max_ring, uint64_t cap) {
  // Step 2: the local cap limits both sizes.
  min_ring = std::min(min_ring, cap);
  max_ring = std::min(max_ring, cap);
  // Step 1.
  double sum = 0;
  for (const RingEndpoint& e : endpoints) sum += static_cast<double>(e.weight);
  std::vector<double> normalized;
  double smallest = 1.0;
  for (const RingEndpoint& e : endpoints) {
    normalized.push_back(static_cast<double>(e.weight) / sum);
    smallest = std::min(smallest, normalized.back());
  }
  // Step 3.
  const double scale = std::min(std::ceil(smallest * static_cast<double>(min_ring)) / smallest,
                                static_cast<double>(max_ring));
  // Step 4.
  std::vector<NaiveEntry> ring;
  double current = 0;
  double target = 0;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    target += scale * normalized[i];
    for (unsigned long long n = 0; current < target; ++n, current += 1) {
      char key[512];
      const int len = std::snprintf(key, sizeof(key), "%s_%llu", endpoints[i].hash_key.c_str(), n);
      ring.push_back(NaiveEntry{XXH64(key, static_cast<size_t>(len), 0), static_cast<uint32_t>(i)});
    }
  }
  // Step 5.
  std::sort(ring.begin(), ring.end());
  return ring;
}

// Builds both rings and compares them entry by entry.
Ring ExpectSameAsNaive(const std::vector<RingEndpoint>& endpoints, uint64_t min_ring,
                       uint64_t max_ring, uint64_t cap = RingSizeConfig::kDefaultRingSizeCap) {
  RingSizeConfig sizes;
  sizes.min_ring_size = min_ring;
  sizes.max_ring_size = max_ring;
  sizes.ring_size_cap = cap;
  EXPECT_TRUE(sizes.Validate().ok()) << sizes.Validate().ToString();
  Ring ring = Ring::Build(endpoints, sizes);
  const std::vector<NaiveEntry> naive = NaiveRing(endpoints, min_ring, max_ring, cap);
  EXPECT_EQ(ring.size(), naive.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < std::min(ring.size(), naive.size()); ++i) {
    if (ring[i].hash != naive[i].hash || ring[i].endpoint != naive[i].endpoint) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << "entry " << i << ": " << ring[i].hash << "/" << ring[i].endpoint
                      << " vs naive " << naive[i].hash << "/" << naive[i].endpoint;
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  return ring;
}

std::vector<RingEndpoint> EqualEndpoints(size_t n) {
  std::vector<RingEndpoint> endpoints;
  for (size_t i = 0; i < n; ++i) {
    endpoints.push_back(RingEndpoint{"10." + std::to_string(i / 65536) + "." +
                                         std::to_string(i / 256 % 256) + "." +
                                         std::to_string(i % 256) + ":8080",
                                     1});
  }
  return endpoints;
}

std::vector<size_t> EntriesPerEndpoint(const Ring& ring, size_t endpoints) {
  std::vector<size_t> counts(endpoints, 0);
  for (const Ring::Entry& e : ring.entries()) ++counts[e.endpoint];
  return counts;
}

TEST(RingTest, MatchesNaiveRingForFixedInputs) {
  ExpectSameAsNaive(EqualEndpoints(1), 1024, 8388608);
  ExpectSameAsNaive(EqualEndpoints(3), 1024, 8388608);
  ExpectSameAsNaive(EqualEndpoints(75), 1024, 4096);
  ExpectSameAsNaive(EqualEndpoints(1000), 1024, 8388608);
  ExpectSameAsNaive(EqualEndpoints(5000), 1024, 8388608);
  ExpectSameAsNaive(EqualEndpoints(3), 5, 10);
  ExpectSameAsNaive({{"[2001:db8::1]:443", 1}, {"[2001:db8::2]:443", 2}, {"10.0.0.9:1", 5}}, 1024,
                    8388608);
  ExpectSameAsNaive(
      {{"10.0.0.1:80", 1}, {"10.0.0.2:80", 2}, {"10.0.0.3:80", 3}, {"10.0.0.4:80", 7}}, 100, 200);
  // 200 endpoints with weights from a fixed seed, on a larger cap.
  std::mt19937_64 random(42);
  std::vector<RingEndpoint> weighted = EqualEndpoints(200);
  for (RingEndpoint& e : weighted) e.weight = 1 + random() % 50;
  ExpectSameAsNaive(weighted, 1024, 8388608);
  ExpectSameAsNaive(weighted, 10000, 65536, 65536);
}

TEST(RingTest, NotesExampleFourEqualEndpointsMaxRingSix) {
  // NOTES.md: 4 equal endpoints with max ring 6 get 2, 1, 2, 1 entries
  // (scale 6; targets 1.5, 3, 4.5, 6). Sizes from the config...
  Ring ring = ExpectSameAsNaive(EqualEndpoints(4), 6, 6);
  EXPECT_EQ(EntriesPerEndpoint(ring, 4), (std::vector<size_t>{2, 1, 2, 1}));
  // ... or from the local cap, which limits both sizes.
  Ring capped = ExpectSameAsNaive(EqualEndpoints(4), 1024, 8388608, 6);
  EXPECT_EQ(EntriesPerEndpoint(capped, 4), (std::vector<size_t>{2, 1, 2, 1}));
}

TEST(RingTest, DoubleArithmeticCanGiveOneEntryMoreThanTheMaximum) {
  // NOTES.md's 4097 entries for 1024/4096 happen for some weights only:
  // 7 endpoints of weight 1 and 7 of weight 1000 scale to 4096, but the
  // running double target ends just above 4096.
  std::vector<RingEndpoint> endpoints = EqualEndpoints(14);
  for (size_t i = 7; i < 14; ++i) endpoints[i].weight = 1000;
  Ring ring = ExpectSameAsNaive(endpoints, 1024, 4096);
  EXPECT_EQ(ring.size(), 4097u);
  // Equal weights on the same sizes stay at ceil(scale): 5000 endpoints
  // scale to exactly 4096, 3 to 1026.
  EXPECT_EQ(ExpectSameAsNaive(EqualEndpoints(5000), 1024, 4096).size(), 4096u);
  EXPECT_EQ(ExpectSameAsNaive(EqualEndpoints(3), 1024, 4096).size(), 1026u);
  // And 75 equal endpoints scale to 1050 but get 1051.
  EXPECT_EQ(ExpectSameAsNaive(EqualEndpoints(75), 1024, 4096).size(), 1051u);
}

TEST(RingTest, WeightsAreLocalityTimesEndpointAndDuplicatesAddUp) {
  // A42's example: locality 1 (weight 3) holds A (2) and B (1), locality 2
  // (weight 2) holds C (3) and D (1): the ring sees 6, 3, 6, 2.
  const std::vector<RingHashAddress> listed = {{"10.0.0.1:80", "", 3 * 2},
                                               {"10.0.0.2:80", "", 3 * 1},
                                               {"10.0.0.3:80", "", 2 * 3},
                                               {"10.0.0.4:80", "", 2 * 1}};
  std::vector<size_t> kept;
  const std::vector<RingEndpoint> endpoints = BuildRingEndpoints(listed, &kept);
  ASSERT_EQ(endpoints.size(), 4u);
  EXPECT_EQ(kept, (std::vector<size_t>{0, 1, 2, 3}));
  Ring ring = ExpectSameAsNaive(endpoints, 17, 17);
  // Scale: smallest weight 2/17 -> ceil(2) / (2/17) = 17 entries.
  EXPECT_EQ(EntriesPerEndpoint(ring, 4), (std::vector<size_t>{6, 3, 6, 2}));

  // An address listed twice: one endpoint, weights summed into the first
  // occurrence, whose hash key (here: none) is kept.
  const std::vector<RingHashAddress> duplicated = {{"10.0.0.1:80", "", 2},
                                                   {"10.0.0.2:80", "", 3},
                                                   {"10.0.0.1:80", "other-key", 4},
                                                   {"10.0.0.3:80", "", 0}};
  const std::vector<RingEndpoint> merged = BuildRingEndpoints(duplicated, &kept);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(kept, (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(merged[0].hash_key, "10.0.0.1:80");
  EXPECT_EQ(merged[0].weight, 6u);
  EXPECT_EQ(merged[1].weight, 3u);
  EXPECT_EQ(merged[2].weight, 1u);  // 0 counts as 1
  ExpectSameAsNaive(merged, 1024, 8388608);
}

TEST(RingTest, LocalCapLimitsBothSizes) {
  // Cap below the minimum: min and max both become 100. Three equal
  // endpoints would scale to 102 (ceil(100/3) * 3); the capped max is 100.
  EXPECT_EQ(ExpectSameAsNaive(EqualEndpoints(3), 1024, 8388608, 100).size(), 100u);
  // Without the cap on the minimum, min 1024 would give 1026.
  EXPECT_EQ(ExpectSameAsNaive(EqualEndpoints(3), 1024, 8388608, 8388608).size(), 1026u);
  // Cap above both sizes: the config's sizes rule.
  EXPECT_EQ(ExpectSameAsNaive(EqualEndpoints(3), 10, 20, 8388608).size(), 12u);
  // The default cap (4096) on an 8M maximum: 5000 endpoints get 4096.
  EXPECT_EQ(ExpectSameAsNaive(EqualEndpoints(5000), 1024, 8388608).size(), 4096u);
  // Raised, it lets 5000 endpoints have one entry each.
  EXPECT_EQ(ExpectSameAsNaive(EqualEndpoints(5000), 1024, 8388608, 8388608).size(), 5000u);
}

TEST(RingTest, A76HashKeysReplaceTheAddress) {
  const std::vector<RingHashAddress> listed = {{"10.0.0.1:80", "node-a", 1},
                                               {"10.0.0.2:80", "", 1}};
  const std::vector<RingEndpoint> endpoints = BuildRingEndpoints(listed);
  ASSERT_EQ(endpoints.size(), 2u);
  EXPECT_EQ(endpoints[0].hash_key, "node-a");
  EXPECT_EQ(endpoints[1].hash_key, "10.0.0.2:80");
  Ring ring = ExpectSameAsNaive(endpoints, 4, 4);
  // The key's hash is on the ring, the address's is not.
  bool key_found = false;
  for (const Ring::Entry& e : ring.entries()) {
    EXPECT_NE(e.hash, XxHash64("10.0.0.1:80_0"));
    if (e.hash == XxHash64("node-a_0")) key_found = e.endpoint == 0;
  }
  EXPECT_TRUE(key_found);
  // Moving the key to another address keeps the key's places on the ring.
  const std::vector<RingHashAddress> moved = {{"10.9.9.9:80", "node-a", 1}, {"10.0.0.2:80", "", 1}};
  Ring after = Ring::Build(BuildRingEndpoints(moved), RingSizeConfig{4, 4});
  ASSERT_EQ(after.size(), ring.size());
  for (size_t i = 0; i < ring.size(); ++i) {
    EXPECT_EQ(after[i].hash, ring[i].hash);
    EXPECT_EQ(after[i].endpoint, ring[i].endpoint);
  }
}

TEST(RingTest, PinnedHashesAndPicks) {
  // Computed outside uxds (a separate XXH64 implementation checked against
  // the xxHash test vectors).
  EXPECT_EQ(XxHash64("10.0.0.1:80_0"), 0x75041381e7371a08u);
  EXPECT_EQ(XxHash64("10.0.0.2:80_0"), 0x7079d8e1823e007fu);
  EXPECT_EQ(XxHash64("10.0.0.3:80_0"), 0x74da18db9f57cc7eu);
  EXPECT_EQ(XxHash64("10.0.0.1:80_1"), 0x18341d927ea10691u);
  EXPECT_EQ(XxHash64("[2001:db8::1]:443_0"), 0xcadde4ca8f6916aeu);

  // One entry each: sorted 10.0.0.2, 10.0.0.3, 10.0.0.1.
  const std::vector<RingEndpoint> three = {
      {"10.0.0.1:80", 1}, {"10.0.0.2:80", 1}, {"10.0.0.3:80", 1}};
  Ring ring = Ring::Build(three, RingSizeConfig{3, 3});
  ASSERT_EQ(ring.size(), 3u);
  auto pick = [&](uint64_t hash) { return ring[ring.FindIndex(hash)].endpoint; };
  EXPECT_EQ(pick(0), 1u);
  EXPECT_EQ(pick(0x7079d8e1823e007f), 1u);  // equal: that entry
  EXPECT_EQ(pick(0x7079d8e1823e0080), 2u);  // just above: the next
  EXPECT_EQ(pick(0x74da18db9f57cc7e), 2u);
  EXPECT_EQ(pick(0x75041381e7371a08), 0u);
  EXPECT_EQ(pick(0x75041381e7371a09), 1u);  // above the last: wraps
  EXPECT_EQ(pick(UINT64_MAX), 1u);

  // NOTES.md's example ring (max 6): 10.0.0.1 twice, then 2, 3 twice, 4.
  const std::vector<RingEndpoint> four = {
      {"10.0.0.1:80", 1}, {"10.0.0.2:80", 1}, {"10.0.0.3:80", 1}, {"10.0.0.4:80", 1}};
  Ring six = Ring::Build(four, RingSizeConfig{6, 6});
  ASSERT_EQ(six.size(), 6u);
  const uint64_t expected_hashes[] = {0x18341d927ea10691, 0x69762f35727caa16, 0x7079d8e1823e007f,
                                      0x74da18db9f57cc7e, 0x75041381e7371a08, 0x98663d8c8e38e677};
  const uint32_t expected_endpoints[] = {0, 3, 1, 2, 0, 2};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(six[i].hash, expected_hashes[i]) << i;
    EXPECT_EQ(six[i].endpoint, expected_endpoints[i]) << i;
  }
  EXPECT_EQ(six[six.FindIndex(0x18341d927ea10692)].endpoint, 3u);
  EXPECT_EQ(six[six.FindIndex(0x98663d8c8e38e678)].endpoint, 0u);  // wraps
}

// The O(1) lookup gives what a binary search over the sorted ring gives,
// and that is what std::lower_bound over the naive ring gives.
void ExpectLookupsAgree(const std::vector<RingEndpoint>& endpoints, const RingSizeConfig& sizes,
                        uint64_t seed) {
  Ring ring = Ring::Build(endpoints, sizes);
  ASSERT_FALSE(ring.empty());
  const std::vector<NaiveEntry> naive =
      NaiveRing(endpoints, sizes.min_ring_size, sizes.max_ring_size, sizes.ring_size_cap);
  ASSERT_EQ(naive.size(), ring.size());
  auto reference = [&](uint64_t hash) -> size_t {
    auto it = std::lower_bound(naive.begin(), naive.end(), hash,
                               [](const NaiveEntry& e, uint64_t h) { return e.hash < h; });
    return it == naive.end() ? 0 : static_cast<size_t>(it - naive.begin());
  };
  std::vector<uint64_t> hashes = {0, 1, UINT64_MAX, UINT64_MAX - 1};
  // Around every entry (all of them on small rings, a sample on big ones),
  // and above the last one: the wrap-around.
  const size_t step = std::max<size_t>(1, ring.size() / 5000);
  for (size_t i = 0; i < ring.size(); i += step) {
    hashes.push_back(ring[i].hash);
    hashes.push_back(ring[i].hash + 1);
    hashes.push_back(ring[i].hash - 1);
    // The same top 40 bits as the entry, the rest below or above the
    // entry's: the same key in the entry's pick line (a narrow line keys
    // by the top 32 bits, a wide one by the 16 below the line's).
    hashes.push_back(ring[i].hash & ~uint64_t{0xFFFFFF});
    hashes.push_back(ring[i].hash | uint64_t{0xFFFFFF});
  }
  const uint64_t last = ring[ring.size() - 1].hash;
  ASSERT_LT(last, UINT64_MAX);
  hashes.push_back(last + 1);
  hashes.push_back(last + (UINT64_MAX - last) / 2);
  std::mt19937_64 random(seed);
  for (int i = 0; i < 100000; ++i) hashes.push_back(random());
  size_t mismatches = 0;
  for (uint64_t hash : hashes) {
    const size_t fast = ring.FindIndex(hash);
    const size_t binary = ring.FindIndexByBinarySearch(hash);
    const size_t expected = reference(hash);
    // What a pick of a READY endpoint reads: the packed lines.
    const uint32_t endpoint = ring.FindEndpoint(hash);
    if (fast != expected || binary != expected || endpoint != naive[expected].endpoint) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << "ring of " << ring.size() << ", hash " << hash << ": FindIndex " << fast
                      << ", binary search " << binary << ", expected " << expected
                      << "; FindEndpoint " << endpoint << ", expected " << naive[expected].endpoint;
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(ring.FindEndpoint(last + 1), naive[0].endpoint);
  EXPECT_EQ(ring.FindIndex(last + 1), 0u);
  EXPECT_EQ(ring.FindIndexByBinarySearch(last + 1), 0u);
}

TEST(RingTest, FindIndexEqualsBinarySearchOnSeveralRingSizes) {
  const uint64_t kMax = RingSizeConfig::kMaxRingSizeLimit;
  ExpectLookupsAgree(EqualEndpoints(1), RingSizeConfig{1, 1, 1}, 1);
  ExpectLookupsAgree(EqualEndpoints(2), RingSizeConfig{2, 2}, 2);
  ExpectLookupsAgree(EqualEndpoints(3), RingSizeConfig{7, 7}, 3);
  ExpectLookupsAgree(EqualEndpoints(10), RingSizeConfig{100, 100}, 4);
  ExpectLookupsAgree(EqualEndpoints(10), RingSizeConfig{}, 5);              // 1024
  ExpectLookupsAgree(EqualEndpoints(1000), RingSizeConfig{4096, 4096}, 6);  // 4096
  std::vector<RingEndpoint> weighted = EqualEndpoints(14);
  for (size_t i = 7; i < 14; ++i) weighted[i].weight = 1000;
  ExpectLookupsAgree(weighted, RingSizeConfig{1024, 4096}, 7);  // 4097
  ExpectLookupsAgree(EqualEndpoints(100), RingSizeConfig{65536, kMax, 65536}, 8);
  // From 2^18 entries on, about 4 entries per bucket and a wider scan.
  ExpectLookupsAgree(EqualEndpoints(100), RingSizeConfig{(1 << 18) - 1, kMax, 1 << 18}, 12);
  ExpectLookupsAgree(EqualEndpoints(100), RingSizeConfig{1 << 18, kMax, 1 << 18}, 13);
  ExpectLookupsAgree(EqualEndpoints(100), RingSizeConfig{1 << 20, kMax, 1 << 20}, 9);
}

TEST(RingTest, EndpointsSharingAHashKeyCrowdABucket) {
  // A76 keys come from the control plane: 40 endpoints with one key put 40
  // equal hashes in every bucket they use, past both the linear scan and
  // the insertion sort limits.
  std::vector<RingEndpoint> endpoints;
  for (int i = 0; i < 40; ++i) endpoints.push_back(RingEndpoint{"same-key", 1});
  endpoints.push_back(RingEndpoint{"other-key", 1});
  Ring ring = ExpectSameAsNaive(endpoints, 41 * 10, 41 * 10);
  ASSERT_EQ(ring.size(), 410u);
  // A hash equal to a crowded entry finds the first of its run: endpoint 0.
  const uint64_t shared = XxHash64("same-key_3");
  const size_t index = ring.FindIndex(shared);
  EXPECT_EQ(ring[index].hash, shared);
  EXPECT_EQ(ring[index].endpoint, 0u);
  EXPECT_TRUE(index == 0 || ring[index - 1].hash < shared);
  RingSizeConfig sizes;
  sizes.min_ring_size = 410;
  sizes.max_ring_size = 410;
  ExpectLookupsAgree(endpoints, sizes, 10);
  // Every entry on a ring that is one crowded run per key.
  std::vector<RingEndpoint> all_same(100, RingEndpoint{"k", 1});
  ExpectLookupsAgree(all_same, RingSizeConfig{1000, 1000}, 11);
  // The same on a large ring (the wider buckets).
  ExpectLookupsAgree(all_same, RingSizeConfig{1 << 18, 1 << 18, 1 << 18}, 14);
}

TEST(RingTest, PickLinesCoverEveryRingShape) {
  const uint64_t kMax = RingSizeConfig::kMaxRingSizeLimit;
  const RingSizeConfig large{1 << 18, kMax, 1 << 18};
  using Kind = Ring::LineKind;
  // Rings of 2^18 entries and more answer READY picks from packed lines;
  // smaller ones from the table (ExpectLookupsAgree checks both).
  EXPECT_EQ(Ring::Build(EqualEndpoints(100), RingSizeConfig{4096, 4096}).line_kind(), Kind::kNone);
  const Ring narrow = Ring::Build(EqualEndpoints(100), large);
  EXPECT_EQ(narrow.line_kind(), Kind::kNarrow);
  // About 16 entries per line: the ranges that hold more than a line's 21
  // slots (9 % of them) continue in the next line; none overflows.
  const Ring::NarrowLineCounts counts = narrow.CountNarrowLines();
  EXPECT_EQ(counts.lines, (narrow.size() + 15) / 16);
  EXPECT_GT(counts.continuing, counts.lines / 20);
  EXPECT_LT(counts.continuing, counts.lines / 7);
  EXPECT_EQ(counts.overflowing, 0u);
  EXPECT_EQ(Ring::Build(EqualEndpoints(100), RingSizeConfig{4096, 4096}).CountNarrowLines().lines,
            0u);
  // Narrow lines hold endpoints in a byte, 0xFF marking an overflow: up to
  // 255 endpoints; from 256 on, wide lines (16 bits).
  EXPECT_EQ(Ring::Build(EqualEndpoints(255), large).line_kind(), Kind::kNarrow);
  ExpectLookupsAgree(EqualEndpoints(255), large, 18);
  EXPECT_EQ(Ring::Build(EqualEndpoints(256), large).line_kind(), Kind::kWide);
  ExpectLookupsAgree(EqualEndpoints(256), large, 19);
  ExpectLookupsAgree(EqualEndpoints(5000), RingSizeConfig{1 << 20, kMax, 1 << 20}, 20);
  // More endpoints than 16 bits hold: FindIndex answers every pick.
  const std::vector<RingEndpoint> many = EqualEndpoints(140000);
  EXPECT_EQ(Ring::Build(many, large).line_kind(), Kind::kNone);
  ExpectLookupsAgree(many, large, 15);
  // One endpoint: no endpoint bits at all.
  EXPECT_EQ(Ring::Build(EqualEndpoints(1), large).line_kind(), Kind::kNarrow);
  ExpectLookupsAgree(EqualEndpoints(1), large, 16);
  // Every line that has entries holds more than fit (100 equal hashes
  // each): its picks answer through FindIndex.
  const std::vector<RingEndpoint> crowded(100, RingEndpoint{"k", 1});
  const Ring crowded_ring = Ring::Build(crowded, large);
  EXPECT_EQ(crowded_ring.line_kind(), Kind::kNarrow);
  EXPECT_GT(crowded_ring.CountNarrowLines().overflowing, 0u);
  ExpectLookupsAgree(crowded, large, 17);
  std::vector<RingEndpoint> crowded_wide = EqualEndpoints(300);
  for (size_t i = 0; i < 100; ++i) crowded_wide[i].hash_key = "k";
  EXPECT_EQ(Ring::Build(crowded_wide, large).line_kind(), Kind::kWide);
  ExpectLookupsAgree(crowded_wide, large, 21);
}

TEST(RingTest, TheLastNarrowLineContinuesIntoTheWrapAround) {
  // A range that does not fit its line continues in the next one; the last
  // line has no next one, and its picks past the line wrap to entry 0
  // through FindIndex. About 1 ring in 11 ends with such a line: look for
  // one among rings of the same size over differently named endpoints.
  const RingSizeConfig large{1 << 18, RingSizeConfig::kMaxRingSizeLimit, 1 << 18};
  for (int variant = 0; variant < 300; ++variant) {
    std::vector<RingEndpoint> endpoints = EqualEndpoints(100);
    for (RingEndpoint& e : endpoints) e.hash_key += "/" + std::to_string(variant);
    if (!Ring::Build(endpoints, large).CountNarrowLines().last_continues) continue;
    ExpectLookupsAgree(endpoints, large, 22);
    return;
  }
  FAIL() << "no ring among 300 ends with a continuing line";
}

TEST(RingTest, EmptyEndpointListGivesAnEmptyRing) {
  EXPECT_TRUE(Ring::Build({}, RingSizeConfig{}).empty());
}

}  // namespace
}  // namespace uxds::testing
