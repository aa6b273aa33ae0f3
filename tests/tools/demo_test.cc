// `uxds demo`: the built tool runs the whole demo (control plane, six
// `uxds serve` servers, the client) on loopback, with its built-in config
// and with a directory given by --config; every step must PASS.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "support/test_support.h"
#include "tool_run.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

constexpr int kSteps = 6;

// Every step line "[i/N] PASS ..." in order, the summary, and the CSDS
// table's header.
void ExpectAllStepsPass(const ToolRun& run, int steps = kSteps) {
  std::string output;
  for (const std::string& line : run.lines) output += line + "\n";
  size_t at = 0;
  for (int step = 1; step <= steps; ++step) {
    const std::string prefix = "[" + std::to_string(step) + "/" + std::to_string(steps) + "] PASS";
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

// A29: the same demo over mutual TLS that only xDS configured, with the
// certificates the demo makes, a seventh step: clients without a
// certificate refused, and an eighth: a call the servers' RBAC policy
// refuses (A41).
TEST(DemoTest, MutualTlsPassesEveryStep) {
  const ToolRun run = RunTool(UXDS_TOOL_PATH, {"demo", "--mtls"}, "", std::chrono::seconds(120));
  ExpectAllStepsPass(run, 8);
  std::string output;
  for (const std::string& line : run.lines) output += line + "\n";
  EXPECT_NE(output.find("[7/8] PASS  server p0-1 refuses clients without a certificate from the "
                        "demo CA: plaintext: UNAVAILABLE; TLS without a certificate: UNAVAILABLE"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("[8/8] PASS  RBAC on the servers refuses "
                        "/grpc.testing.TestService/UnimplementedCall to "
                        "spiffe://uxds-demo/ns/demo/sa/client (the other steps' calls were "
                        "admitted): PERMISSION_DENIED \"Unauthorized RPC rejected\""),
            std::string::npos)
      << output;
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
  // --mtls runs the built-in config only.
  TempDir dir;
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"demo", "--mtls", "--config", dir.path()}).exit_code, 2);
}

using Json = nlohmann::json;
using namespace std::chrono_literals;

// The parent pid and state of process `pid` (from /proc/PID/stat); false
// when there is no such process.
bool ReadStat(pid_t pid, pid_t* parent, char* state) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');  // the name may hold spaces
  if (paren == std::string::npos || paren + 4 >= text.size()) return false;
  *state = text[paren + 2];
  *parent = static_cast<pid_t>(std::stol(text.substr(paren + 4)));
  return true;
}

// Every process below `root` now.
std::set<pid_t> Descendants(pid_t root) {
  std::map<pid_t, pid_t> parents;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t parent = 0;
    char state = 0;
    if (ReadStat(std::stoi(name), &parent, &state)) parents[std::stoi(name)] = parent;
  }
  std::set<pid_t> below = {root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, parent] : parents) {
      if (below.count(parent) && below.insert(pid).second) grew = true;
    }
  }
  below.erase(root);
  return below;
}

// No such process any more, or only its exit status is left.
bool Gone(pid_t pid) {
  pid_t parent = 0;
  char state = 0;
  return !ReadStat(pid, &parent, &state) || state == 'Z' || state == 'X';
}

template <typename Condition>
bool WaitFor(Condition condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// The built-in config in `dir`, its ports (priority 0 first).
std::vector<uint16_t> WriteConfig(const std::string& dir) {
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"demo", "--write-config", dir}).exit_code, 0);
  const Json cla = Json::parse(ReadFile(dir + "/endpoints-demo.json"));
  std::vector<uint16_t> ports;
  for (const Json& locality : cla["endpoints"]) {
    for (const Json& endpoint : locality["lb_endpoints"]) {
      ports.push_back(endpoint["endpoint"]["address"]["socket_address"]["port_value"]);
    }
  }
  return ports;
}

bool IsEmptyDir(const std::string& dir) { return std::filesystem::is_empty(dir); }

// `uxds demo --config DIR` with its stdout in a FIFO the test reads (and
// may close), its temporary directory under a TMPDIR of the test's.
class DemoCleanupTest : public ::testing::Test {
 protected:
  // A config where one server's Listener is missing: step 1 waits for it,
  // with the control plane and every server running.
  void StartWaitingDemo() {
    const std::vector<uint16_t> ports = WriteConfig(config_.path());
    std::filesystem::remove(
        config_.File("listener-server-" + std::to_string(ports.back()) + ".json"));
    fifo_ = tmp_.File("stdout");
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
    fifo_fd_ = open(fifo_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fifo_fd_, 0);
    demo_.emplace(Subprocess::Start({"/bin/sh", "-c", "exec \"$0\" demo --config \"$1\" > \"$2\"",
                                     UXDS_TOOL_PATH, config_.path(), fifo_},
                                    {{"TMPDIR", tmp_.path()}}));
    // The control plane, six servers and the control plane's converter.
    ASSERT_TRUE(WaitFor([&] { return Descendants(demo_->pid()).size() >= 8; }, 30s))
        << ::testing::PrintToString(Descendants(demo_->pid()));
    ASSERT_TRUE(WaitFor([&] { return ReadOutput().find("priority 1:") != std::string::npos; }, 30s))
        << output_;
    children_ = Descendants(demo_->pid());
    ASSERT_FALSE(IsEmptyDir(tmp_.path()));  // the demo's temporary directory and the FIFO
  }

