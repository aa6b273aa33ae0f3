#include "runtime/block_cache.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(__SANITIZE_HWADDRESS__)
#define UXDS_BLOCK_CACHE_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(hwaddress_sanitizer) || __has_feature(memory_sanitizer)
#define UXDS_BLOCK_CACHE_OFF 1
#endif
#endif

namespace uxds::detail {
namespace {

#ifndef UXDS_BLOCK_CACHE_OFF

constexpr size_t kClasses = kMaxCachedBlock / kBlockGranule;

// Class c holds blocks of exactly (c + 1) * kBlockGranule bytes: a size is
// rounded up to its class's, so any block of a class serves any size in it.
size_t ClassOf(size_t size) { return (size - 1) / kBlockGranule; }
size_t ClassBytes(size_t c) { return (c + 1) * kBlockGranule; }

struct FreeLink {
  FreeLink* next;
};

std::atomic<size_t> g_returned_at_thread_end{0};

struct ThreadBlockCache {
  std::array<FreeLink*, kClasses> heads{};
  std::array<uint32_t, kClasses> counts{};
  size_t bytes = 0;

  ~ThreadBlockCache() {
    size_t returned = 0;
    for (FreeLink*& head : heads) {
      while (head != nullptr) {
        std::free(std::exchange(head, head->next));
        ++returned;
      }
    }
    g_returned_at_thread_end.fetch_add(returned, std::memory_order_relaxed);
  }
};

// The pick of a cache on the allocation path is this plain pointer (a
// thread_local with a destructor is reached through a call that checks it
// was made). Once the thread's cache is gone (thread exit), blocks go to
// malloc and free directly.
enum class CacheState : uint8_t { kNone, kLive, kGone };
thread_local constinit ThreadBlockCache* t_cache = nullptr;
thread_local constinit CacheState t_state = CacheState::kNone;

struct CacheOwner {
  ThreadBlockCache cache;
  ~CacheOwner() {
    t_cache = nullptr;
    t_state = CacheState::kGone;
  }
};

[[gnu::noinline]] ThreadBlockCache* MakeCache() {
  if (t_state == CacheState::kGone) return nullptr;
  thread_local CacheOwner owner;
  t_cache = &owner.cache;
  t_state = CacheState::kLive;
  return t_cache;
}

ThreadBlockCache* Cache() {
  if (t_cache != nullptr) [[likely]]
    return t_cache;
  return MakeCache();
}

#endif

void* MallocOrThrow(size_t size) {
  void* block = std::malloc(size);
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

}  // namespace

#ifdef UXDS_BLOCK_CACHE_OFF

void* AllocateBlock(size_t size) { return MallocOrThrow(size); }
void FreeBlock(void* block, size_t /*size*/) noexcept { std::free(block); }
bool BlockCacheEnabled() { return false; }
size_t CachedBlockBytes() { return 0; }
size_t BlocksReturnedByEndedThreads() { return 0; }

#else

void* AllocateBlock(size_t size) {
  if (size == 0 || size > kMaxCachedBlock) return MallocOrThrow(size == 0 ? 1 : size);
  const size_t c = ClassOf(size);
  ThreadBlockCache* cache = Cache();
  if (cache != nullptr) {
    if (FreeLink* block = cache->heads[c]; block != nullptr) {
      cache->heads[c] = block->next;
      --cache->counts[c];
      cache->bytes -= ClassBytes(c);
      return block;
    }
  }
  // A new block is made at its class's size, so that it can serve any
  // size of the class once freed.
  return MallocOrThrow(ClassBytes(c));
}

void FreeBlock(void* block, size_t size) noexcept {
  if (block == nullptr) return;
  if (size == 0 || size > kMaxCachedBlock) {
    std::free(block);
    return;
  }
  const size_t c = ClassOf(size);
  ThreadBlockCache* cache = Cache();
  if (cache == nullptr ||
      (cache->counts[c] + size_t{1}) * ClassBytes(c) > kMaxCachedBytesPerClass ||
      cache->bytes + ClassBytes(c) > kMaxCachedBytesPerThread) {
    std::free(block);
    return;
  }
  auto* link = static_cast<FreeLink*>(block);
  link->next = cache->heads[c];
  cache->heads[c] = link;
  ++cache->counts[c];
  cache->bytes += ClassBytes(c);
}

bool BlockCacheEnabled() { return true; }

size_t CachedBlockBytes() {
  ThreadBlockCache* cache = t_cache;
  return cache != nullptr ? cache->bytes : 0;
}

size_t BlocksReturnedByEndedThreads() {
  return g_returned_at_thread_end.load(std::memory_order_relaxed);
}

#endif

}  // namespace uxds::detail
