#include "uxds/log.h"

#include <cstdio>
#include <memory>
#include <mutex>

namespace uxds {

namespace {

std::mutex& SinkMutex() {
  static std::mutex mu;
  return mu;
}

// Shared so that a sink replaced while another thread is inside it stays
// alive until that call returns.
std::shared_ptr<const LogSink>& CurrentSink() {
  static std::shared_ptr<const LogSink> sink;
  return sink;
}

}  // namespace

std::string_view LogSeverityName(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return "INFO";
    case LogSeverity::kWarning:
      return "WARNING";
    case LogSeverity::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

void SetLogSink(LogSink sink) {
  auto next = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
  std::lock_guard lock(SinkMutex());
  CurrentSink() = std::move(next);
}

void Log(LogSeverity severity, std::string_view message) {
  std::shared_ptr<const LogSink> sink;
  {
    std::lock_guard lock(SinkMutex());
    sink = CurrentSink();
  }
  if (sink != nullptr) {
    (*sink)(severity, message);
    return;
  }
  // The default sink keeps stderr for what needs attention: INFO lines
  // (e.g. which runtime backend each Loop runs on) reach only a sink the
  // application sets.
  if (severity == LogSeverity::kInfo) return;
  const std::string_view name = LogSeverityName(severity);
  std::fprintf(stderr, "uxds %.*s: %.*s\n", static_cast<int>(name.size()), name.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace uxds
