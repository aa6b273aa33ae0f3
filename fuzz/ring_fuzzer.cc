// libFuzzer target: the A42 ring (uxds/ring_hash.h) against a naive ring
// written here from NOTES.md "Ring hash" (de-duplicate,
// "<key>_<n>", XXH64, std::sort, lower bound with wrap-around).
//
// The input is text, one command a line, so seeds can be written by hand
// from the ring tests:
//   sizes MIN MAX CAP        ring sizes (any numbers: RingSizeConfig::Validate
//                            is checked against A42's rule; invalid sizes end
//                            the input)
//   ADDRESS WEIGHT [KEY]     an endpoint (A76 hash key KEY), duplicates allowed
//   repeat N                 N more endpoints "10.a.b.c:8080", weight 1
//   pick HASH                a request hash to look up
// Every lookup (FindIndex, the table, the lines, FindEndpoint, the binary
// search) must give the naive ring's entry for the picked hashes, every
// entry's hash and its neighbours, and a few hundred more.
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/ring_hash.h"

namespace {

using uxds::Ring;
using uxds::RingEndpoint;
using uxds::RingHashAddress;
using uxds::RingSizeConfig;

void Require(bool property) {
  if (!property) __builtin_trap();
}

// Bounds that keep one input under a second under ASan: rings up to 2^19
// entries (lines start at 2^18), up to 70000 endpoints (wide lines hold
// 65536), keys of at most 200 bytes.
constexpr uint64_t kMaxCap = uint64_t{1} << 19;
constexpr size_t kMaxEndpoints = 70000;
constexpr size_t kMaxKeyLength = 200;

struct NaiveEntry {
  uint64_t hash;
  uint32_t endpoint;
  friend bool operator<(const NaiveEntry& a, const NaiveEntry& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.endpoint < b.endpoint;
  }
};

// NOTES.md "Ring hash": duplicates add their weight to the first
// occurrence, whose A76 key (else its address) names the endpoint; 0
// weighs 1.
std::vector<RingEndpoint> NaiveEndpoints(const std::vector<RingHashAddress>& addresses) {
  std::vector<RingEndpoint> endpoints;
  std::map<std::string, size_t> seen;  // address -> endpoint
  for (const RingHashAddress& a : addresses) {
    const uint64_t weight = a.weight == 0 ? 1 : a.weight;
    if (auto it = seen.find(a.address); it != seen.end()) {
      endpoints[it->second].weight += weight;
      continue;
    }
    seen.emplace(a.address, endpoints.size());
    endpoints.push_back(RingEndpoint{a.hash_key.empty() ? a.address : a.hash_key, weight});
  }
  return endpoints;
}

std::vector<NaiveEntry> NaiveRing(const std::vector<RingEndpoint>& endpoints,
                                  const RingSizeConfig& sizes) {
  const uint64_t min_ring = std::min(sizes.min_ring_size, sizes.ring_size_cap);
  const uint64_t max_ring = std::min(sizes.max_ring_size, sizes.ring_size_cap);
  double sum = 0;
  for (const RingEndpoint& e : endpoints) sum += static_cast<double>(e.weight);
  std::vector<double> normalized;
  double smallest = 1.0;
  for (const RingEndpoint& e : endpoints) {
    normalized.push_back(static_cast<double>(e.weight) / sum);
    smallest = std::min(smallest, normalized.back());
  }
  const double scale = std::min(std::ceil(smallest * static_cast<double>(min_ring)) / smallest,
                                static_cast<double>(max_ring));
  std::vector<NaiveEntry> ring;
  double current = 0;
  double target = 0;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    target += scale * normalized[i];
    for (unsigned long long n = 0; current < target; ++n, current += 1) {
      // The whole key, NUL bytes included (a key is any EDS string).
      const std::string key = endpoints[i].hash_key + "_" + std::to_string(n);
      ring.push_back(NaiveEntry{XXH64(key.data(), key.size(), 0), static_cast<uint32_t>(i)});
    }
  }
  std::sort(ring.begin(), ring.end());
  return ring;
}

size_t NaiveFind(const std::vector<NaiveEntry>& ring, uint64_t hash) {
  size_t lo = 0;
  size_t hi = ring.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (ring[mid].hash < hash) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo == ring.size() ? 0 : lo;
}

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    const size_t start = pos;
    while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
    if (pos > start) words.push_back(line.substr(start, pos - start));
  }
  return words;
}

uint64_t Number(std::string_view word) {
  const std::string text(word);
  return std::strtoull(text.c_str(), nullptr, 0);
}

