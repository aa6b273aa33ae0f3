// `uxds watch`: the built tool as a child process against the fake control
// plane (tests/peers), with a bootstrap file in a temporary directory.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "envoy/config/endpoint/v3/endpoint.pb.h"
#include "support/fake_control_plane.h"
#include "support/test_support.h"
#include "support/xds_test_resources.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;

constexpr std::chrono::milliseconds kWait = std::chrono::seconds(30);
class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cp_ = FakeControlPlane::Start();
    ASSERT_NE(cp_, nullptr);
  }

  // A bootstrap naming the control plane; returns its path.
  std::string WriteBootstrap(bool fail_on_data_errors = false) {
    json server = {{"server_uri", cp_->target()},
                   {"channel_creds", json::array({{{"type", "insecure"}}})}};
    if (fail_on_data_errors) server["server_features"] = json::array({"fail_on_data_errors"});
    json bootstrap = {{"xds_servers", json::array({server})}, {"node", {{"id", "watch-node"}}}};
    const std::string path = dir_.File("bootstrap.json");
    WriteFile(path, bootstrap.dump());
    return path;
  }

  static Subprocess StartWatch(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {UXDS_TOOL_PATH, "watch"};
    argv.insert(argv.end(), args.begin(), args.end());
    return Subprocess::Start(argv);
  }

  // The next JSON line (nullopt at end of output or after kWait).
  static std::optional<json> NextEvent(Subprocess& watch) {
    std::optional<std::string> line = watch.ReadLine(kWait);
    if (!line) return std::nullopt;
    json parsed = json::parse(*line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << *line;
    EXPECT_TRUE(parsed.contains("t_ms")) << *line;
    return parsed;
  }

  // The next line about `name` (lines about other names are skipped).
  static std::optional<json> NextEventOf(Subprocess& watch, const std::string& name) {
    while (std::optional<json> event = NextEvent(watch)) {
      if (event->value("name", "") == name) return event;
    }
    ADD_FAILURE() << "no more output about " << name;
    return std::nullopt;
  }

  // Runs the tool with stderr merged into stdout; everything it printed and
  // its exit code.
  static std::pair<std::string, int> RunWithStderr(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" watch \"$@\" 2>&1",
                                     UXDS_TOOL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess tool = Subprocess::Start(argv);
    std::string output;
    while (std::optional<std::string> line = tool.ReadLine(kWait)) output += *line + "\n";
    return {output, tool.Wait(kWait)};
  }

  // The resource entry (type_url, name) of a "csds" line, or null.
  static const json* CsdsEntry(const json& csds, const std::string& type_url,
                               const std::string& name) {
    for (const json& entry : csds["resources"]) {
      if (entry["type_url"] == type_url && entry["name"] == name) return &entry;
    }
    return nullptr;
  }

  TempDir dir_;
  std::unique_ptr<FakeControlPlane> cp_;
};

