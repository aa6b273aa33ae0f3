// The per-thread block cache behind coroutine frames and nghttp2's memory:
// blocks are reused by size class on the thread that freed them, bounded,
// and returned when the thread ends. Under ASan and TSan the cache is off
// (every block is malloc's and free's): only the C hooks' own contract is
// checked there.
#include "runtime/block_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "uxds/task.h"

namespace uxds::detail {
namespace {

TEST(BlockCacheTest, AFreedBlockServesTheNextAllocationOfItsClass) {
  if (!BlockCacheEnabled()) GTEST_SKIP() << "the cache is off under sanitizers";
  void* first = AllocateBlock(100);
  FreeBlock(first, 100);
  // 100 and 110 bytes share the 112-byte class: the block comes back.
  void* again = AllocateBlock(110);
  EXPECT_EQ(again, first);
  // Another class does not take it.
  FreeBlock(again, 110);
  void* other = AllocateBlock(200);
  EXPECT_NE(other, first);
  EXPECT_EQ(AllocateBlock(97), first);
  FreeBlock(first, 97);
  FreeBlock(other, 200);
}

TEST(BlockCacheTest, WhatTheCacheHoldsIsBoundedPerClass) {
  if (!BlockCacheEnabled()) GTEST_SKIP() << "the cache is off under sanitizers";
  const size_t before = CachedBlockBytes();
  constexpr size_t kSize = 1024;
  constexpr size_t kCount = kMaxCachedBytesPerClass / kSize + 100;
  std::vector<void*> blocks;
  for (size_t i = 0; i < kCount; ++i) blocks.push_back(AllocateBlock(kSize));
  for (void* block : blocks) FreeBlock(block, kSize);
  EXPECT_LE(CachedBlockBytes() - before, kMaxCachedBytesPerClass);
  EXPECT_GE(CachedBlockBytes() - before, kMaxCachedBytesPerClass - kSize);
  // Large blocks are never cached.
  void* large = AllocateBlock(kMaxCachedBlock + 1);
  const size_t held = CachedBlockBytes();
  FreeBlock(large, kMaxCachedBlock + 1);
  EXPECT_EQ(CachedBlockBytes(), held);
}

TEST(BlockCacheTest, BlocksFreedOnAnotherThreadJoinThatThreadsCacheUntilItEnds) {
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(AllocateBlock(48));
  const size_t returned_before = BlocksReturnedByEndedThreads();
  size_t held_by_other = 0;
  std::thread other([&] {
    for (void* block : blocks) FreeBlock(block, 48);
    held_by_other = CachedBlockBytes();
  });
  other.join();
  if (!BlockCacheEnabled()) GTEST_SKIP() << "the cache is off under sanitizers";
  EXPECT_EQ(held_by_other, 64 * 48u);
  // The thread's end gave every one of them back to malloc.
  EXPECT_EQ(BlocksReturnedByEndedThreads() - returned_before, 64u);
}

TEST(BlockCacheTest, CHooksKeepSizesAndContents) {
  EXPECT_EQ(CachedMalloc(SIZE_MAX - 4), nullptr);
  EXPECT_EQ(CachedCalloc(SIZE_MAX / 2, 4), nullptr);
  auto* bytes = static_cast<char*>(CachedCalloc(10, 3));
  ASSERT_NE(bytes, nullptr);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(bytes[i], 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes) % 16, 0u) << "malloc's alignment";
  std::memcpy(bytes, "0123456789012345678901234567890", 30);
  // Grown across classes and past the cached sizes: the contents move.
  bytes = static_cast<char*>(CachedRealloc(bytes, 5000));
  ASSERT_NE(bytes, nullptr);
  EXPECT_EQ(std::string(bytes, 30), "012345678901234567890123456789");
  bytes = static_cast<char*>(CachedRealloc(bytes, 4));
  EXPECT_EQ(std::string(bytes, 4), "0123");
  EXPECT_EQ(CachedRealloc(bytes, 0), nullptr);  // freed, as glibc's realloc
  CachedFree(nullptr);
  void* fresh = CachedRealloc(nullptr, 8);
  ASSERT_NE(fresh, nullptr);
  CachedFree(fresh);
}

TEST(BlockCacheTest, ContainerNodesComeFromTheCache) {
  std::unordered_map<int, std::string, std::hash<int>, std::equal_to<int>,
                     BlockAllocator<std::pair<const int, std::string>>>
      map;
  for (int i = 0; i < 100; ++i) map.emplace(i, std::to_string(i));
  EXPECT_EQ(map.at(42), "42");
  const size_t before = CachedBlockBytes();
  map.erase(7);
  if (!BlockCacheEnabled()) GTEST_SKIP() << "the cache is off under sanitizers";
  EXPECT_GT(CachedBlockBytes(), before) << "the erased node joins the cache";
}

Task<int> Add(int a, int b) { co_return a + b; }
Task<int> Sum(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += co_await Add(i, 1);
  co_return total;
}

TEST(BlockCacheTest, CoroutineFramesComeFromTheCache) {
  Task<int> sum = Sum(1000);
  auto handle = sum.handle();
  handle.resume();
  ASSERT_TRUE(handle.done());
  EXPECT_EQ(*handle.promise().value, 1000 * 999 / 2 + 1000);
  if (!BlockCacheEnabled()) GTEST_SKIP() << "the cache is off under sanitizers";
  // The finished task's frame joins the cache when the task is destroyed.
  const size_t before = CachedBlockBytes();
  sum = Task<int>();
  EXPECT_GT(CachedBlockBytes(), before);
}

}  // namespace
}  // namespace uxds::detail
