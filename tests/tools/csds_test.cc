// `uxds csds`: the built tool reads the CSDS service of `uxds serve` (both
// child processes) configured by the fake control plane, as a table and as
// JSON, including a NACKed Listener's error row.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "serve_support.h"
#include "support/fake_control_plane.h"
#include "support/test_support.h"
#include "support/xds_test_resources.h"
#include "tool_run.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;

// `uxds csds ADDRESS --json`, parsed; discarded JSON when it failed.
json CsdsJson(const std::string& address) {
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"csds", address, "--json"});
  if (run.exit_code != 0 || run.lines.size() != 1) return json(json::value_t::discarded);
  return json::parse(run.lines[0], nullptr, /*allow_exceptions=*/false);
}

// Polls `uxds csds` until the first resource of the first client has
// `state` (the server's XdsClient applies a response on its own time).
json WaitForState(const std::string& address, const std::string& state) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  json last;
  while (std::chrono::steady_clock::now() < deadline) {
    last = CsdsJson(address);
    if (!last.is_discarded() && !last["clients"].empty() &&
        !last["clients"][0]["resources"].empty() &&
        last["clients"][0]["resources"][0].value("client_status", "") == state) {
      return last;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "no " << state << " entry within 60 s; last answer: " << last.dump();
  return last;
}

class CsdsToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cp_ = FakeControlPlane::Start();
    ASSERT_NE(cp_, nullptr);
    // Without fail_on_data_errors a NACKed Listener leaves the old one in
    // use (A88), so the server keeps serving CSDS.
    WriteServeBootstrap(dir_.File("bootstrap.json"), *cp_, "csds-node",
                        /*fail_on_data_errors=*/false);
    port_ = FreePort();
    address_ = "127.0.0.1:" + std::to_string(port_);
    name_ = "grpc/server?xds.resource.listening_address=" + address_;
    serve_.emplace(Subprocess::Start({UXDS_TOOL_PATH, "serve", "--bootstrap",
                                      dir_.File("bootstrap.json"), "--listen", address_}));
    ASSERT_TRUE(cp_->SetResources(kLdsType, {{name_, ServingListener(name_, port_)}}, "1"));
    std::optional<json> serving = NextJson(*serve_);
    ASSERT_TRUE(serving.has_value());
    ASSERT_EQ(serving->value("serving", false), true) << serving->dump();
  }
  void TearDown() override {
    if (!serve_) return;
    serve_->Signal(SIGTERM);
    EXPECT_EQ(serve_->Wait(), 0);
  }

  std::unique_ptr<FakeControlPlane> cp_;
  TempDir dir_;
  uint16_t port_ = 0;
  std::string address_;
  std::string name_;
  std::optional<Subprocess> serve_;
};

TEST_F(CsdsToolTest, JsonShowsTheServersClientWithItsAckedListener) {
  json answer = WaitForState(address_, "ACKED");
  ASSERT_EQ(answer["clients"].size(), 1u) << answer.dump();
  const json& client = answer["clients"][0];
  EXPECT_EQ(client.value("client_scope", ""), "#server");
  EXPECT_EQ(client.value("node_id", ""), "csds-node");
  ASSERT_EQ(client["resources"].size(), 1u) << answer.dump();
  const json& listener = client["resources"][0];
  EXPECT_EQ(listener.value("type_url", ""), kLdsType);
  EXPECT_EQ(listener.value("name", ""), name_);
  EXPECT_EQ(listener.value("version", ""), "1");
  EXPECT_FALSE(listener.contains("error")) << answer.dump();
}

TEST_F(CsdsToolTest, NackedListenerGetsAnErrorRowInTheTableAndJson) {
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{name_, ServingListener(name_, port_, /*with_router=*/false)}}, "2"));
  json answer = WaitForState(address_, "NACKED");
  const json& listener = answer["clients"][0]["resources"][0];
  // A88: the NACKed update leaves version 1 in use; the error names version 2.
  EXPECT_EQ(listener.value("version", ""), "1") << answer.dump();
  EXPECT_EQ(listener["error"].value("version", ""), "2") << answer.dump();
  EXPECT_NE(listener["error"].value("details", "").find("expected at least one HTTP filter"),
            std::string::npos)
      << answer.dump();

  ToolRun table = RunTool(UXDS_TOOL_PATH, {"csds", address_});
  ASSERT_EQ(table.exit_code, 0);
  ASSERT_EQ(table.lines.size(), 2u);
  EXPECT_EQ(table.lines[0].rfind("SCOPE", 0), 0u) << table.lines[0];
  for (const char* column : {"TYPE", "NAME", "STATE", "VERSION", "ERROR"}) {
    EXPECT_NE(table.lines[0].find(column), std::string::npos) << table.lines[0];
  }
  const std::string& row = table.lines[1];
  for (const std::string& cell :
       {std::string("#server"), std::string("Listener"), name_, std::string("NACKED"),
        std::string("(version 2)"), std::string("expected at least one HTTP filter")}) {
    EXPECT_NE(row.find(cell), std::string::npos) << "no \"" << cell << "\" in: " << row;
  }
}

TEST(CsdsToolErrorsTest, UsageAndRuntimeErrors) {
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"csds"}).exit_code, 2);  // no address
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"csds", "127.0.0.1:1", "--bogus"}).exit_code, 2);
  // Nothing listens there: no answer within the timeout, exit 1.
  const std::string nobody = "127.0.0.1:" + std::to_string(FreePort());
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"csds", nobody, "--timeout-ms", "500"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(run.lines.empty());
}

}  // namespace
}  // namespace uxds::testing
