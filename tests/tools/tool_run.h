// Runs the built uxds tool as a child process, for the tests of its
// commands.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace uxds::testing {

struct ToolRun {
  std::vector<std::string> lines;  // stdout
  int exit_code;
};

// Runs `uxds <args...>` (the binary at `tool_path`) to its end; with
// `stdin_file`, stdin reads that file.
ToolRun RunTool(const std::string& tool_path, const std::vector<std::string>& args,
                const std::string& stdin_file = "",
                std::chrono::milliseconds wait = std::chrono::seconds(60));

// How a run whose stdout went elsewhere ended: its exit code and stderr.
struct RedirectedRun {
  int exit_code;
  std::string stderr_text;
};

// Runs `uxds <args...>` to its end with stdout redirected as the shell
// redirection `redirect` says ("> /dev/full", ">&-": closed), stdin from
// `stdin_file` (or /dev/null), stderr captured.
RedirectedRun RunToolRedirected(const std::string& tool_path, const std::vector<std::string>& args,
                                const std::string& redirect, const std::string& stdin_file = "",
                                std::chrono::milliseconds wait = std::chrono::seconds(60));

// The lines of `text`, without their newlines.
std::vector<std::string> LinesOf(const std::string& text);

// For the commands that answer JSON lines (ring, fcm): input files in a
// temporary folder, output lines parsed.
class JsonLinesToolTest : public ::testing::Test {
 protected:
  explicit JsonLinesToolTest(std::string tool_path) : tool_path_(std::move(tool_path)) {}

  // Writes one input line per element; returns the file's path.
  std::string WriteInput(const std::vector<std::string>& lines);
  // Runs `uxds COMMAND FILE` on the lines, expecting exit status 0 and one
  // JSON output line per input line; returns them parsed.
  std::vector<nlohmann::json> RunLines(const std::string& command,
                                       const std::vector<std::string>& lines);

  const std::string tool_path_;
  TempDir dir_;
  int files_ = 0;
};

}  // namespace uxds::testing
