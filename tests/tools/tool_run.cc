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

RedirectedRun RunToolRedirected(const std::string& tool_path, const std::vector<std::string>& args,
                                const std::string& redirect, const std::string& stdin_file,
                                std::chrono::milliseconds wait) {
  TempDir dir;
  const std::string err = dir.File("stderr");
  // $1 is stdin; the tool's arguments follow.
  std::vector<std::string> argv = {"/bin/sh", "-c",
                                   "f=$1; shift; exec \"$0\" \"$@\" < \"$f\" " + redirect,
                                   tool_path, stdin_file.empty() ? "/dev/null" : stdin_file};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess tool = Subprocess::Start(argv, {}, /*pipe_stdin=*/false, err);
  RedirectedRun run;
  run.exit_code = tool.Wait(wait);
  run.stderr_text = ReadFile(err);
  return run;
}

std::vector<std::string> LinesOf(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string JsonLinesToolTest::WriteInput(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  const std::string path = dir_.File("input" + std::to_string(++files_) + ".jsonl");
  WriteFile(path, text);
  return path;
}

std::vector<nlohmann::json> JsonLinesToolTest::RunLines(const std::string& command,
                                                        const std::vector<std::string>& lines) {
  ToolRun run = RunTool(tool_path_, {command, WriteInput(lines)});
  EXPECT_EQ(run.exit_code, 0);
  std::vector<nlohmann::json> out;
  for (const std::string& line : run.lines) {
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << line;
    out.push_back(parsed);
  }
  EXPECT_EQ(out.size(), lines.size());
  return out;
}

}  // namespace uxds::testing
