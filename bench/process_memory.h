// The process's resident memory, for benchmarks that report it: current and
// peak RSS from /proc/self/status, and a reset of the peak so that one
// benchmark's peak is not an earlier one's (getrusage's ru_maxrss cannot be
// reset: it keeps the peak of the whole run).
#pragma once

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace uxds::bench {

// A field of /proc/self/status in kB ("VmRSS:", "VmHWM:"); -1 if absent.
inline int64_t ProcStatusKb(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, field.size(), field) == 0) {
      return std::stoll(line.substr(field.size()));
    }
  }
  return -1;
}

inline double ProcStatusMb(std::string_view field) {
  return static_cast<double>(ProcStatusKb(field)) / 1024.0;
}

// Hands memory the allocator keeps free back to the kernel (so what earlier
// benchmarks freed does not count as resident here) and resets VmHWM to the
// current RSS ("5" to clear_refs, Linux >= 4.0). False if the reset failed.
inline bool ResetPeakRss() {
  malloc_trim(0);
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return clear_refs.good();
}

// Puts glibc's allocator in the state a long-running client's is in once
// it has freed one large block (a big response's buffer): freeing an
// mmap'ed block raises the mmap threshold to its size and the trim
// threshold to twice that (up to 32 / 64 MB), so later blocks of that size
// come from the heap and freed memory stays there. Without it, what a
// benchmark measures depends on what ran before it: on a fresh heap each
// large buffer is a new mmap, and memory freed between iterations goes back
// to the kernel, so each iteration pays page faults for it again (12 us
// each on the development VM, against about 0.2 us on bare metal). Call
// after malloc_trim(), which does not undo it.
inline void RaiseMallocThresholds() {
  // Just under glibc's DEFAULT_MMAP_THRESHOLD_MAX (32 MB on 64-bit): a
  // larger block would leave the thresholds as they are.
  void* block = malloc((32u << 20) - (64u << 10));
  // Touch it, so the allocation cannot be optimized away with the free.
  static_cast<volatile char*>(block)[0] = 1;
  free(block);
}

// Bytes the allocator has handed out and not had back, in every arena
// (mallinfo2 sums them): the heap's share of RSS without the pages it keeps.
inline double HeapInUseMb() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd) / (1024.0 * 1024.0);
}

}  // namespace uxds::bench
