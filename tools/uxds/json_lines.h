// The shape shared by the uxds commands that answer JSON lines (ring, fcm):
// `uxds CMD [FILE]` reads one JSON object per line from FILE (or stdin, or
// "-"), skips blank lines, and prints one JSON line per input line, flushed,
// so callers may drive the command interactively.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace uxds::tool {

using Json = nlohmann::ordered_json;

// Adds the FILE argument to `app` (which holds the command's description),
// parses `args`, then answers every line. `answer` turns one input line into
// its output. Returns the exit code.
int RunJsonLines(CLI::App& app, const std::vector<std::string>& args,
                 const std::function<Json(std::string_view line)>& answer);

// A JSON number that is a non-negative integer (not 1.0, not -1).
bool GetUnsigned(const Json& value, uint64_t* out);

}  // namespace uxds::tool
