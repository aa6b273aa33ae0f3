// `uxds call`: the built tool as a child process against the fake control
// plane and uxds TestService backends (UnaryCall fills `hostname`).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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

  // Every call answered by host-0 or host-1 (`calls` in all, if given).
  static void ExpectOnlyTheTestBackends(const std::map<std::string, int>& by_backend,
                                        int calls = -1) {
    int answered = 0;
    for (const auto& [backend, n] : by_backend) {
      EXPECT_TRUE(backend == "host-0" || backend == "host-1") << backend;
      EXPECT_GT(n, 0) << backend;
      answered += n;
    }
    EXPECT_FALSE(by_backend.empty());
    if (calls >= 0) {
      EXPECT_EQ(answered, calls) << ::testing::PrintToString(by_backend);
    }
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
  // Each line names the backend by its hostname, and the summary counts the
  // lines. Which backends answer is round robin's: it picks among the READY
  // ones, and on a loaded machine 40 calls can end before the second
  // connection is up (LoopChannelTest waits for both READY and checks the
  // spread).
  ExpectOnlyTheTestBackends(backends, 40);
  const json& summary = lines[40]["summary"];
  EXPECT_EQ(summary["calls"], 40);
  EXPECT_EQ(summary["by_status"], json({{"OK", 40}}));
  EXPECT_EQ(summary["by_backend"], json(backends));
  EXPECT_GT(summary.value("elapsed_s", 0.0), 0);
  EXPECT_GT(summary.value("calls_per_s", 0.0), 0);
  const json& latency = summary["latency_us"];
  EXPECT_LE(latency["p50"].get<int64_t>(), latency["p90"].get<int64_t>());
  EXPECT_LE(latency["p90"].get<int64_t>(), latency["p99"].get<int64_t>());
  EXPECT_LE(latency["p99"].get<int64_t>(), latency["max"].get<int64_t>());
}

// --loops 3: the calls run on the channel's loop and two more (each with
// its own LoopChannel and connections); every call is counted once, every
// line is whole, and every call is answered by one of the backends.
TEST_F(CallToolTest, CallsFromSeveralLoopsAreEachCountedOnce) {
  ServeRoutes();
  ToolRun run =
      RunTool(UXDS_TOOL_PATH, {"call", "--bootstrap", bootstrap_, "xds:///svc", "-n", "300",
                               "--concurrency", "9", "--loops", "3", "--wait-for-ready"});
  EXPECT_EQ(run.exit_code, 0);
  std::vector<json> lines = Parse(run);
  ASSERT_EQ(lines.size(), 301u);
  std::set<int> indices;
  for (size_t i = 0; i < 300; ++i) {
    EXPECT_EQ(lines[i]["status"], "OK") << lines[i].dump();
    indices.insert(lines[i]["call"].get<int>());
  }
  EXPECT_EQ(indices.size(), 300u);
  EXPECT_EQ(*indices.rbegin(), 299);
  const json& summary = lines[300]["summary"];
  EXPECT_EQ(summary["calls"], 300);
  EXPECT_EQ(summary["by_status"], json({{"OK", 300}}));
  ExpectOnlyTheTestBackends(summary["by_backend"].get<std::map<std::string, int>>(), 300);
}

// --summary-only (what benchmarks use for 10^5 calls): the summary line
// alone, counting every call as the per-call lines would have.
TEST_F(CallToolTest, SummaryOnlyPrintsTheSummaryAlone) {
  ServeRoutes();
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"call", "--bootstrap", bootstrap_, "xds:///svc", "-n",
                                         "30", "--concurrency", "3", "--summary-only"});
  EXPECT_EQ(run.exit_code, 0);
  std::vector<json> lines = Parse(run);
  ASSERT_EQ(lines.size(), 1u);
  const json& summary = lines[0]["summary"];
  EXPECT_EQ(summary["calls"], 30);
  EXPECT_EQ(summary["by_status"], json({{"OK", 30}}));
  ExpectOnlyTheTestBackends(summary["by_backend"].get<std::map<std::string, int>>(), 30);
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

