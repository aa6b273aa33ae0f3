// ASCII case folding for host names and case-insensitive matchers (A28):
// locale-independent, and without copying either side.
#pragma once

#include <algorithm>
#include <string_view>

namespace uxds {

inline char AsciiLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return AsciiLower(x) == AsciiLower(y);
         });
}

}  // namespace uxds
