// Equality of short byte strings without a call to memcmp: the call path
// compares header names, header values and paths of a few to a few dozen
// bytes, where libc's memcmp costs more in its call and dispatch than in
// its comparison. Overlapping word loads cover any length from 4 bytes up.
// The ASCII case-insensitive form (xDS StringMatcher's ignore_case) lowers
// eight bytes at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace uxds {

inline uint64_t LoadWord64(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}
inline uint32_t LoadWord32(const char* p) {
  uint32_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

namespace bytes_internal {

// For n >= 8: whole words, then the last 8 bytes (overlapping the last
// word read); each word of `a` passes through `transform` first.
template <typename Transform>
inline bool WordsEqual(const char* a, const char* b, size_t n, Transform transform) {
  for (size_t i = 0; i + 8 < n; i += 8) {
    if (transform(LoadWord64(a + i)) != LoadWord64(b + i)) return false;
  }
  return transform(LoadWord64(a + n - 8)) == LoadWord64(b + n - 8);
}

}  // namespace bytes_internal

// Whether the `n` bytes at `a` and at `b` are equal.
inline bool BytesEqual(const char* a, const char* b, size_t n) {
  if (n >= 8) return bytes_internal::WordsEqual(a, b, n, [](uint64_t word) { return word; });
  if (n >= 4) {
    return ((LoadWord32(a) ^ LoadWord32(b)) | (LoadWord32(a + n - 4) ^ LoadWord32(b + n - 4))) == 0;
  }
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// `word` with its ASCII capitals lowered (other bytes as they are).
inline uint64_t LowerAsciiWord(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHighBits = 0x8080808080808080;
  const uint64_t low7 = word & ~kHighBits;
  // Bit 7 of each byte: set when its low seven bits are >= 'A', > 'Z'.
  const uint64_t from_a = low7 + (0x80 - 'A') * kOnes;
  const uint64_t past_z = low7 + (0x7f - 'Z') * kOnes;
  const uint64_t capitals = (from_a & ~past_z) & ~word & kHighBits;
  return word | (capitals >> 2);  // +0x20 where a capital
}

// Whether the `n` bytes at `text`, ASCII-lowered, equal the `n` bytes at
// `lowered` (already lower-case).
inline bool BytesEqualLowered(const char* text, const char* lowered, size_t n) {
  if (n >= 8) return bytes_internal::WordsEqual(text, lowered, n, LowerAsciiWord);
  for (size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c) != lowered[i]) return false;
  }
  return true;
}

}  // namespace uxds
