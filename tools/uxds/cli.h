// Command-line parsing shared by the uxds subcommands: CLI11 (Debian's
// libcli11-dev, header-only, tool-side only), so every subcommand gets the
// same --help, value validation and error lines.
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"

namespace uxds::tool {

// Each subcommand builds its parser as
//   CLI::App app{"what it does", "uxds NAME"};
// adds its options (with CLI11's validators for ranges and enums), then calls
// ParseCommandLine.
// Refuses an empty value ("--bootstrap ''"), naming what it should be.
inline CLI::Validator NonEmpty(std::string what) {
  return CLI::Validator(
      [what](std::string& value) { return value.empty() ? "must be " + what : std::string(); }, "");
}

// Parses `args` (the words after the subcommand's name). Returns nullopt
// when the command should run, else the exit code: 0 after --help (printed
// on stdout), kExitUsage after a usage error, reported on stderr as one line
// plus a hint.
inline std::optional<int> ParseCommandLine(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nrun `%s --help` for usage\n", app.get_name().c_str(), e.what(),
                 app.get_name().c_str());
    return kExitUsage;
  }
  return std::nullopt;
}

// Bytes from the command line or the network in an error line: those that
// are not printable ASCII as \xNN (a terminal shows them, a JSON encoder
// takes them).
inline std::string Printable(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    }
  }
  return out;
}

// Flushes stdout; when it cannot be written (a full disk, /dev/full, a
// closed pipe) says so on stderr and returns true: lost output is an error
// (exit 1), whatever else went well.
inline bool StdoutFailed(const char* command) {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return false;
  const int error = errno;
  std::fprintf(stderr, "%s: cannot write stdout%s%s\n", command, error != 0 ? ": " : "",
               error != 0 ? std::strerror(error) : "");
  return true;
}

}  // namespace uxds::tool
