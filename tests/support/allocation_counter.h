// Counts operator new on the calling thread between Start and Stop: a test
// or benchmark linking allocation_counter.cc replaces the global operator
// new/delete with ones that count (and otherwise malloc and free).
#pragma once

#include <cstdint>

namespace uxds::testing {

void StartCountingAllocations();
// How many allocations this thread made since StartCountingAllocations().
uint64_t StopCountingAllocations();

}  // namespace uxds::testing
