// Helpers for the one-line JSON summaries of parsed resources (`uxds watch`,
// CSDS-like dumps, test expectations).
#pragma once

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace uxds {

using ResourceJson = nlohmann::ordered_json;

// Proto3 JSON form of a duration: "10s", "0.250s", "1.000000001s".
inline std::string DurationJson(std::chrono::nanoseconds duration) {
  const long long total = duration.count();
  const long long seconds = total / 1000000000;
  const long long nanos = total % 1000000000;
  char text[48];
  if (nanos == 0) {
    std::snprintf(text, sizeof(text), "%llds", seconds);
  } else if (nanos % 1000000 == 0) {
    std::snprintf(text, sizeof(text), "%lld.%03llds", seconds, nanos / 1000000);
  } else if (nanos % 1000 == 0) {
    std::snprintf(text, sizeof(text), "%lld.%06llds", seconds, nanos / 1000);
  } else {
    std::snprintf(text, sizeof(text), "%lld.%09llds", seconds, nanos);
  }
  return text;
}

}  // namespace uxds
