// `uxds demo`: the built tool runs the whole demo (control plane, six
// `uxds serve` servers, the client) on loopback, with its built-in config
// and with a directory given by --config; every step must PASS.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_support.h"
#include "tool_run.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

constexpr int kSteps = 6;

// Every step line "[i/6] PASS ..." in order, the summary, and the CSDS
// table's header.
void ExpectAllStepsPass(const ToolRun& run) {
  std::string output;
  for (const std::string& line : run.lines) output += line + "\n";
  size_t at = 0;
  for (int step = 1; step <= kSteps; ++step) {
    const std::string prefix = "[" + std::to_string(step) + "/6] PASS";
    at = output.find(prefix, at);
    EXPECT_NE(at, std::string::npos) << "no \"" << prefix << "\" in:\n" << output;
    if (at == std::string::npos) return;
  }
  EXPECT_EQ(output.find("FAIL"), std::string::npos) << output;
  EXPECT_NE(output.find("\nSCOPE "), std::string::npos) << output;
  EXPECT_NE(output.find("uxds demo: PASS"), std::string::npos) << output;
  EXPECT_EQ(run.exit_code, 0) << output;
}

TEST(DemoTest, BuiltInConfigPassesEveryStep) {
  ExpectAllStepsPass(RunTool(UXDS_TOOL_PATH, {"demo"}, "", std::chrono::seconds(120)));
}

TEST(DemoTest, ConfigDirectoryPassesEveryStep) {
  TempDir dir;
  ToolRun written = RunTool(UXDS_TOOL_PATH, {"demo", "--write-config", dir.path()});
  ASSERT_EQ(written.exit_code, 0);
  ExpectAllStepsPass(
      RunTool(UXDS_TOOL_PATH, {"demo", "--config", dir.path()}, "", std::chrono::seconds(120)));
}

TEST(DemoTest, ConfigWithoutEndpointsIsARuntimeError) {
  TempDir dir;
  WriteFile(dir.File("cluster.json"),
            R"({"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c"})");
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"demo", "--config", dir.path()});
  EXPECT_EQ(run.exit_code, 1);
}

TEST(DemoTest, UsageErrors) {
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"demo", "--bogus"}).exit_code, 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"demo", "--config", "/nonexistent/dir"}).exit_code, 2);
}

}  // namespace
}  // namespace uxds::testing