TEST_F(WatchTest, PrintsResourcesAmbientErrorsAndCsdsUntilSigterm) {
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", ValidCluster("c1", "s1")}, {"c2", ValidCluster("c2", "s2")}}, "1"));
  Subprocess watch =
      StartWatch({"--bootstrap", WriteBootstrap(), "--type", "cluster", "c1", "c2", "--csds"});

  std::map<std::string, json> first;
  for (int i = 0; i < 2; ++i) {
    std::optional<json> event = NextEvent(watch);
    ASSERT_TRUE(event.has_value());
    EXPECT_EQ((*event)["type"], "cluster");
    EXPECT_EQ((*event)["event"], "resource") << event->dump();
    EXPECT_EQ((*event)["version"], "1");
    first[(*event)["name"]] = *event;
  }
  ASSERT_EQ(first.count("c1"), 1u);
  ASSERT_EQ(first.count("c2"), 1u);
  // The resource type's JSON summary.
  EXPECT_EQ(first["c1"]["resource"]["type"], "EDS");
  EXPECT_EQ(first["c1"]["resource"]["eds_service_name"], "s1");
  EXPECT_EQ(first["c2"]["resource"]["eds_service_name"], "s2");

  // Version 2 breaks c2: NACKed; without fail_on_data_errors c2 keeps
  // version 1 in use and its watcher hears an ambient error (A88).
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", ValidCluster("c1", "s1")}, {"c2", InvalidCluster("c2")}}, "2"));
  std::optional<json> nack = NextEventOf(watch, "c2");
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ((*nack)["event"], "ambient_error") << nack->dump();
  EXPECT_EQ((*nack)["status"]["code"], "INVALID_ARGUMENT");
  EXPECT_NE((*nack)["status"]["message"].get<std::string>().find("eds_cluster_config"),
            std::string::npos)
      << nack->dump();
  EXPECT_EQ((*nack)["version"], "2");
  EXPECT_FALSE(nack->contains("resource"));

  // Version 3 sends c2 as it was: nothing changes but the error clears.
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"c1", ValidCluster("c1", "s1")}, {"c2", ValidCluster("c2", "s2")}}, "3"));
  std::optional<json> cleared = NextEventOf(watch, "c2");
  ASSERT_TRUE(cleared.has_value());
  EXPECT_EQ((*cleared)["event"], "ambient_error") << cleared->dump();
  EXPECT_EQ((*cleared)["status"]["code"], "OK");
  EXPECT_FALSE((*cleared)["status"].contains("message"));

  watch.Signal(SIGTERM);
  std::optional<json> csds = NextEvent(watch);
  ASSERT_TRUE(csds.has_value());
  EXPECT_EQ((*csds)["event"], "csds") << csds->dump();
  EXPECT_EQ((*csds)["node_id"], "watch-node");
  ASSERT_EQ((*csds)["resources"].size(), 2u) << csds->dump();
  const json* c1 = CsdsEntry(*csds, kCdsType, "c1");
  ASSERT_NE(c1, nullptr);
  EXPECT_EQ((*c1)["client_status"], "ACKED");
  EXPECT_EQ((*c1)["version"], "3");
  EXPECT_FALSE(c1->contains("error"));
  EXPECT_EQ(NextEvent(watch), std::nullopt);
  EXPECT_EQ(watch.Wait(kWait), 0);
}

TEST_F(WatchTest, NackWithFailOnDataErrorsIsAnErrorEvent) {
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c1", ValidCluster("c1", "s1")}}, "1"));
  Subprocess watch = StartWatch({"--bootstrap", WriteBootstrap(/*fail_on_data_errors=*/true),
                                 "--type", "cluster", "c1", "--csds"});
  std::optional<json> event = NextEventOf(watch, "c1");
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ((*event)["event"], "resource");

  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c1", InvalidCluster("c1")}}, "2"));
  std::optional<json> error = NextEventOf(watch, "c1");
  ASSERT_TRUE(error.has_value());
  // A88: with fail_on_data_errors the resource is dropped.
  EXPECT_EQ((*error)["event"], "error") << error->dump();
  EXPECT_EQ((*error)["status"]["code"], "INVALID_ARGUMENT");
  EXPECT_EQ((*error)["version"], "2");

  watch.Signal(SIGINT);
  std::optional<json> csds = NextEvent(watch);
  ASSERT_TRUE(csds.has_value());
  const json* c1 = CsdsEntry(*csds, kCdsType, "c1");
  ASSERT_NE(c1, nullptr) << csds->dump();
  EXPECT_EQ((*c1)["client_status"], "NACKED");
  EXPECT_FALSE(c1->contains("version")) << "the dropped resource has no version";
  EXPECT_EQ((*c1)["error"]["code"], "INVALID_ARGUMENT");
  EXPECT_EQ((*c1)["error"]["version"], "2");
  EXPECT_EQ(watch.Wait(kWait), 0);
}

TEST_F(WatchTest, MissingResourceDoesNotExist) {
  // No EDS answers: the resource timer (shortened by the test hook) fires.
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"e1", Endpoints("e1", "10.0.0.1", 8080)}}, "1"));
  Subprocess watch = StartWatch({"--bootstrap", WriteBootstrap(), "--type", "endpoint", "e1",
                                 "missing", "--resource-timeout-ms", "200", "--csds"});
  // The two names' first events, in whichever order they come.
  std::map<std::string, json> events;
  while (events.size() < 2) {
    std::optional<json> event = NextEvent(watch);
    ASSERT_TRUE(event.has_value()) << "have events for " << events.size() << " names";
    events.emplace((*event)["name"], *event);
  }
  const json& e1 = events["e1"];
  EXPECT_EQ(e1["type"], "endpoint");
  EXPECT_EQ(e1["event"], "resource") << e1.dump();
  EXPECT_NE(e1["resource"].dump().find("10.0.0.1"), std::string::npos) << e1.dump();

  const json& missing = events["missing"];
  EXPECT_EQ(missing["event"], "error") << missing.dump();
  EXPECT_EQ(missing["status"]["code"], "NOT_FOUND");
  EXPECT_FALSE(missing.contains("version"));

  watch.Signal(SIGTERM);
  std::optional<json> csds = NextEvent(watch);
  ASSERT_TRUE(csds.has_value());
  const json* entry = CsdsEntry(*csds, kEdsType, "missing");
  ASSERT_NE(entry, nullptr) << csds->dump();
  EXPECT_EQ((*entry)["client_status"], "DOES_NOT_EXIST");
  EXPECT_EQ((*entry)["error"]["code"], "NOT_FOUND");
  const json* found = CsdsEntry(*csds, kEdsType, "e1");
  ASSERT_NE(found, nullptr) << csds->dump();
  EXPECT_EQ((*found)["client_status"], "ACKED");
  EXPECT_EQ((*found)["version"], "1");
  EXPECT_EQ(watch.Wait(kWait), 0);
}

