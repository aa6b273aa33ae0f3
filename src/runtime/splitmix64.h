// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014): one add and three multiply-xorshift steps per 64-bit
// output. Used where a pick or a backoff's jitter needs cheap randomness
// from state of its own (no lock, no system call, nothing shared).
#pragma once

#include <cstdint>

namespace uxds {

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace uxds