// Bytes that are not UTF-8 in the target, the method or a header never end
// the tool in terminate (a JSON exception escaping a worker): a target's
// error line is escaped JSON, the rest are usage errors.
TEST_F(CallToolTest, BytesThatAreNotUtf8NeverAbort) {
  ServeRoutes();
  ToolRun target = RunTool(UXDS_TOOL_PATH, {"call", "--bootstrap", bootstrap_, "xds:///svc\xff\xfe",
                                            "-n", "2", "--deadline-ms", "500"});
  EXPECT_EQ(target.exit_code, 1);
  std::vector<json> lines = Parse(target);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0]["status"], "OK") << lines[0].dump();
  EXPECT_EQ(lines[2]["summary"]["calls"], 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", "--bootstrap", bootstrap_, "xds:///svc", "--method",
                                     "/grpc.testing.TestService/Unary\xff"})
                .exit_code,
            2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", addresses_[0], "--header", "x-\xff=1"}).exit_code, 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", addresses_[0], "--header", "x=\xff"}).exit_code, 2);
  // A -bin header carries bytes.
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", addresses_[0], "--header", "x-bin=\xff"}).exit_code,
            0);
}

// Header names gRPC cannot send are usage errors, not failed calls.
TEST_F(CallToolTest, HeaderNamesThatCannotBeSentAreUsageErrors) {
  for (const std::string header : {":path=/x", "a b=1", "x\ty=1", "(x)=1", ":authority=h"}) {
    EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", addresses_[0], "--header", header}).exit_code, 2)
        << header;
  }
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"call", addresses_[0], "--header", "X-Ok_1.a=v"}).exit_code,
            0);
}

// SIGINT stops new calls, lets those in flight end and prints the summary:
// every line whole JSON, the summary last, counting every call line.
TEST_F(CallToolTest, SigintPrintsTheSummaryOfTheCallsMade) {
  for (const int sig : {SIGINT, SIGTERM}) {
    Subprocess call = Subprocess::Start(
        {UXDS_TOOL_PATH, "call", addresses_[0], "-n", "10000000", "--concurrency", "8"});
    // Some calls done: the signal comes mid-run.
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(call.ReadLine(std::chrono::seconds(30)));
    call.Signal(sig);
    while (call.ReadLine(std::chrono::seconds(30))) {
    }
    EXPECT_EQ(call.Wait(std::chrono::seconds(30)), 128 + sig);
    std::vector<json> lines;
    for (const std::string& line : call.lines()) {
      json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(parsed.is_discarded()) << "a cut line: " << line;
      lines.push_back(parsed);
    }
    ASSERT_TRUE(lines.back().contains("summary")) << lines.back().dump();
    const json& summary = lines.back()["summary"];
    EXPECT_EQ(summary.value("stopped_by", ""), sig == SIGINT ? "SIGINT" : "SIGTERM");
    EXPECT_EQ(summary["calls"].get<size_t>(), lines.size() - 1);
    EXPECT_EQ(summary["by_status"]["OK"].get<size_t>(), lines.size() - 1);
    EXPECT_LT(summary["calls"].get<int64_t>(), 10000000);
    EXPECT_GT(summary.value("elapsed_s", 0.0), 0);
    EXPECT_GT(summary.value("calls_per_s", 0.0), 0);
  }
}

