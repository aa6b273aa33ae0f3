// `uxds call`: the built tool as a child process against the fake control
// plane and uxds TestService backends (UnaryCall fills `hostname`).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "http2/server.h"
#include "support/fake_control_plane.h"
#include "support/test_support.h"
#include "support/xds_test_resources.h"
#include "test_service/test_service.h"
#include "tool_run.h"
#include "uxds/runtime.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;

class CallToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cp_ = FakeControlPlane::Start();
    ASSERT_NE(cp_, nullptr);
    backends_ = *LoopThread::Start();
    backends_->RunSync([&] {
      for (int i = 0; i < 2; ++i) {
        auto services = std::make_shared<http2::ServiceRegistry>();
        test_service::RegisterTestService(*services, "b" + std::to_string(i),
                                          "host-" + std::to_string(i));
        servers_.push_back(std::move(
            *http2::Server::Listen(backends_->loop(), SocketAddress::Loopback4(0), services)));
        backends_->loop().Spawn(servers_.back()->Serve());
        addresses_.push_back("127.0.0.1:" + std::to_string(servers_.back()->port()));
      }
    });
    json server = {{"server_uri", cp_->target()},
                   {"channel_creds", json::array({{{"type", "insecure"}}})}};
    json bootstrap = {{"xds_servers", json::array({server})}, {"node", {{"id", "call-node"}}}};
    bootstrap_ = dir_.File("bootstrap.json");
    WriteFile(bootstrap_, bootstrap.dump());
  }

  void TearDown() override {
    std::promise<void> stopped;
    backends_->RunSync([&] {
      auto stop = [](std::vector<std::unique_ptr<http2::Server>>* servers,
                     std::promise<void>* done) -> Task<void> {
        for (auto& server : *servers) co_await server->Shutdown(std::chrono::milliseconds(0));
        done->set_value();
      };
      backends_->loop().Spawn(stop(&servers_, &stopped));
    });
    stopped.get_future().wait();
    backends_->RunSync([&] { servers_.clear(); });
    backends_.reset();
  }

  // UnaryCall to cluster "both" (round robin over both backends), EmptyCall
  // to "second" (backend 1 only).
  void ServeRoutes() {
    ASSERT_TRUE(cp_->SetResources(
        kLdsType,
        {{"svc",
          ApiListenerWithRoutes(
              "svc", "*", {{"/grpc.testing.TestService/EmptyCall", "second"}, {"", "both"}})}},
        "1"));
    ASSERT_TRUE(cp_->SetResources(
        kCdsType,
        {{"both", ValidCluster("both", "s-both")}, {"second", ValidCluster("second", "s-second")}},
        "1"));
    ASSERT_TRUE(cp_->SetResources(kEdsType,
                                  {{"s-both", EndpointsAt("s-both", addresses_)},
                                   {"s-second", EndpointsAt("s-second", {addresses_[1]})}},
                                  "1"));
  }

  std::vector<json> Parse(const ToolRun& run) {
    std::vector<json> lines;
    for (const std::string& line : run.lines) {
      json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << line;
      lines.push_back(parsed);
    }
    return lines;
  }

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> backends_;
  std::vector<std::unique_ptr<http2::Server>> servers_;
  std::vector<std::string> addresses_;
  TempDir dir_;
  std::string bootstrap_;
};

