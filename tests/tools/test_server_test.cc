// `uxds test-server`: the built tool as a child process, called by grpcio's
// TestService client, then stopped by SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/subprocess.h"
#include "support/test_support.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;

constexpr std::chrono::milliseconds kWait = std::chrono::seconds(30);

TEST(TestServerTest, ServesTestServiceOnTheAnnouncedPortUntilSigterm) {
  Subprocess server = Subprocess::Start({UXDS_TOOL_PATH, "test-server", "--port", "0"});
  const std::optional<std::string> port = server.WaitForLine("PORT ", kWait);
  ASSERT_TRUE(port.has_value());
  const std::string target = "127.0.0.1:" + *port;

  Subprocess call =
      Subprocess::Start({Python(), SourceRoot() + "/tests/peers/grpc_test_client.py", "--target",
                         target, "--call", "UnaryCall", "--fill-server-id"});
  const std::optional<std::string> reply = call.ReadLine(kWait);
  ASSERT_TRUE(reply.has_value());
  const json parsed = json::parse(*reply, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(parsed.is_discarded()) << *reply;
  EXPECT_EQ(parsed.value("server_id", ""), "uxds-test-server") << *reply;
  EXPECT_EQ(call.Wait(kWait), 0);

  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(kWait), 0);
}

TEST(TestServerTest, PortOutOfRangeIsAUsageError) {
  Subprocess server = Subprocess::Start(
      {"/bin/sh", "-c", "exec \"$0\" test-server --port 70000 2>/dev/null", UXDS_TOOL_PATH});
  EXPECT_EQ(server.ReadLine(kWait), std::nullopt);
  EXPECT_EQ(server.Wait(kWait), 2);
}

}  // namespace
}  // namespace uxds::testing