// Calls in flight when SIGINT comes get a bounded grace (2 s), not their
// deadline (10 min here): a server that accepts the connection and never
// answers still gets a summary within seconds.
TEST_F(CallToolTest, SigintDoesNotWaitForTheDeadlinesOfCallsInFlight) {
  const int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(silent, 16), 0);
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&address), &size), 0);
  Subprocess call = Subprocess::Start({UXDS_TOOL_PATH, "call",
                                       "127.0.0.1:" + std::to_string(ntohs(address.sin_port)), "-n",
                                       "3", "--concurrency", "3", "--deadline-ms", "600000",
                                       // One loop: all three calls start before its connection
                                       // is up (another loop's could start after the signal).
                                       "--loops", "1"});
  // Its connection is up: the calls are in flight.
  pollfd accepting = {silent, POLLIN, 0};
  ASSERT_EQ(poll(&accepting, 1, 30'000), 1);
  const int connection = accept(silent, nullptr, nullptr);
  call.Signal(SIGINT);
  while (call.ReadLine(std::chrono::seconds(60))) {
  }
  EXPECT_EQ(call.Wait(std::chrono::seconds(60)), 128 + SIGINT);
  ASSERT_FALSE(call.lines().empty());
  const json summary = json::parse(call.lines().back(), nullptr, false).value("summary", json());
  EXPECT_EQ(summary.value("calls", 0), 3) << call.lines().back();
  EXPECT_EQ(summary.value("stopped_by", ""), "SIGINT") << call.lines().back();
  EXPECT_LT(summary.value("elapsed_s", 1e9), 60.0) << call.lines().back();
  close(connection);
  close(silent);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// The summary keeps counts and a fixed-size histogram, not the calls: the
// largest resident set of a run of 300 000 calls is within a few MB of a
// run of 1 000 (keeping each call cost ~90 bytes: ~27 MB more).
TEST_F(CallToolTest, MemoryDoesNotGrowWithTheNumberOfCalls) {
  if (kAddressSanitizer) {
    GTEST_SKIP() << "AddressSanitizer keeps freed memory in quarantine (up to 256 MB) and "
                    "runs 300 000 calls too slowly: RSS says nothing about the tool here";
  }
  auto max_rss_kb = [&](const std::string& calls) {
    RedirectedRun run = RunToolRedirected(
        UXDS_TOOL_PATH, {"call", addresses_[0], "-n", calls, "--concurrency", "16"}, "> /dev/null");
    EXPECT_EQ(run.exit_code, 0) << run.stderr_text;
    rusage usage{};
    getrusage(RUSAGE_CHILDREN, &usage);  // the largest child waited for so far
    return usage.ru_maxrss;
  };
  const long small = max_rss_kb("1000");
  const long large = max_rss_kb("300000");
  EXPECT_LT(large - small, 8 * 1024) << "KB: " << small << " then " << large;
}

// The percentiles come from the histogram: within 0.4% of the calls' own.
TEST_F(CallToolTest, SummaryPercentilesMatchTheCallLines) {
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"call", addresses_[0], "-n", "500", "--concurrency", "4"});
  ASSERT_EQ(run.exit_code, 0);
  std::vector<json> lines = Parse(run);
  ASSERT_EQ(lines.size(), 501u);
  std::vector<int64_t> latencies;
  for (size_t i = 0; i < 500; ++i) latencies.push_back(lines[i]["latency_us"].get<int64_t>());
  std::sort(latencies.begin(), latencies.end());
  const json& latency = lines[500]["summary"]["latency_us"];
  for (const auto& [name, rank] :
       std::vector<std::pair<std::string, size_t>>{{"p50", 250}, {"p90", 450}, {"p99", 495}}) {
    const double exact = static_cast<double>(latencies[rank - 1]);
    EXPECT_NEAR(latency[name].get<double>(), exact, exact / 256 + 1) << name;
  }
  EXPECT_EQ(latency["max"].get<int64_t>(), latencies.back());
}

// Lost output is an error: into a full device or a closed stdout, exit 1
// with one line saying so, and the calls stop.
TEST_F(CallToolTest, StdoutThatCannotBeWrittenIsAnError) {
  for (const std::string redirect : {"> /dev/full", ">&-"}) {
    RedirectedRun run =
        RunToolRedirected(UXDS_TOOL_PATH, {"call", addresses_[0], "-n", "10000000"}, redirect);
    EXPECT_EQ(run.exit_code, 1) << redirect;
    EXPECT_EQ(LinesOf(run.stderr_text).size(), 1u) << redirect << ": " << run.stderr_text;
    EXPECT_NE(run.stderr_text.find("uxds call: cannot write stdout"), std::string::npos)
        << redirect << ": " << run.stderr_text;
  }
}

}  // namespace
}  // namespace uxds::testing