TEST_F(WatchTest, ForStopsWithExitZeroAndDumpsEveryWatchedName) {
  ASSERT_TRUE(cp_->IgnoreRequests(true));
  Subprocess watch = StartWatch(
      {"--bootstrap", WriteBootstrap(), "--type", "route", "r1", "r2", "--for", "0.5", "--csds"});
  // Nothing is answered: the only line is the dump, both names REQUESTED.
  std::optional<json> csds = NextEvent(watch);
  ASSERT_TRUE(csds.has_value());
  EXPECT_EQ((*csds)["event"], "csds") << csds->dump();
  const std::string route_type = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
  for (const char* name : {"r1", "r2"}) {
    const json* entry = CsdsEntry(*csds, route_type, name);
    ASSERT_NE(entry, nullptr) << csds->dump();
    EXPECT_EQ((*entry)["client_status"], "REQUESTED");
  }
  EXPECT_EQ(NextEvent(watch), std::nullopt);
  EXPECT_EQ(watch.Wait(kWait), 0);
}

TEST_F(WatchTest, ForWithoutCsdsPrintsNothingExtra) {
  Subprocess watch =
      StartWatch({"--bootstrap", WriteBootstrap(), "--type", "listener", "l1", "--for", "0.2"});
  EXPECT_EQ(watch.Wait(kWait), 0);
  for (const std::string& line : watch.lines()) {
    EXPECT_EQ(line.find("\"csds\""), std::string::npos) << line;
  }
}

// An xdstp:// name typed with its context parameters out of order is the
// same resource (A47 normalizes it): its lines carry the version too.
TEST_F(WatchTest, AnXdstpNameInAnyParameterOrderGetsItsVersion) {
  const std::string normalized = "xdstp://auth.test/envoy.config.cluster.v3.Cluster/c1?a=1&b=2";
  const std::string typed = "xdstp://auth.test/envoy.config.cluster.v3.Cluster/c1?b=2&a=1";
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{normalized, ValidCluster(normalized, "s1")}}, "7"));
  json server = {{"server_uri", cp_->target()},
                 {"channel_creds", json::array({{{"type", "insecure"}}})}};
  json bootstrap = {{"xds_servers", json::array({server})},
                    {"node", {{"id", "watch-node"}}},
                    {"authorities", {{"auth.test", json::object()}}}};
  const std::string path = dir_.File("xdstp-bootstrap.json");
  WriteFile(path, bootstrap.dump());
  Subprocess watch = StartWatch({"--bootstrap", path, "--type", "cluster", typed});
  std::optional<json> event = NextEvent(watch);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ((*event)["event"], "resource") << event->dump();
  EXPECT_EQ((*event)["name"], typed);
  EXPECT_EQ((*event)["version"], "7") << event->dump();
}

// A71: a bootstrap with two servers whose first cannot be reached: the
// resource comes from the second, and the line and the CSDS dump say so.
TEST_F(WatchTest, AResourceFromAFallbackServerNamesThatServer) {
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c1", ValidCluster("c1", "s1")}}, "1"));
  json unreachable = {{"server_uri", "xds.example.invalid:443"},
                      {"channel_creds", json::array({{{"type", "insecure"}}})}};
  json fallback = {{"server_uri", cp_->target()},
                   {"channel_creds", json::array({{{"type", "insecure"}}})}};
  json bootstrap = {{"xds_servers", json::array({unreachable, fallback})},
                    {"node", {{"id", "watch-node"}}}};
  const std::string path = dir_.File("two-server-bootstrap.json");
  WriteFile(path, bootstrap.dump());
  Subprocess watch = StartWatch({"--bootstrap", path, "--type", "cluster", "c1", "--csds"});
  std::optional<json> event = NextEvent(watch);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ((*event)["event"], "resource") << event->dump();
  EXPECT_EQ((*event)["server"], cp_->target()) << event->dump();
  watch.Signal(SIGTERM);
  std::optional<json> csds = NextEvent(watch);
  ASSERT_TRUE(csds.has_value());
  const json* c1 = CsdsEntry(*csds, kCdsType, "c1");
  ASSERT_NE(c1, nullptr) << csds->dump();
  EXPECT_EQ((*c1)["server"], cp_->target()) << csds->dump();
  EXPECT_EQ(watch.Wait(kWait), 0);
}

