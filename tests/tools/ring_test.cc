// `uxds ring`: the built tool as a child process, fed JSON lines from a file
// or stdin; picks checked against hashes computed outside uxds and against
// the library's ring, errors against their exact messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/test_support.h"
#include "tool_run.h"
#include "uxds/ring_hash.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;

constexpr std::chrono::milliseconds kWait = std::chrono::seconds(60);

ToolRun RunTool(const std::vector<std::string>& args, const std::string& stdin_file = "") {
  return uxds::testing::RunTool(UXDS_TOOL_PATH, args, stdin_file, kWait);
}

class RingToolTest : public JsonLinesToolTest {
 protected:
  RingToolTest() : JsonLinesToolTest(UXDS_TOOL_PATH) {}
  std::vector<json> RunRing(const std::vector<std::string>& lines) {
    return RunLines("ring", lines);
  }
};

const char kFourEndpoints[] = R"("endpoints":[{"address":"10.0.0.1:80"},{"address":"10.0.0.2:80"},)"
                              R"({"address":"10.0.0.3:80"},{"address":"10.0.0.4:80"}])";

TEST_F(RingToolTest, PicksMatchHashesComputedElsewhere) {
  // NOTES.md's example ring (4 endpoints, ring 6). Its entries, from a
  // separate XXH64: 0x18341d927ea10691 (.1), 0x69762f35727caa16 (.4),
  // 0x7079d8e1823e007f (.2), 0x74da18db9f57cc7e (.3), 0x75041381e7371a08
  // (.1), 0x98663d8c8e38e677 (.3).
  std::vector<json> out = RunRing({
      std::string("{") + kFourEndpoints +
          R"(,"min_ring_size":6,"max_ring_size":6,"hashes":["0",)"
          R"("1744051470726137489","1744051470726137490","8104747467494260863",)"
          R"("10981532415280342648","18446744073709551615"]})",
      // The same ring through the local cap instead of the sizes.
      std::string("{") + kFourEndpoints + R"(,"ring_size_cap":6,"hashes":["0"]})",
  });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], json::parse(R"({"ring_size":6,"picks":["10.0.0.1:80","10.0.0.1:80",)"
                                R"("10.0.0.4:80","10.0.0.2:80","10.0.0.1:80","10.0.0.1:80"]})"))
      << out[0].dump();
  EXPECT_EQ(out[1], json::parse(R"({"ring_size":6,"picks":["10.0.0.1:80"]})")) << out[1].dump();
}

TEST_F(RingToolTest, PicksMatchTheLibraryRing) {
  // 50 weighted endpoints, default sizes and cap, 200 random hashes.
  std::mt19937_64 random(7);
  std::vector<RingHashAddress> addresses;
  json endpoints = json::array();
  for (int i = 0; i < 50; ++i) {
    RingHashAddress a{"10.1.0." + std::to_string(i) + ":443", "", 1 + random() % 9};
    endpoints.push_back({{"address", a.address}, {"weight", a.weight}});
    addresses.push_back(a);
  }
  std::vector<uint64_t> hashes;
  json hash_texts = json::array();
  for (int i = 0; i < 200; ++i) {
    hashes.push_back(random());
    hash_texts.push_back(std::to_string(hashes.back()));
  }
  std::vector<json> out = RunRing({json{{"endpoints", endpoints}, {"hashes", hash_texts}}.dump()});
  ASSERT_EQ(out.size(), 1u);
  std::vector<size_t> kept;
  const Ring ring = Ring::Build(BuildRingEndpoints(addresses, &kept), RingSizeConfig{});
  EXPECT_EQ(out[0]["ring_size"], ring.size());
  ASSERT_EQ(out[0]["picks"].size(), hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) {
    EXPECT_EQ(out[0]["picks"][i],
              addresses[kept[ring[ring.FindIndexByBinarySearch(hashes[i])].endpoint]].address)
        << i;
  }
}

