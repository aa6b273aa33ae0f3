// BytesEqual and BytesEqualLowered against the obvious byte loops, at every
// length a word load treats differently (below 4, 4 to 7, 8, past 8, past
// 16) and with the difference at every position.
#include "runtime/bytes_equal.h"

#include <gtest/gtest.h>

#include <cctype>
#include <random>
#include <string>

namespace uxds {
namespace {

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualLoweredByBytes(const std::string& text, const std::string& lowered) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (Lower(text[i]) != lowered[i]) return false;
  }
  return true;
}

TEST(BytesEqualTest, AgreesWithAByteLoopAtEveryLengthAndPosition) {
  std::mt19937 random(11);
  for (size_t n = 0; n <= 40; ++n) {
    std::string a(n, ' ');
    for (char& c : a) c = static_cast<char>(random());
    EXPECT_TRUE(BytesEqual(a.data(), std::string(a).data(), n)) << n;
    for (size_t at = 0; at < n; ++at) {
      std::string b = a;
      b[at] = static_cast<char>(b[at] ^ (1 << (random() % 8)));
      EXPECT_FALSE(BytesEqual(a.data(), b.data(), n)) << n << " at " << at;
    }
  }
}

TEST(BytesEqualTest, LoweredComparisonLowersOnlyAsciiCapitals) {
  // Every byte value against its lowered form, and against every other
  // byte value, at each position of strings of each length.
  for (size_t n = 1; n <= 24; ++n) {
    for (size_t at = 0; at < n; ++at) {
      for (int x = 0; x < 256; ++x) {
        std::string text(n, 'q');
        text[at] = static_cast<char>(x);
        std::string lowered(n, 'q');
        for (int y = 0; y < 256; ++y) {
          lowered[at] = static_cast<char>(y);
          ASSERT_EQ(BytesEqualLowered(text.data(), lowered.data(), n),
                    EqualLoweredByBytes(text, lowered))
              << "n " << n << " at " << at << " text byte " << x << " lowered byte " << y;
        }
      }
    }
  }
}

TEST(BytesEqualTest, LowerAsciiWordLowersEachByteAsALoopWould) {
  // Every pair of neighbouring byte values, in both orders: a carry from
  // one byte into the next would show.
  for (int x = 0; x < 256; ++x) {
    for (int y = 0; y < 256; ++y) {
      uint64_t word = 0;
      uint64_t expected = 0;
      for (int byte = 0; byte < 8; ++byte) {
        const auto c = static_cast<uint8_t>(byte % 2 == 0 ? x : y);
        word |= uint64_t{c} << (byte * 8);
        expected |= uint64_t{static_cast<uint8_t>(Lower(static_cast<char>(c)))} << (byte * 8);
      }
      ASSERT_EQ(LowerAsciiWord(word), expected) << x << ", " << y;
    }
  }
}

}  // namespace
}  // namespace uxds
