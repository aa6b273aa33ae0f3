#include "xds/protobuf_log.h"

#include <google/protobuf/stubs/logging.h>

#include <mutex>
#include <string>

#include "uxds/log.h"

namespace uxds::xds_internal {

namespace {

void ForwardProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                        const std::string& message) {
  LogSeverity severity = LogSeverity::kInfo;
  if (level == google::protobuf::LOGLEVEL_WARNING) severity = LogSeverity::kWarning;
  if (level >= google::protobuf::LOGLEVEL_ERROR) severity = LogSeverity::kError;
  Log(severity, "protobuf " + std::string(filename) + ":" + std::to_string(line) + ": " + message);
}

}  // namespace

void RouteProtobufLogsToUxdsLog() {
  // protobuf says SetLogHandler is not thread-safe: set it once.
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&ForwardProtobufLog); });
}

}  // namespace uxds::xds_internal
