#include <chrono>

#include "lb/lb_policy.h"

namespace uxds {

uint64_t ThreadRandom() {
  // splitmix64: one add and a few multiplies; the state is per thread, so
  // picks on different threads share nothing. Seeded once per thread from
  // the clock (vDSO, no system call) and the state's own address.
  thread_local uint64_t state =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      reinterpret_cast<uintptr_t>(&state);
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace uxds