void CheckLookup(const Ring& ring, const std::vector<NaiveEntry>& naive, uint64_t hash) {
  const size_t expected = NaiveFind(naive, hash);
  const uint32_t endpoint = naive[expected].endpoint;
  Require(ring.FindIndex(hash) == expected);
  Require(ring.FindIndexByBinarySearch(hash) == expected);
  Require(ring.FindEndpoint(hash) == endpoint);
  const size_t in_table = ring.FindIndexInTable(hash);
  Require(in_table == Ring::kCrowdedBucket || in_table == expected);
  const uint32_t in_table_endpoint = ring.FindEndpointInTable(hash);
  Require(in_table_endpoint == Ring::kNotInLine || in_table_endpoint == endpoint);
  uint32_t in_line = Ring::kNotInLine;
  if (ring.line_kind() == Ring::LineKind::kNarrow) {
    in_line = ring.FindEndpointInNarrowLine(hash);
    if (in_line == Ring::kNotInLine) in_line = ring.FindEndpointPastNarrowLine(hash);
  } else if (ring.line_kind() == Ring::LineKind::kWide) {
    in_line = ring.FindEndpointInWideLine(hash);
  }
  Require(in_line == Ring::kNotInLine || in_line == endpoint);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  RingSizeConfig sizes;
  std::vector<RingHashAddress> addresses;
  std::vector<uint64_t> picks;
  size_t pos = 0;
  while (pos < input.size()) {
    size_t end = input.find('\n', pos);
    if (end == std::string_view::npos) end = input.size();
    const std::vector<std::string_view> words = Words(input.substr(pos, end - pos));
    pos = end + 1;
    if (words.empty()) continue;
    if (words[0] == "sizes" && words.size() == 4) {
      sizes.min_ring_size = Number(words[1]);
      sizes.max_ring_size = Number(words[2]);
      sizes.ring_size_cap = Number(words[3]);
      // A42's limits, as Validate() must apply them.
      constexpr uint64_t kLimit = RingSizeConfig::kMaxRingSizeLimit;
      const bool valid = sizes.min_ring_size >= 1 && sizes.min_ring_size <= kLimit &&
                         sizes.max_ring_size >= 1 && sizes.max_ring_size <= kLimit &&
                         sizes.min_ring_size <= sizes.max_ring_size && sizes.ring_size_cap >= 1 &&
                         sizes.ring_size_cap <= kLimit;
      const uxds::Status status = sizes.Validate();
      Require(status.ok() == valid);
      if (!valid) {
        Require(status.code() == uxds::StatusCode::kInvalidArgument);
        return 0;
      }
      sizes.ring_size_cap = std::min(sizes.ring_size_cap, kMaxCap);
      Require(sizes.effective_min() == std::min(sizes.min_ring_size, sizes.ring_size_cap));
      Require(sizes.effective_max() == std::min(sizes.max_ring_size, sizes.ring_size_cap));
    } else if (words[0] == "pick" && words.size() == 2) {
      picks.push_back(Number(words[1]));
    } else if (words[0] == "repeat" && words.size() == 2) {
      const uint64_t n = std::min<uint64_t>(Number(words[1]), kMaxEndpoints);
      for (uint64_t i = 0; i < n && addresses.size() < kMaxEndpoints; ++i) {
        const size_t k = addresses.size();
        addresses.push_back(RingHashAddress{"10." + std::to_string(k / 65536) + "." +
                                                std::to_string(k / 256 % 256) + "." +
                                                std::to_string(k % 256) + ":8080",
                                            "", 1});
      }
    } else if (words.size() >= 2 && addresses.size() < kMaxEndpoints &&
               words[0].size() <= kMaxKeyLength) {
      RingHashAddress address{std::string(words[0]), "", Number(words[1]) & 0xffffffff};
      if (words.size() >= 3 && words[2].size() <= kMaxKeyLength) {
        address.hash_key = std::string(words[2]);
      }
      addresses.push_back(std::move(address));
    }
  }

  std::vector<size_t> kept;
  const std::vector<RingEndpoint> endpoints = uxds::BuildRingEndpoints(addresses, &kept);
  const std::vector<RingEndpoint> naive_endpoints = NaiveEndpoints(addresses);
  Require(endpoints.size() == naive_endpoints.size() && kept.size() == endpoints.size());
  for (size_t i = 0; i < endpoints.size(); ++i) {
    Require(endpoints[i].hash_key == naive_endpoints[i].hash_key);
    Require(endpoints[i].weight == naive_endpoints[i].weight);
    Require(kept[i] < addresses.size() && (i == 0 || kept[i] > kept[i - 1]));
  }

  const Ring ring = Ring::Build(endpoints, sizes);
  if (endpoints.empty()) {
    Require(ring.empty());
    return 0;
  }
  const std::vector<NaiveEntry> naive = NaiveRing(naive_endpoints, sizes);
  Require(ring.size() == naive.size());
  for (size_t i = 0; i < naive.size(); ++i) {
    Require(ring[i].hash == naive[i].hash && ring[i].endpoint == naive[i].endpoint);
  }

  for (uint64_t hash : picks) CheckLookup(ring, naive, hash);
  CheckLookup(ring, naive, 0);
  CheckLookup(ring, naive, UINT64_MAX);
  // Every entry's hash and its neighbours on small rings; a sample on large
  // ones.
  const size_t step = naive.size() <= 8192 ? 1 : naive.size() / 4096;
  for (size_t i = 0; i < naive.size(); i += step) {
    CheckLookup(ring, naive, naive[i].hash);
    CheckLookup(ring, naive, naive[i].hash - 1);
    CheckLookup(ring, naive, naive[i].hash + 1);
  }
  uint64_t hash = XXH64(data, size, 1);
  for (int i = 0; i < 256; ++i) {
    hash = XXH64(&hash, sizeof(hash), 2);
    CheckLookup(ring, naive, hash);
  }
  return 0;
}
