// The subcommands of the uxds tool.
#pragma once

#include <string>
#include <vector>

namespace uxds::tool {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsage = 2;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

int RunCall(const std::vector<std::string>& args);
int RunControlPlane(const std::vector<std::string>& args);
int RunCsds(const std::vector<std::string>& args);
int RunDemo(const std::vector<std::string>& args);
int RunFcm(const std::vector<std::string>& args);
int RunRing(const std::vector<std::string>& args);
int RunServe(const std::vector<std::string>& args);
int RunTestServer(const std::vector<std::string>& args);
int RunWatch(const std::vector<std::string>& args);

}  // namespace uxds::tool