TEST_F(CallToolTest, PrintsOneLinePerCallAndASummary) {
  ServeRoutes();
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"call", "--bootstrap", bootstrap_, "xds:///svc", "-n",
                                         "40", "--concurrency", "4", "--deadline-ms", "10000"});
  EXPECT_EQ(run.exit_code, 0);
  std::vector<json> lines = Parse(run);
  ASSERT_EQ(lines.size(), 41u);
  std::map<std::string, int> backends;
  std::set<int> indices;
  for (size_t i = 0; i < 40; ++i) {
    EXPECT_EQ(lines[i]["status"], "OK") << lines[i].dump();
    EXPECT_TRUE(lines[i]["latency_us"].is_number_integer()) << lines[i].dump();
    EXPECT_GT(lines[i]["latency_us"].get<int64_t>(), 0);
    ++backends[lines[i]["backend"].get<std::string>()];
    indices.insert(lines[i]["call"].get<int>());
  }
  EXPECT_EQ(indices.size(), 40u);
  // Round robin over both: every backend answers, by its hostname.
  EXPECT_EQ(backends.size(), 2u) << ::testing::PrintToString(backends);
  EXPECT_GT(backends["host-0"], 0);
  EXPECT_GT(backends["host-1"], 0);
  const json& summary = lines[40]["summary"];
  EXPECT_EQ(summary["calls"], 40);
  EXPECT_EQ(summary["by_status"], json({{"OK", 40}}));
  EXPECT_EQ(summary["by_backend"]["host-0"].get<int>(), backends["host-0"]);
  EXPECT_EQ(summary["by_backend"]["host-1"].get<int>(), backends["host-1"]);
  const json& latency = summary["latency_us"];
  EXPECT_LE(latency["p50"].get<int64_t>(), latency["p90"].get<int64_t>());
  EXPECT_LE(latency["p90"].get<int64_t>(), latency["p99"].get<int64_t>());
  EXPECT_LE(latency["p99"].get<int64_t>(), latency["max"].get<int64_t>());
}

// --method routes like an application's call; without a hostname in the
// response, the backend is the address the call went to.
TEST_F(CallToolTest, MethodIsRoutedAndBackendFallsBackToTheAddress) {
  ServeRoutes();
  ToolRun run = RunTool(
      UXDS_TOOL_PATH, {"call", "--bootstrap", bootstrap_, "xds:///svc", "--method",
                       "/grpc.testing.TestService/EmptyCall", "-n", "3", "--header", "X-Trace=1"});
  EXPECT_EQ(run.exit_code, 0);
  std::vector<json> lines = Parse(run);
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["status"], "OK") << lines[i].dump();
    EXPECT_EQ(lines[i]["backend"], addresses_[1]) << lines[i].dump();
  }
  EXPECT_EQ(lines[3]["summary"]["by_backend"][addresses_[1]], 3);
}

// A cluster without endpoints: every call fails UNAVAILABLE with the
// resolution note (A88: the node ID); the exit status is 1.
TEST_F(CallToolTest, FailedCallsAreReportedAndExitOne) {
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "none"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"none", ValidCluster("none", "s-none")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-none", EndpointsAt("s-none", {})}}, "1"));
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"call", "--bootstrap", bootstrap_, "xds:///svc", "-n", "2",
                                         "--deadline-ms", "10000"});
  EXPECT_EQ(run.exit_code, 1);
  std::vector<json> lines = Parse(run);
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(lines[i]["status"], "UNAVAILABLE") << lines[i].dump();
    EXPECT_NE(lines[i]["message"].get<std::string>().find("call-node"), std::string::npos)
        << lines[i].dump();
    EXPECT_FALSE(lines[i].contains("backend")) << lines[i].dump();
  }
  EXPECT_EQ(lines[2]["summary"]["by_status"], json({{"UNAVAILABLE", 2}}));
  EXPECT_EQ(lines[2]["summary"]["by_backend"], json::object());
}

TEST_F(CallToolTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call"}).exit_code, 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", "xds:///svc", "--header", "novalue"}).exit_code, 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", "xds:///svc", "--method", "UnaryCall"}).exit_code, 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", "xds:///svc", "-n", "0"}).exit_code, 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", "--bootstrap", dir_.File("none.json"), "xds:///svc"})
                .exit_code,
            2);
}

// A host:port target needs no bootstrap.
TEST_F(CallToolTest, AHostPortTargetNeedsNoBootstrap) {
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"call", addresses_[0], "-n", "2"});
  EXPECT_EQ(run.exit_code, 0);
  std::vector<json> lines = Parse(run);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["backend"], "host-0") << lines[0].dump();
  EXPECT_EQ(lines[2]["summary"]["by_backend"]["host-0"], 2);
}

}  // namespace
}  // namespace uxds::testing