// `uxds watch | head -1`: once the reader is gone the tool says so and exits
// 1 at once, instead of waiting for the next event to die of SIGPIPE.
TEST_F(WatchTest, AStdoutNobodyReadsEndsTheWatchWithExitOne) {
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c1", ValidCluster("c1", "s1")}}, "1"));
  const std::string errors = dir_.File("stderr.txt");
  // --for far longer than the test waits: only the closed pipe can end it.
  Subprocess shell = Subprocess::Start(
      {"/bin/bash", "-c",
       "\"$0\" watch --bootstrap \"$1\" --type cluster c1 --for 3600 2>\"$2\" | head -n 1; "
       "echo \"exit ${PIPESTATUS[0]}\"",
       UXDS_TOOL_PATH, WriteBootstrap(), errors});
  std::optional<json> first = NextEvent(shell);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ((*first)["event"], "resource");
  EXPECT_EQ(shell.ReadLine(kWait), "exit 1");
  EXPECT_EQ(shell.Wait(kWait), 0);
  EXPECT_NE(ReadFile(errors).find("uxds watch: stdout was closed"), std::string::npos)
      << ReadFile(errors);
}

// A write error on stdout is an error (exit 1 with the reason), not a quiet
// exit 0.
TEST_F(WatchTest, AStdoutThatFailsEndsTheWatchWithExitOne) {
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c1", ValidCluster("c1", "s1")}}, "1"));
  Subprocess tool = Subprocess::Start(
      {"/bin/sh", "-c",
       "exec \"$0\" watch --bootstrap \"$1\" --type cluster c1 --for 3600 2>&1 >/dev/full",
       UXDS_TOOL_PATH, WriteBootstrap()});
  EXPECT_EQ(tool.ReadLine(kWait), "uxds watch: cannot write to stdout: No space left on device");
  EXPECT_EQ(tool.Wait(kWait), 1);
}

// A watch of more names than the control plane takes (uxds control-plane
// ends such a stream, RESOURCE_EXHAUSTED): the client retries, and every
// retry fails each watch alike. One error line per name, not one per name
// per retry (30 000 lines by the fourth stream).
TEST_F(WatchTest, AStreamTheServerKeepsEndingGivesOneErrorLinePerName) {
  TempDir resources;
  Subprocess cp = Subprocess::Start(
      {UXDS_TOOL_PATH, "control-plane", "--dir", resources.path(), "--listen", "127.0.0.1:0"});
  std::optional<std::string> listening = cp.ReadLine(kWait);
  ASSERT_TRUE(listening.has_value());
  const std::string address = json::parse(*listening)["address"];
  json server = {{"server_uri", address}, {"channel_creds", json::array({{{"type", "insecure"}}})}};
  WriteFile(dir_.File("many.json"),
            json({{"xds_servers", json::array({server})}, {"node", {{"id", "n"}}}}).dump());
  std::vector<std::string> args = {"--bootstrap", dir_.File("many.json"), "--type", "listener"};
  constexpr int kNames = 10001;
  for (int i = 0; i < kNames; ++i) args.push_back("n" + std::to_string(i));
  Subprocess watch = StartWatch(args);
  // Four streams: the first three failures have reached the watchers by
  // the time the client asks again.
  int requests = 0;
  int ended = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (requests < 4 && std::chrono::steady_clock::now() < deadline) {
    while (std::optional<std::string> line = cp.ReadLine(std::chrono::milliseconds(0))) {
      const json event = json::parse(*line, nullptr, false);
      requests += event.value("event", "") == "request";
      ended += event.value("event", "") == "stream_ended";
    }
    cp.ClearLines();
    watch.ReadLine(std::chrono::milliseconds(10));  // its pipe must not fill
  }
  ASSERT_EQ(requests, 4);
  EXPECT_GE(ended, 3);
  watch.Signal(SIGTERM);
  while (watch.ReadLine(kWait)) {
  }
  EXPECT_EQ(watch.Wait(kWait), 0);
  std::map<std::string, int> errors_per_name;
  for (const std::string& line : watch.lines()) {
    const json event = json::parse(line);
    ASSERT_EQ(event["event"], "error") << line;
    EXPECT_EQ(event["status"]["code"], "UNAVAILABLE") << line;
    ++errors_per_name[event["name"]];
  }
  EXPECT_EQ(errors_per_name.size(), static_cast<size_t>(kNames));
  EXPECT_EQ(watch.lines().size(), static_cast<size_t>(kNames));
}

