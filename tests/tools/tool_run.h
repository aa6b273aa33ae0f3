// Runs the built uxds tool as a child process, for the tests of its
// commands.
#pragma once

#include <chrono>
#include <string>
#include <vector>

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

}  // namespace uxds::testing
