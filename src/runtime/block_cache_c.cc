// The block cache behind C allocator hooks (nghttp2_mem): C frees without
// a size, so each block starts with a header that keeps it.
#include <cstdint>
#include <cstring>
#include <new>

#include "runtime/block_cache.h"

namespace uxds::detail {
namespace {

// 16 bytes, so the caller's part keeps malloc's alignment.
struct alignas(16) BlockHeader {
  size_t size;  // the caller's part
};
static_assert(sizeof(BlockHeader) == 16);

BlockHeader* HeaderOf(void* block) { return static_cast<BlockHeader*>(block) - 1; }

}  // namespace

void* CachedMalloc(size_t size) noexcept {
  if (size > SIZE_MAX - sizeof(BlockHeader)) return nullptr;
  try {
    auto* header = static_cast<BlockHeader*>(AllocateBlock(sizeof(BlockHeader) + size));
    header->size = size;
    return header + 1;
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

void CachedFree(void* block) noexcept {
  if (block == nullptr) return;
  BlockHeader* header = HeaderOf(block);
  FreeBlock(header, sizeof(BlockHeader) + header->size);
}

void* CachedCalloc(size_t count, size_t size) noexcept {
  if (size != 0 && count > SIZE_MAX / size) return nullptr;
  void* block = CachedMalloc(count * size);
  if (block != nullptr) std::memset(block, 0, count * size);
  return block;
}

void* CachedRealloc(void* block, size_t size) noexcept {
  if (block == nullptr) return CachedMalloc(size);
  if (size == 0) {
    // As realloc(p, 0) in glibc: frees, and returns null.
    CachedFree(block);
    return nullptr;
  }
  const size_t old_size = HeaderOf(block)->size;
  void* moved = CachedMalloc(size);
  if (moved == nullptr) return nullptr;  // the old block stays the caller's
  std::memcpy(moved, block, old_size < size ? old_size : size);
  CachedFree(block);
  return moved;
}

}  // namespace uxds::detail
