#include "json_lines.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "commands.h"

namespace uxds::tool {
namespace {

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

bool GetUnsigned(const Json& value, uint64_t* out) {
  if (!value.is_number_unsigned()) return false;
  *out = value.get<uint64_t>();
  return true;
}

int RunJsonLines(CLI::App& app, const std::vector<std::string>& args,
                 const std::function<Json(std::string_view line)>& answer) {
  std::string file;
  app.add_option("FILE", file, "the input, one JSON object per line (default, or \"-\": stdin)");
  if (auto exit_code = ParseCommandLine(app, args)) return *exit_code;
  std::ifstream in_file;
  if (!file.empty() && file != "-") {
    in_file.open(file);
    if (!in_file) {
      std::fprintf(stderr, "%s: cannot read %s: %s\n", app.get_name().c_str(), file.c_str(),
                   std::strerror(errno));
      return kExitRuntimeError;
    }
  }
  std::istream& in = in_file.is_open() ? static_cast<std::istream&>(in_file) : std::cin;
  std::string line;
  while (std::getline(in, line)) {
    if (IsBlank(line)) continue;
    const std::string out = answer(line).dump(-1, ' ', false, Json::error_handler_t::replace);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
    // A line in, a line out: callers may drive the tool interactively.
    // Output that cannot be written ends the command: it is lost.
    if (StdoutFailed(app.get_name().c_str())) return kExitRuntimeError;
  }
  return kExitOk;
}

}  // namespace uxds::tool
