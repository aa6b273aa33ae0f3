#include "tool_run.h"

#include <optional>

#include "common/subprocess.h"

namespace uxds::testing {

ToolRun RunTool(const std::string& tool_path, const std::vector<std::string>& args,
                const std::string& stdin_file, std::chrono::milliseconds wait) {
  std::vector<std::string> argv;
  if (stdin_file.empty()) {
    argv = {tool_path};
  } else {
    argv = {"/bin/sh", "-c", "f=$1; shift; exec \"$0\" \"$@\" < \"$f\"", tool_path, stdin_file};
  }
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess tool = Subprocess::Start(argv);
  ToolRun run;
  while (std::optional<std::string> line = tool.ReadLine(wait)) run.lines.push_back(*line);
  run.exit_code = tool.Wait(wait);
  return run;
}

}  // namespace uxds::testing
