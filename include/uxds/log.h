// Where uxds writes what it has to say: one process-wide sink, stderr by
// default. An embedder routes uxds's lines (and protobuf's own warnings,
// e.g. "invalid UTF-8" while decoding a resource) into its own logging.
#pragma once

#include <functional>
#include <string_view>

namespace uxds {

enum class LogSeverity { kInfo, kWarning, kError };
// "INFO", "WARNING", "ERROR".
std::string_view LogSeverityName(LogSeverity severity);

// Called from any uxds thread, possibly from several at once.
using LogSink = std::function<void(LogSeverity severity, std::string_view message)>;

// Replaces the sink; an empty one restores the default, which writes
// "uxds WARNING: <message>" lines to stderr. Safe from any thread.
void SetLogSink(LogSink sink);

// Writes `message` through the current sink.
void Log(LogSeverity severity, std::string_view message);

}  // namespace uxds
