// Small blocks kept for reuse by the thread that frees them: the memory of
// a call's coroutine frames and of nghttp2's per-stream state.
//
// Every RPC a loop serves allocates and frees a few dozen small blocks
// (coroutine frames, nghttp2's streams, header copies and outbound items),
// with a thousand calls in flight at once. glibc's per-thread cache holds
// 7 blocks of a size, so most of them take malloc's shared bins: a quarter
// of a server's time at 100 connections x 10 streams. Here each thread
// keeps freed blocks of up to kMaxCachedBlock bytes in lists by size class
// (16-byte steps), bounded per class and per thread so that a burst is
// not hoarded; what does not fit goes back to malloc. A block may be
// freed on another thread than it was made on: it joins that thread's
// cache (all of them are malloc's blocks). A thread's cache is returned to
// malloc when the thread ends.
//
// Under the address, memory and thread sanitizers every block goes
// straight to malloc and free: a reused block would hide a use after free
// or an uninitialised read, and reuse without free would look like a race
// to TSan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace uxds::detail {

inline constexpr size_t kBlockGranule = 16;
inline constexpr size_t kMaxCachedBlock = 1024;
inline constexpr size_t kMaxCachedBytesPerClass = 256 * 1024;
inline constexpr size_t kMaxCachedBytesPerThread = 4 * 1024 * 1024;

// `size` bytes aligned as malloc's; never null (std::bad_alloc, as
// operator new, when the system has no memory left).
void* AllocateBlock(size_t size);
// A block from AllocateBlock(size), with the same size.
void FreeBlock(void* block, size_t size) noexcept;

// A standard allocator over the cache, for the nodes of containers that
// gain and lose an entry with every call.
template <typename T>
struct BlockAllocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  using value_type = T;
  BlockAllocator() = default;
  template <typename U>
  BlockAllocator(const BlockAllocator<U>& /*other*/) noexcept {}
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(AllocateBlock(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { FreeBlock(p, n * sizeof(T)); }
  friend bool operator==(const BlockAllocator&, const BlockAllocator&) { return true; }
};

// For tests: whether blocks are cached at all in this build, how many
// bytes the calling thread's cache holds, and how many blocks the caches
// of ended threads gave back to malloc.
bool BlockCacheEnabled();
size_t CachedBlockBytes();
size_t BlocksReturnedByEndedThreads();

// The same for C libraries (nghttp2's allocator hooks), which free without
// a size: each block carries its size in a 16-byte header. Null when out
// of memory, as malloc.
void* CachedMalloc(size_t size) noexcept;
void CachedFree(void* block) noexcept;
void* CachedCalloc(size_t count, size_t size) noexcept;
void* CachedRealloc(void* block, size_t size) noexcept;

}  // namespace uxds::detail