  // What the demo wrote so far.
  const std::string& ReadOutput() {
    char buffer[4096];
    ssize_t n;
    while (fifo_fd_ >= 0 && (n = read(fifo_fd_, buffer, sizeof buffer)) > 0)
      output_.append(buffer, n);
    return output_;
  }

  // The demo exits with `exit_code`, and within 5 s (it promises 1) none of
  // its children is left and its temporary directory is gone.
  void ExpectNothingLeft(int exit_code) {
    EXPECT_EQ(demo_->Wait(10s), exit_code);
    for (const pid_t pid : children_) {
      EXPECT_TRUE(WaitFor([&] { return Gone(pid); }, 5s)) << "pid " << pid << " still runs";
    }
    std::filesystem::remove(fifo_);
    EXPECT_TRUE(IsEmptyDir(tmp_.path()));
  }

  void TearDown() override {
    if (fifo_fd_ >= 0) close(fifo_fd_);
    for (const pid_t pid : children_) kill(pid, SIGKILL);  // after a failure only
  }

  TempDir config_;
  TempDir tmp_;
  std::string fifo_;
  int fifo_fd_ = -1;
  std::string output_;
  std::optional<Subprocess> demo_;
  std::set<pid_t> children_;
};

TEST_F(DemoCleanupTest, SigintStopsEveryChildAndRemovesTheDirectory) {
  StartWaitingDemo();
  demo_->Signal(SIGINT);
  ExpectNothingLeft(128 + SIGINT);
}

TEST_F(DemoCleanupTest, SigtermStopsEveryChildAndRemovesTheDirectory) {
  StartWaitingDemo();
  demo_->Signal(SIGTERM);
  ExpectNothingLeft(128 + SIGTERM);
}

// `uxds demo | head -1`: the reader goes away.
TEST_F(DemoCleanupTest, ClosedStdoutStopsEveryChildAndRemovesTheDirectory) {
  StartWaitingDemo();
  close(fifo_fd_);
  fifo_fd_ = -1;
  ExpectNothingLeft(1);
}

// Its own failure: a server's port is taken. Step 1 fails at once (the
// server says so; before, the demo waited 20 s), and nothing is left.
TEST_F(DemoCleanupTest, APortInUseFailsStepOneAndLeavesNothing) {
  const std::vector<uint16_t> ports = WriteConfig(config_.path());
  const int taken = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(ports.front());
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  Subprocess demo = Subprocess::Start({UXDS_TOOL_PATH, "demo", "--config", config_.path()},
                                      {{"TMPDIR", tmp_.path()}});
  std::string output;
  while (std::optional<std::string> line = demo.ReadLine(60s)) output += *line + "\n";
  EXPECT_EQ(demo.Wait(10s), 1);
  close(taken);
  EXPECT_NE(output.find("[1/6] FAIL"), std::string::npos) << output;
  EXPECT_NE(output.find("in use"), std::string::npos) << output;
  EXPECT_EQ(output.find("after 20 s"), std::string::npos) << output;
  EXPECT_TRUE(IsEmptyDir(tmp_.path()));
  // No process of this demo runs: none names its config or its ports.
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    EXPECT_EQ(cmdline.find(config_.path()), std::string::npos) << entry.path();
    EXPECT_EQ(cmdline.find(tmp_.path()), std::string::npos) << entry.path();
  }
}

// proto3 JSON field names in lowerCamelCase, as the control plane takes
// them (and uint32 values as strings): the demo reads them too.
Json CamelCase(const Json& json) {
  if (json.is_array()) {
    Json out = Json::array();
    for (const Json& element : json) out.push_back(CamelCase(element));
    return out;
  }
  if (!json.is_object()) return json;
  Json out = Json::object();
  for (const auto& [key, value] : json.items()) {
    std::string name;
    for (size_t i = 0; i < key.size(); ++i) {
      if (key[i] == '_' && i + 1 < key.size()) {
        name += static_cast<char>(std::toupper(static_cast<unsigned char>(key[++i])));
      } else {
        name += key[i];
      }
    }
    out[name] = key == "port_value" ? Json(std::to_string(value.get<int>())) : CamelCase(value);
  }
  return out;
}

TEST(DemoTest, CamelCaseConfigPassesEveryStep) {
  TempDir dir;
  WriteConfig(dir.path());
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    WriteFile(entry.path(), CamelCase(Json::parse(ReadFile(entry.path()))).dump());
  }
  EXPECT_NE(ReadFile(dir.File("endpoints-demo.json")).find("lbEndpoints"), std::string::npos);
  ExpectAllStepsPass(
      RunTool(UXDS_TOOL_PATH, {"demo", "--config", dir.path()}, "", std::chrono::seconds(120)));
}

// Lost output is an error: the demo stops at its first step line it cannot
// write, and says so.
TEST(DemoTest, StdoutThatCannotBeWrittenIsAnError) {
  RedirectedRun run = RunToolRedirected(UXDS_TOOL_PATH, {"demo"}, "> /dev/full", "", 120s);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.stderr_text.find("uxds demo: cannot write stdout"), std::string::npos)
      << run.stderr_text;
  EXPECT_EQ(run.stderr_text.find("[2/6]"), std::string::npos) << run.stderr_text;
}

}  // namespace
}  // namespace uxds::testing
