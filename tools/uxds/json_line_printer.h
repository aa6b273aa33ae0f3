// JsonLinePrinter: one JSON object per stdout line, whole and flushed, from
// any thread (a line never interleaves with another thread's).
#pragma once

#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace uxds::tool {

class JsonLinePrinter {
 public:
  void Print(const nlohmann::ordered_json& line) {
    // Invalid UTF-8 from a peer (a resource name) is replaced, never thrown on.
    const std::string text =
        line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    std::lock_guard<std::mutex> lock(mutex_);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }

 private:
  std::mutex mutex_;
};

}  // namespace uxds::tool
