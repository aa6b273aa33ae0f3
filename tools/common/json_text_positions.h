// Lines in proto3 JSON text, for error messages that name the line: the
// line of a byte offset, and the line where an object key appears.
#pragma once

#include <cstddef>
#include <string_view>

namespace uxds {

// 1-based line of the byte at `offset` (offsets past the end count as the
// last line).
size_t LineOfOffset(std::string_view text, size_t offset);

// 1-based line of the first object key spelled `key` (outside strings),
// looking only at keys `depth` objects deep (1: the top-level object) or,
// with depth 0, at every depth, and only on or after line `from_line`. 0
// when there is none.
size_t LineOfKey(std::string_view text, std::string_view key, int depth = 0, size_t from_line = 1);

}  // namespace uxds