TEST_F(WatchTest, UsageErrorsExitTwo) {
  const std::string bootstrap = WriteBootstrap();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "--type is required"},
      {{"--bootstrap", bootstrap, "--type", "cluster"}, "NAME is required"},
      {{"--bootstrap", bootstrap, "--type", "secret", "s"},
       "--type: secret not in {listener,route,cluster,endpoint}"},
      {{"--bootstrap", bootstrap, "--type"}, "--type: 1 required"},
      {{"--bootstrap", "", "--type", "cluster", "c1"}, "--bootstrap: must be a file name"},
      {{"--bootstrap", bootstrap, "--type", "cluster", "c1", "--for", "0"}, "--for: Value 0 "},
      {{"--bootstrap", bootstrap, "--type", "cluster", "c1", "--for", "soon"},
       "--for: Value soon "},
      {{"--bootstrap", bootstrap, "--type", "cluster", "c1", "--verbose"},
       "not expected: --verbose"},
  };
  for (const auto& [args, problem] : cases) {
    auto [output, exit_code] = RunWithStderr(args);
    EXPECT_EQ(exit_code, 2) << output;
    EXPECT_NE(output.find(problem), std::string::npos) << output;
    EXPECT_NE(output.find("run `uxds watch --help` for usage"), std::string::npos) << output;
  }
  auto [help, help_exit] = RunWithStderr({"--help"});
  EXPECT_EQ(help_exit, 0);
  EXPECT_NE(help.find("Usage: uxds watch"), std::string::npos) << help;
}

// `uxds help`: one column of summaries; `uxds help watch` is watch's usage.
TEST(ToolHelpTest, CommandTableIsAlignedAndHelpNamesACommand) {
  auto run = [](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {UXDS_TOOL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess tool = Subprocess::Start(argv);
    std::vector<std::string> lines;
    while (std::optional<std::string> line = tool.ReadLine(std::chrono::seconds(20))) {
      lines.push_back(*line);
    }
    EXPECT_EQ(tool.Wait(std::chrono::seconds(20)), 0);
    return lines;
  };
  std::set<size_t> summary_columns;
  size_t commands = 0;
  for (const std::string& line : run({"help"})) {
    if (!line.starts_with("  ")) continue;
    ++commands;
    const size_t name_end = line.find(' ', 2);
    summary_columns.insert(line.find_first_not_of(' ', name_end));
  }
  EXPECT_GE(commands, 4u);
  EXPECT_EQ(summary_columns.size(), 1u);
  const std::vector<std::string> watch_help = run({"help", "watch"});
  ASSERT_GE(watch_help.size(), 2u);
  EXPECT_TRUE(watch_help[1].starts_with("Usage: uxds watch")) << watch_help[1];
}

TEST_F(WatchTest, BadBootstrapExitsOneNamingTheProblem) {
  const std::string no_servers = dir_.File("no_servers.json");
  WriteFile(no_servers, R"({"xds_servers": [], "node": {"id": "n"}})");
  auto [output, exit_code] = RunWithStderr({"--bootstrap", no_servers, "--type", "cluster", "c1"});
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_NE(output.find("xds_servers"), std::string::npos) << output;
  EXPECT_EQ(output.find("--help"), std::string::npos) << output;

  const std::string not_json = dir_.File("not_json.json");
  WriteFile(not_json, "{ this is not JSON");
  std::tie(output, exit_code) = RunWithStderr({"--bootstrap", not_json, "--type", "cluster", "c1"});
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_NE(output.find(not_json), std::string::npos) << output;

  const std::string absent = dir_.File("absent.json");
  std::tie(output, exit_code) = RunWithStderr({"--bootstrap", absent, "--type", "cluster", "c1"});
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_NE(output.find(absent), std::string::npos) << output;
}

}  // namespace
}  // namespace uxds::testing
