// uxds-json-to-proto, the converter the uxds tool runs for proto3 JSON: the
// built program driven over its framed stdin/stdout protocol, with the
// descriptor set of uxds's protos.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "common/subprocess.h"
#include "envoy/config/cluster/v3/cluster.pb.h"

#ifndef UXDS_JSON_TO_PROTO_PATH
#error "UXDS_JSON_TO_PROTO_PATH and UXDS_DESCRIPTORS_PATH (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

constexpr auto kWait = std::chrono::seconds(60);
constexpr char kTypes[] = "envoy.config.cluster.v3.Cluster,envoy.config.listener.v3.Listener";

std::string FromHex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

class JsonToProtoTest : public ::testing::Test {
 protected:
  JsonToProtoTest()
      : converter_(Subprocess::Start({UXDS_JSON_TO_PROTO_PATH, UXDS_DESCRIPTORS_PATH}, {},
                                     /*pipe_stdin=*/true)) {}

  // One request; the reply line ("" if none came).
  std::string Convert(const std::string& types, const std::string& text) {
    EXPECT_TRUE(converter_.WriteLine(types + " " + std::to_string(text.size()) + "\n" + text));
    return converter_.ReadLine(kWait).value_or("");
  }

  Subprocess converter_;
};

TEST_F(JsonToProtoTest, AnyWithTypeBecomesTheMessageWithItsNameAndLine) {
  const std::string reply = Convert(kTypes,
                                    "{\n  \"@type\": \"type.googleapis.com/"
                                    "envoy.config.cluster.v3.Cluster\",\n"
                                    "  \"connectTimeout\": \"2.5s\",\n  \"name\": \"c1\"\n}");
  // ok TYPE_URL NAME_LINE NAME_HEX VALUE_HEX
  ASSERT_EQ(reply.rfind("ok type.googleapis.com/envoy.config.cluster.v3.Cluster 4 6331 ", 0), 0u)
      << reply;
  envoy::config::cluster::v3::Cluster cluster;
  ASSERT_TRUE(cluster.ParseFromString(FromHex(reply.substr(reply.rfind(' ') + 1))));
  EXPECT_EQ(cluster.name(), "c1");
  EXPECT_EQ(cluster.connect_timeout().seconds(), 2);
  EXPECT_EQ(cluster.connect_timeout().nanos(), 500000000);
}

TEST_F(JsonToProtoTest, OneTypeNeedsNoAtType) {
  const std::string reply = Convert("envoy.config.cluster.v3.Cluster", "{\"name\": \"c2\"}");
  EXPECT_EQ(reply, "ok type.googleapis.com/envoy.config.cluster.v3.Cluster 1 6332 0a026332");
  EXPECT_EQ(Convert(kTypes, "{\"name\": \"c2\"}"), "error 1 @type: field not present");
}

TEST_F(JsonToProtoTest, ErrorsNameTheLine) {
  EXPECT_EQ(Convert(kTypes,
                    "{\n\"@type\": \"type.googleapis.com/envoy.config.cluster.v3.Cluster\","
                    "\n\"name\": \"c\",\n\"edsClusterConfig\": {\n  \"bogus\": 1}}"),
            "error 5 eds_cluster_config.bogus: unknown field");
  // An unknown key spelled like a known one elsewhere: the line of the one
  // inside the object named by the error's path.
  EXPECT_EQ(Convert("envoy.config.cluster.v3.Cluster",
                    "{\n\"name\": \"c\",\n\"edsClusterConfig\": {\n  \"name\": 1}}"),
            "error 4 eds_cluster_config.name: unknown field");
  const std::string syntax = Convert(kTypes, "{\n\"name\": \"c\"\n\"type\": 1}");
  EXPECT_EQ(syntax.rfind("error 3 invalid JSON: ", 0), 0u) << syntax;
  EXPECT_EQ(Convert(kTypes, "{\"name\": \"c\",\n\"@type\": \"type.googleapis.com/x.Y\"}"),
            "error 2 @type: unknown type \"type.googleapis.com/x.Y\" (expected one of: "
            "type.googleapis.com/envoy.config.cluster.v3.Cluster, "
            "type.googleapis.com/envoy.config.listener.v3.Listener)");
  EXPECT_EQ(Convert(kTypes, "[1]"), "error 1 not a JSON object");
  // The converter goes on after errors.
  EXPECT_EQ(Convert("envoy.config.cluster.v3.Cluster", "{}"),
            "ok type.googleapis.com/envoy.config.cluster.v3.Cluster 0  ");
}

TEST_F(JsonToProtoTest, BrokenFramingEndsTheConverter) {
  EXPECT_TRUE(converter_.WriteLine("no-length-here"));
  EXPECT_EQ(converter_.ReadLine(kWait), "error 0 request header is not \"TYPES LENGTH\"");
  EXPECT_EQ(converter_.Wait(kWait), 1);
}

}  // namespace
}  // namespace uxds::testing
