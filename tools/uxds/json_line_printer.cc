#include "json_line_printer.h"

#include <cstdio>

namespace uxds::tool {

JsonLinePrinter::JsonLinePrinter() : writer_([this] { WriteLines(); }) {}

JsonLinePrinter::~JsonLinePrinter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  writer_.join();
}

void JsonLinePrinter::Print(const nlohmann::ordered_json& line) {
  // Invalid UTF-8 from a peer (a resource name) is replaced, never thrown on.
  std::string text =
      line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queued_bytes_ + text.size() > kMaxQueuedBytes) {
      ++dropped_;
      return;
    }
    queued_bytes_ += text.size();
    lines_.push_back(std::move(text));
  }
  queued_.notify_one();
}

void JsonLinePrinter::WriteLines() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    queued_.wait(lock, [this] { return stopping_ || !lines_.empty() || dropped_ > 0; });
    if (dropped_ > 0) {
      std::fprintf(stderr, "uxds: %llu stdout lines dropped: stdout is not read fast enough\n",
                   static_cast<unsigned long long>(dropped_));
      dropped_ = 0;
    }
    if (lines_.empty()) {
      if (stopping_) return;
      continue;
    }
    std::string text = std::move(lines_.front());
    lines_.pop_front();
    lock.unlock();
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    lock.lock();
    queued_bytes_ -= text.size();
  }
}

}  // namespace uxds::tool
