#include "allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local bool counting = false;
thread_local uint64_t allocations = 0;
}  // namespace

// Its own translation unit: compilers that see new and delete together
// would take the free() below for a mismatch.
// Every plain form is replaced (a sanitizer runtime's own would otherwise
// allocate what the free() here releases); the aligned forms are left to
// the runtime, new and delete alike.
void* operator new(size_t size) {
  if (counting) ++allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  if (counting) ++allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace uxds::testing {

void StartCountingAllocations() {
  allocations = 0;
  counting = true;
}

uint64_t StopCountingAllocations() {
  counting = false;
  return allocations;
}

}  // namespace uxds::testing
