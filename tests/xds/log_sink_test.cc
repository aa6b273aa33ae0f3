// The library's log sink: uxds's lines and protobuf's own warnings reach
// the embedder's sink instead of stderr.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "envoy/config/cluster/v3/cluster.pb.h"
#include "uxds/log.h"
#include "uxds/runtime.h"
#include "uxds/xds_client.h"

namespace uxds {
namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::pair<LogSeverity, std::string>> lines;
};

TEST(LogSinkTest, EmbedderSinkReceivesLinesAndCanBeReset) {
  auto captured = std::make_shared<Captured>();
  SetLogSink([captured](LogSeverity s, std::string_view m) {
    std::lock_guard lock(captured->mu);
    captured->lines.emplace_back(s, std::string(m));
  });
  Log(LogSeverity::kWarning, "hello");
  SetLogSink(nullptr);
  Log(LogSeverity::kInfo, "to stderr, not captured");
  ASSERT_EQ(captured->lines.size(), 1u);
  EXPECT_EQ(captured->lines[0].first, LogSeverity::kWarning);
  EXPECT_EQ(captured->lines[0].second, "hello");
}

TEST(LogSinkTest, ProtobufWarningsGoThroughTheSinkOnceAnXdsClientExists) {
  auto loop = Loop::Create();
  ASSERT_TRUE(loop.ok());
  auto bootstrap = Bootstrap::FromJson(
      R"({"xds_servers":[{"server_uri":"127.0.0.1:1","channel_creds":[{"type":"insecure"}]}],
          "node":{"id":"n"}})");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  auto client = XdsClient::Create(**loop, *bootstrap);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  auto captured = std::make_shared<Captured>();
  SetLogSink([captured](LogSeverity s, std::string_view m) {
    std::lock_guard lock(captured->mu);
    captured->lines.emplace_back(s, std::string(m));
  });
  // A Cluster whose name (field 1) is not UTF-8: proto3 rejects it, and
  // protobuf says so through its log handler.
  const std::string bytes = {'\x0a', '\x01', '\xff'};
  envoy::config::cluster::v3::Cluster cluster;
  EXPECT_FALSE(cluster.ParseFromString(bytes));
  SetLogSink(nullptr);
  ASSERT_FALSE(captured->lines.empty());
  EXPECT_NE(captured->lines[0].second.find("UTF-8"), std::string::npos)
      << captured->lines[0].second;
  EXPECT_NE(captured->lines[0].second.find("protobuf"), std::string::npos);
  (*loop)->BlockOn((*client)->Shutdown());
}

}  // namespace
}  // namespace uxds