TEST_F(RingToolTest, DuplicatesHashKeysAddressFormsAndSizes) {
  std::vector<json> out = RunRing({
      // 10.0.0.1 listed twice (1 + 2) is one endpoint of weight 3 ...
      R"({"endpoints":[{"address":"10.0.0.1:80"},{"address":"10.0.0.2:80","weight":2},)"
      R"({"address":"10.0.0.1:80","weight":2}],"hashes":["1","2","3","4","5"]})",
      // ... so the ring and every pick are the same as here.
      R"({"endpoints":[{"address":"10.0.0.1:80","weight":3},)"
      R"({"address":"10.0.0.2:80","weight":2}],"hashes":["1","2","3","4","5"]})",
      // A76: "node-a" is hashed for 10.0.0.9; XXH64("node-a_0") is
      // 0x99922d8c4778179f (computed elsewhere) and picks it.
      R"({"endpoints":[{"address":"10.0.0.9:80","hash_key":"node-a"},{"address":"10.0.0.2:80"}],)"
      R"("hashes":["11065957314920454047"]})",
      // IPv6 in its canonical form, as the policy hashes it.
      R"({"endpoints":[{"address":"[2001:db8:0:0::1]:443"}],"hashes":["5"]})",
      // NOTES.md: 1024/4096 can give 4097 entries (7 endpoints of weight 1,
      // 7 of weight 1000).
      R"({"endpoints":[{"address":"10.0.0.1:1"},{"address":"10.0.0.2:1"},{"address":"10.0.0.3:1"},)"
      R"({"address":"10.0.0.4:1"},{"address":"10.0.0.5:1"},{"address":"10.0.0.6:1"},)"
      R"({"address":"10.0.0.7:1"},{"address":"10.0.1.1:1","weight":1000},)"
      R"({"address":"10.0.1.2:1","weight":1000},{"address":"10.0.1.3:1","weight":1000},)"
      R"({"address":"10.0.1.4:1","weight":1000},{"address":"10.0.1.5:1","weight":1000},)"
      R"({"address":"10.0.1.6:1","weight":1000},{"address":"10.0.1.7:1","weight":1000}],)"
      R"("min_ring_size":1024,"max_ring_size":4096})",
      // The cap raised: 3 endpoints and min 8192 -> 8193 entries would be
      // capped at 4096 by default.
      R"({"endpoints":[{"address":"10.0.0.1:80"},{"address":"10.0.0.2:80"},)"
      R"({"address":"10.0.0.3:80"}],"min_ring_size":8192,"ring_size_cap":8388608})",
  });
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0], out[1]) << out[0].dump() << " vs " << out[1].dump();
  // Weights 3 and 2: ceil(0.4 x 1024) / 0.4 = 1025 entries.
  EXPECT_EQ(out[0]["ring_size"], 1025) << out[0].dump();
  EXPECT_EQ(out[2], json::parse(R"({"ring_size":1024,"picks":["10.0.0.9:80"]})")) << out[2].dump();
  EXPECT_EQ(out[3], json::parse(R"({"ring_size":1024,"picks":["[2001:db8::1]:443"]})"))
      << out[3].dump();
  EXPECT_EQ(out[4], json::parse(R"({"ring_size":4097,"picks":[]})")) << out[4].dump();
  EXPECT_EQ(out[5]["ring_size"], 8193) << out[5].dump();
}

