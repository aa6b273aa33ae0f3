#include "common/json_text_positions.h"

#include <algorithm>

namespace uxds {

size_t LineOfOffset(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
}

size_t LineOfKey(std::string_view text, std::string_view key, int depth, size_t from_line) {
  int object_depth = 0;
  size_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '{') {
      ++object_depth;
    } else if (c == '}') {
      --object_depth;
    } else if (c == '"') {
      // A string: read to its closing quote, then see whether a ':' follows
      // (a key) or not (a value).
      const size_t start = i + 1;
      size_t end = start;
      while (end < text.size() && text[end] != '"') {
        if (text[end] == '\\') ++end;
        ++end;
      }
      const size_t string_line = line;
      line += static_cast<size_t>(
          std::count(text.begin() + static_cast<long>(start),
                     text.begin() + static_cast<long>(std::min(end, text.size())), '\n'));
      size_t next = end + 1;
      while (next < text.size() && (text[next] == ' ' || text[next] == '\t' || text[next] == '\r' ||
                                    text[next] == '\n')) {
        ++next;
      }
      const bool is_key = next < text.size() && text[next] == ':';
      if (is_key && (depth == 0 || depth == object_depth) && string_line >= from_line &&
          text.substr(start, end - start) == key) {
        return string_line;
      }
      // Newlines between the string and the next token are counted by the loop.
      i = end;
    }
  }
  return 0;
}

}  // namespace uxds
