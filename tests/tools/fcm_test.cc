// `uxds fcm`: the built tool as a child process, fed proto3 JSON Listeners;
// selections checked against A36's rules, NACKs against the decoder's exact
// messages, bad lines against their errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tool_run.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;

// A filter chain in proto3 JSON: its HttpConnectionManager takes routes
// from RDS; `match` is its filter_chain_match (absent when null).
json Chain(const std::string& name, const json& match = nullptr) {
  json hcm = {
      {"@type",
       "type.googleapis.com/"
       "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"},
      {"rds", {{"configSource", {{"ads", json::object()}}}, {"routeConfigName", "routes"}}},
      {"httpFilters",
       {{{"name", "router"},
         {"typedConfig",
          {{"@type", "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}}}}}};
  json chain = {{"name", name}, {"filters", {{{"name", "hcm"}, {"typedConfig", hcm}}}}};
  if (!match.is_null()) chain["filterChainMatch"] = match;
  return chain;
}

// (A vector, not a json: a one-element braced list would not be an array.)
json Listener(const std::vector<json>& chains, bool with_default) {
  json listener = {{"name", "grpc/server?xds.resource.listening_address=[::]:8080"},
                   {"address", {{"socketAddress", {{"address", "::"}, {"portValue", 8080}}}}},
                   {"filterChains", chains}};
  if (with_default) listener["defaultFilterChain"] = Chain("the-default-chain");
  return listener;
}

json Connection(const std::string& dest_ip, const std::string& source_ip, int source_port) {
  return {{"dest_ip", dest_ip},
          {"dest_port", 8080},
          {"source_ip", source_ip},
          {"source_port", source_port}};
}

json Prefix(const std::string& address, int len) {
  return {{"addressPrefix", address}, {"prefixLen", len}};
}

class FcmToolTest : public JsonLinesToolTest {
 protected:
  FcmToolTest() : JsonLinesToolTest(UXDS_TOOL_PATH) {}
  std::vector<json> RunFcm(const std::vector<std::string>& lines) { return RunLines("fcm", lines); }
};

// The chains issue #8 names: by destination IP (127.0.0.1 vs ::1 vs
// 127.0.0.2), by source port and by source type; the default chain; close.
TEST_F(FcmToolTest, SelectsByEveryLevel) {
  const std::vector<json> chains = {
      Chain("v4-loopback", {{"prefixRanges", {Prefix("127.0.0.1", 32)}}}),
      Chain("v6-loopback", {{"prefixRanges", {Prefix("::1", 128)}}}),
      Chain("second-ip", {{"prefixRanges", {Prefix("127.0.0.2", 32)}}, {"sourcePorts", {40001}}}),
      Chain("local",
            {{"prefixRanges", {Prefix("10.0.0.0", 8)}}, {"sourceType", "SAME_IP_OR_LOOPBACK"}}),
      Chain("external", {{"prefixRanges", {Prefix("10.0.0.0", 8)}}, {"sourceType", "EXTERNAL"}}),
  };
  const json request = {
      {"listener", Listener(chains, false)},
      {"connections",
       {Connection("127.0.0.1", "127.0.0.1", 40000), Connection("::1", "::1", 40000),
        Connection("::ffff:127.0.0.1", "::ffff:127.0.0.1", 40000),
        Connection("127.0.0.2", "127.0.0.1", 40001), Connection("127.0.0.2", "127.0.0.1", 40000),
        Connection("10.1.2.3", "10.1.2.3", 5), Connection("10.1.2.3", "192.0.2.1", 5),
        Connection("192.0.2.9", "192.0.2.1", 5)}}};
  std::vector<json> out = RunFcm({request.dump()});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], json::parse(R"({"accepted":true,"selections":["v4-loopback","v6-loopback",)"
                                R"("v4-loopback","second-ip",null,"local","external",null]})"))
      << out[0].dump();
}

TEST_F(FcmToolTest, DefaultChainAndAnyAddress) {
  const json with_default = {
      {"listener", Listener({Chain("ten", {{"prefixRanges", {Prefix("10.0.0.0", 8)}}})}, true)},
      {"connections",
       {Connection("10.0.0.1", "10.0.0.2", 1), Connection("11.0.0.1", "10.0.0.2", 1)}}};
  // A chain without filter_chain_match takes every connection.
  const json catch_all = {{"listener", Listener({Chain("all")}, true)},
                          {"connections", {Connection("2001:db8::1", "2001:db8::2", 1)}}};
  // A Listener as a DiscoveryResponse carries it, with the Any's @type.
  json typed = {{"listener", Listener({Chain("all")}, false)}, {"connections", json::array()}};
  typed["listener"]["@type"] = "type.googleapis.com/envoy.config.listener.v3.Listener";
  std::vector<json> out = RunFcm({with_default.dump(), catch_all.dump(), typed.dump()});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], json::parse(R"({"accepted":true,"selections":["ten","default"]})"));
  EXPECT_EQ(out[1], json::parse(R"({"accepted":true,"selections":["all"]})"));
  EXPECT_EQ(out[2], json::parse(R"({"accepted":true,"selections":[]})"));
}

// A36: matchers are compared after normalization; a duplicate is a NACK,
// given with the decoder's message.
TEST_F(FcmToolTest, NackedListenerGivesTheNackMessage) {
  const json duplicate = {
      {"listener", Listener({Chain("a", {{"prefixRanges", {Prefix("10.1.2.3", 8)}}}),
                             Chain("b", {{"prefixRanges", {Prefix("10.0.0.0", 8)}}})},
                            false)},
      {"connections", {Connection("10.0.0.1", "10.0.0.2", 1)}}};
  const json no_chains = {{"listener", Listener({}, false)}};
  std::vector<json> out = RunFcm({duplicate.dump(), no_chains.dump()});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["accepted"], false);
  EXPECT_EQ(out[0]["error"],
            "errors validating server Listener: [field:filter_chains[1].filter_chain_match "
            "error:duplicate matching rules detected when adding filter chain: "
            "{prefix_ranges={10.0.0.0/8}}]")
      << out[0].dump();
  EXPECT_EQ(out[1]["accepted"], false);
  EXPECT_EQ(out[1]["error"],
            "errors validating server Listener: [field:default_filter_chain "
            "error:must be set if filter_chains is unset]")
      << out[1].dump();
}

TEST_F(FcmToolTest, BadLinesGetAnErrorAndTheRestGoesOn) {
  const json good = {{"listener", Listener({Chain("all")}, false)},
                     {"connections", {Connection("127.0.0.1", "127.0.0.1", 1)}}};
  json bad_field = good;
  bad_field["listener"]["bogusField"] = 1;
  json bad_ip = good;
  bad_ip["connections"][0]["source_ip"] = "localhost";
  json bad_port = good;
  bad_port["connections"][0]["source_port"] = 65536;
  json no_port = good;
  no_port["connections"][0].erase("source_port");
  json client = {{"listener", {{"name", "c"}, {"apiListener", json::object()}}}};
  std::vector<json> out =
      RunFcm({"{not json", R"({"connections":[]})", bad_field.dump(), bad_ip.dump(),
              bad_port.dump(), no_port.dump(), client.dump(), good.dump()});
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(out[0], json::parse(R"({"error":"invalid JSON"})"));
  EXPECT_EQ(out[1], json::parse(R"({"error":"listener: field not present"})"));
  EXPECT_NE(out[2]["error"].get<std::string>().find("not a Listener in proto3 JSON"),
            std::string::npos)
      << out[2].dump();
  EXPECT_NE(out[2]["error"].get<std::string>().find("bogusField"), std::string::npos);
  EXPECT_EQ(out[3]["error"],
            "connections[0]: source_ip: \"localhost\" is not an IPv4 or IPv6 address")
      << out[3].dump();
  EXPECT_EQ(out[4]["error"], "connections[0]: source_port: must be an integer from 0 to 65535");
  EXPECT_EQ(out[5]["error"], "connections[0]: source_port: field not present");
  EXPECT_TRUE(out[6].contains("error")) << out[6].dump();
  EXPECT_EQ(out[7], json::parse(R"({"accepted":true,"selections":["all"]})"));
}

TEST_F(FcmToolTest, ReadsStdinAndDescribesItself) {
  const json good = {{"listener", Listener({Chain("all")}, false)},
                     {"connections", {Connection("127.0.0.1", "127.0.0.1", 1)}}};
  ToolRun run = RunTool(UXDS_TOOL_PATH, {"fcm"}, WriteInput({"", good.dump()}));
  EXPECT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.lines.size(), 1u);
  EXPECT_EQ(json::parse(run.lines[0]), json::parse(R"({"accepted":true,"selections":["all"]})"));

  ToolRun help = RunTool(UXDS_TOOL_PATH, {"help"});
  bool listed = false;
  for (const std::string& line : help.lines) listed |= line.rfind("  fcm ", 0) == 0;
  EXPECT_TRUE(listed);
  ToolRun usage = RunTool(UXDS_TOOL_PATH, {"help", "fcm"});
  ASSERT_GE(usage.lines.size(), 2u);
  EXPECT_EQ(usage.lines[1], "Usage: uxds fcm [OPTIONS] [FILE]");
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"fcm", "--bogus"}).exit_code, 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"fcm", dir_.File("does-not-exist")}).exit_code, 1);
}

// Output that cannot be written is an error (exit 1, one line saying so).
TEST_F(FcmToolTest, StdoutThatCannotBeWrittenIsAnError) {
  const json good = {{"listener", Listener({Chain("all")}, false)},
                     {"connections", {Connection("127.0.0.1", "127.0.0.1", 1)}}};
  const std::string input = WriteInput({good.dump()});
  for (const std::string redirect : {"> /dev/full", ">&-"}) {
    RedirectedRun run = RunToolRedirected(UXDS_TOOL_PATH, {"fcm"}, redirect, input);
    EXPECT_EQ(run.exit_code, 1) << redirect;
    EXPECT_NE(run.stderr_text.find("uxds fcm: cannot write stdout"), std::string::npos)
        << redirect << ": " << run.stderr_text;
  }
}

}  // namespace
}  // namespace uxds::testing
