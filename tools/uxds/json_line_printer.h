// JsonLinePrinter: one JSON object per stdout line, whole and flushed, from
// any thread (a line never interleaves with another thread's).
//
// Print() never blocks on stdout: lines are queued and written by a thread
// of the printer's own, so a loop thread that logs is never held up by a
// slow reader of stdout. The queue is bounded; lines beyond it are dropped
// and counted on stderr.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace uxds::tool {

class JsonLinePrinter {
 public:
  // Lines queued beyond this many bytes are dropped.
  static constexpr size_t kMaxQueuedBytes = 64u << 20;

  JsonLinePrinter();
  // Writes what is queued, then stops the writer.
  ~JsonLinePrinter();
  JsonLinePrinter(const JsonLinePrinter&) = delete;
  JsonLinePrinter& operator=(const JsonLinePrinter&) = delete;

  void Print(const nlohmann::ordered_json& line);

 private:
  void WriteLines();

  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::string> lines_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace uxds::tool
