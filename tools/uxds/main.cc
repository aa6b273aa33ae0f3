// uxds: the command-line tool. `uxds <command> [args...]`; `uxds help`.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"

namespace uxds::tool {
namespace {

const Command kCommands[] = {
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

}  // namespace
}  // namespace uxds::tool

int main(int argc, char** argv) {
  using namespace uxds::tool;
  if (argc < 2) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  std::string name = argv[1];
  if (name == "help" && argc == 3) {  // `uxds help ring` is `uxds ring --help`
    for (const Command& c : kCommands) {
      if (c.name == std::string(argv[2])) return c.run({"--help"});
    }
  }
  if (name == "help" || name == "--help" || name == "-h") {
    PrintUsage(stdout);
    return kExitOk;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(args);
  }
  std::fprintf(stderr, "uxds: unknown command \"%s\"\n\n", name.c_str());
  PrintUsage(stderr);
  return kExitUsage;
}