TEST_F(RingToolTest, BadLinesPrintTheirErrorAndTheToolGoesOn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "invalid JSON"},
      {"[1]", "not a JSON object"},
      {"{}", "endpoints: field not present"},
      {R"({"endpoints":[]})", "endpoints: must be a non-empty array"},
      {R"({"endpoints":{}})", "endpoints: must be a non-empty array"},
      {R"({"endpoints":[{"weight":2}]})", "endpoints[0]: address: field not present"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"},{"address":"10.0.0.1"}]})",
       "endpoints[1]: address \"10.0.0.1\": missing port"},
      {R"({"endpoints":[{"address":"10.0.0.1:99999"}]})",
       "endpoints[0]: address \"10.0.0.1:99999\": bad port"},
      {R"({"endpoints":[{"address":7}]})", "endpoints[0]: address: must be a string"},
      {R"({"endpoints":[{"address":"10.0.0.1:80","weight":0}]})",
       "endpoints[0]: weight: must be an integer in the range of 1 to 4294967295"},
      {R"({"endpoints":[{"address":"10.0.0.1:80","weight":4294967296}]})",
       "endpoints[0]: weight: must be an integer in the range of 1 to 4294967295"},
      {R"({"endpoints":[{"address":"10.0.0.1:80","weight":-1}]})",
       "endpoints[0]: weight: must be an integer in the range of 1 to 4294967295"},
      {R"({"endpoints":[{"address":"10.0.0.1:80","weight":1.5}]})",
       "endpoints[0]: weight: must be an integer in the range of 1 to 4294967295"},
      {R"({"endpoints":[{"address":"10.0.0.1:80","port":80}]})",
       "endpoints[0]: unknown field \"port\""},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":[5]})",
       "hashes[0]: must be a decimal uint64 string"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":["1","-1"]})",
       "hashes[1]: must be a decimal uint64 string"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":["18446744073709551616"]})",
       "hashes[0]: must be a decimal uint64 string"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":["0x10"]})",
       "hashes[0]: must be a decimal uint64 string"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":[""]})",
       "hashes[0]: must be a decimal uint64 string"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":"1"})", "hashes: must be an array"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"max_ring_size":8388609})",
       "max_ring_size: must be in the range of 1 to 8388608"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"min_ring_size":0})",
       "min_ring_size: must be in the range of 1 to 8388608"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"min_ring_size":2000,"max_ring_size":1000})",
       "min_ring_size: cannot be greater than max_ring_size"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"ring_size_cap":0})",
       "ring_size_cap: must be in the range of 1 to 8388608"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"min_ring_size":"12"})",
       "min_ring_size: must be a non-negative integer"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"max_ring_size":-4})",
       "max_ring_size: must be a non-negative integer"},
      {R"({"endpoints":[{"address":"10.0.0.1:80"}],"ring_size":4})", "unknown field \"ring_size\""},
  };
  std::vector<std::string> lines;
  for (const auto& [line, error] : cases) lines.push_back(line);
  // A good line after the bad ones is still answered.
  lines.push_back(R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":["9"]})");
  std::vector<json> out = RunRing(lines);
  ASSERT_EQ(out.size(), cases.size() + 1);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(out[i], json({{"error", cases[i].second}})) << cases[i].first;
  }
  EXPECT_EQ(out.back(), json::parse(R"({"ring_size":1024,"picks":["10.0.0.1:80"]})"));
}

TEST_F(RingToolTest, ReadsStdinSkipsBlankLinesAndHasHelp) {
  const std::string input =
      WriteInput({R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":["1"]})", "", "  ", "{"});
  ToolRun run = RunTool({"ring"}, input);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.lines, (std::vector<std::string>{R"({"ring_size":1024,"picks":["10.0.0.1:80"]})",
                                                 R"({"error":"invalid JSON"})"}));
  ToolRun help = RunTool({"help", "ring"});
  EXPECT_EQ(help.exit_code, 0);
  ASSERT_GE(help.lines.size(), 2u);
  EXPECT_EQ(help.lines[1], "Usage: uxds ring [OPTIONS] [FILE]");
  ToolRun missing = RunTool({"ring", dir_.File("does-not-exist")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(missing.lines.empty());
  EXPECT_EQ(RunTool({"ring", input, input}).exit_code, 2);
  EXPECT_EQ(RunTool({"ring", "--bogus"}).exit_code, 2);
}

// Output that cannot be written is an error (exit 1, one line saying so),
// into a full device and into a closed stdout alike.
TEST_F(RingToolTest, StdoutThatCannotBeWrittenIsAnError) {
  const std::string input =
      WriteInput({R"({"endpoints":[{"address":"10.0.0.1:80"}],"hashes":["1"]})"});
  for (const std::string redirect : {"> /dev/full", ">&-"}) {
    RedirectedRun run = RunToolRedirected(UXDS_TOOL_PATH, {"ring"}, redirect, input);
    EXPECT_EQ(run.exit_code, 1) << redirect;
    EXPECT_EQ(LinesOf(run.stderr_text).size(), 1u) << redirect << ": " << run.stderr_text;
    EXPECT_NE(run.stderr_text.find("uxds ring: cannot write stdout"), std::string::npos)
        << redirect << ": " << run.stderr_text;
  }
}

}  // namespace
}  // namespace uxds::testing
