// uxds: the command-line tool. `uxds <command> [args...]`; `uxds help`.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"

namespace uxds::tool {
namespace {

const Command kCommands[] = {
    {"call", "unary calls through an xDS channel: one JSON line per call, then a summary", RunCall},
    {"control-plane",
     "an ADS management server serving xDS resources from JSON files in a directory",
     RunControlPlane},
    {"csds", "print the xDS client status (CSDS) of a running uxds process as a table or JSON",
     RunCsds},
    {"demo", "the xDS demo on loopback: control plane, six xDS servers, ring hash, failover, CSDS",
     RunDemo},
    {"fcm", "print the filter chain an xDS-enabled server's Listener gives each connection",
     RunFcm},
    {"ring", "print the ring_hash ring size and the endpoint each request hash picks", RunRing},
    {"serve", "an xDS-enabled server: TestService, Health, CSDS; serving status as JSON lines",
     RunServe},
    {"test-server", "serve grpc.testing.TestService on 127.0.0.1 until SIGINT/SIGTERM",
     RunTestServer},
    {"watch", "watch xDS resources, one JSON line per watcher callback", RunWatch},
};

void PrintUsage(std::FILE* out) {
  std::fprintf(out, "usage: uxds <command> [args...]\n\ncommands:\n");
  // The summaries start in one column, after the longest name.
  int width = 0;
  for (const Command& c : kCommands) width = std::max(width, static_cast<int>(std::strlen(c.name)));
  for (const Command& c : kCommands) std::fprintf(out, "  %-*s  %s\n", width, c.name, c.summary);
  std::fprintf(out, "\n`uxds help <command>` describes one.\n");
}

// Output that was lost is an error: a command that succeeded but whose
// stdout could not be written exits 1 and says so. (A command that failed
// has said why already.)
int CheckStdout(const char* command, int exit_code) {
  if (exit_code != kExitOk) return exit_code;
  const std::string name = std::string("uxds ") + command;
  return StdoutFailed(name.c_str()) ? kExitRuntimeError : exit_code;
}

}  // namespace
}  // namespace uxds::tool

int main(int argc, char** argv) {
  using namespace uxds::tool;
  if (argc < 2) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  const std::string name = argv[1];
  const bool is_help = name == "help" || name == "--help" || name == "-h";
  if (is_help && argc == 2) {
    PrintUsage(stdout);
    return CheckStdout("help", kExitOk);
  }
  // `uxds help ring` is `uxds ring --help`.
  const std::string command = is_help && argc == 3 ? argv[2] : name;
  if (!is_help || argc == 3) {
    for (const Command& c : kCommands) {
      if (command != c.name) continue;
      // A closed stdout pipe is a failed write (EPIPE) the command reports,
      // not a SIGPIPE that kills it before it can stop its children.
      signal(SIGPIPE, SIG_IGN);
      if (is_help) return CheckStdout(c.name, c.run({"--help"}));
      return CheckStdout(c.name, c.run(std::vector<std::string>(argv + 2, argv + argc)));
    }
    std::fprintf(stderr, "uxds: unknown command \"%s\"\nrun `uxds help` for the commands\n",
                 command.c_str());
    return kExitUsage;
  }
  std::fprintf(stderr, "uxds: help takes one command name\nrun `uxds help` for the commands\n");
  return kExitUsage;
}
