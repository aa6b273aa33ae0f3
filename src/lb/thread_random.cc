#include <chrono>

#include "lb/lb_policy.h"
#include "runtime/splitmix64.h"

namespace uxds {

uint64_t ThreadRandom() {
  // The state is per thread, so picks on different threads share nothing.
  // Seeded once per thread from the clock (vDSO, no system call) and the
  // state's own address.
  thread_local uint64_t state =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      reinterpret_cast<uintptr_t>(&state);
  return SplitMix64(state);
}

}  // namespace uxds
