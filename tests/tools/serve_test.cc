// `uxds serve`: the built tool as a child process against the fake control
// plane, called by grpcio (TestService, CSDS) and uxds's own client (Health).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "http2/client_connection.h"
#include "serve_support.h"
#include "support/fake_control_plane.h"
#include "support/test_support.h"
#include "support/xds_test_resources.h"
#include "uxds/loop.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;

constexpr std::chrono::milliseconds kWait = std::chrono::seconds(30);

TEST(ServeTest, ServesTestServiceHealthAndCsdsOnceConfigured) {
  auto cp = FakeControlPlane::Start();
  ASSERT_NE(cp, nullptr);
  TempDir dir;
  WriteServeBootstrap(dir.File("bootstrap.json"), *cp, "serve-node", /*fail_on_data_errors=*/true);
  const uint16_t port = FreePort();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string name = "grpc/server?xds.resource.listening_address=" + address;
  Subprocess serve =
      Subprocess::Start({UXDS_TOOL_PATH, "serve", "--bootstrap", dir.File("bootstrap.json"),
                         "--listen", address, "--hostname", "serve-test-host",
                         "--max-connection-idle-ms", "1000", "--request-memory-mib", "64"});
  ASSERT_TRUE(cp->SetResources(kLdsType, {{name, ServingListener(name, port)}}, "1"));
  std::optional<json> serving = NextJson(serve);
  ASSERT_TRUE(serving.has_value());
  EXPECT_EQ(*serving, json({{"address", address}, {"serving", true}}));

  // TestService from grpcio: UnaryCall fills the hostname.
  Subprocess call =
      Subprocess::Start({Python(), SourceRoot() + "/tests/peers/grpc_test_client.py", "--target",
                         address, "--call", "UnaryCall", "--fill-server-id"});
  std::optional<std::string> reply = call.ReadLine(kWait);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(json::parse(*reply).value("hostname", ""), "serve-test-host") << *reply;
  EXPECT_EQ(call.Wait(), 0);

  // Health from uxds's own client: SERVING.
  auto loop = Loop::Create();
  ASSERT_TRUE(loop.ok());
  auto check = [](Loop& loop, uint16_t port) -> Task<StatusOr<std::string>> {
    http2::ClientConnectionOptions options;
    auto connection = co_await http2::ClientConnection::Connect(
        loop, *SocketAddress::FromIpAndPort("127.0.0.1", port), options);
    if (!connection.ok()) co_return connection.status();
    StatusOr<std::string> health =
        co_await http2::UnaryCall(**connection, "/grpc.health.v1.Health/Check", "");
    co_await (*connection)->Close();
    co_return health;
  };
  StatusOr<std::string> health = (*loop)->BlockOn(check(**loop, port));
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(*health, std::string("\x08\x01", 2));  // status: SERVING

  // --max-connection-idle-ms: a connection left idle is drained and closed.
  auto idle = [](Loop& loop, uint16_t port) -> Task<Status> {
    auto connection = co_await http2::ClientConnection::Connect(
        loop, *SocketAddress::FromIpAndPort("127.0.0.1", port), http2::ClientConnectionOptions{});
    if (!connection.ok()) co_return connection.status();
    StatusOr<std::string> health =
        co_await http2::UnaryCall(**connection, "/grpc.health.v1.Health/Check", "");
    Status result = health.status();
    for (int waited = 0; result.ok() && waited < 3000 && !(*connection)->closed(); ++waited) {
      const Status slept = co_await SleepFor(loop, std::chrono::milliseconds(10));
      (void)slept;
    }
    if (result.ok() && !(*connection)->closed()) result = DeadlineExceededError("not closed");
    co_await (*connection)->Close();
    co_return result;
  };
  const Status closed_as_idle = (*loop)->BlockOn(idle(**loop, port));
  EXPECT_TRUE(closed_as_idle.ok()) << closed_as_idle.ToString();

  // CSDS from grpcio: the #server client with the Listener ACKed.
  Subprocess csds = Subprocess::Start(
      {Python(), SourceRoot() + "/tests/peers/csds_client.py", "--target", address});
  std::optional<std::string> dump = csds.ReadLine(kWait);
  ASSERT_TRUE(dump.has_value());
  json config = json::parse(*dump)["response"]["config"][0];
  EXPECT_EQ(config.value("client_scope", ""), "#server") << *dump;
  EXPECT_EQ(config["generic_xds_configs"][0].value("name", ""), name) << *dump;
  EXPECT_EQ(config["generic_xds_configs"][0].value("client_status", ""), "ACKED") << *dump;
  EXPECT_EQ(csds.Wait(), 0);

  // The Listener deleted (fail_on_data_errors): not serving, as a JSON line.
  ASSERT_TRUE(cp->SetResources(kLdsType, {}, "2"));
  std::optional<json> stopped = NextJson(serve);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->value("serving", true), false) << stopped->dump();
  EXPECT_EQ(stopped->value("code", ""), "NOT_FOUND") << stopped->dump();
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(), 0);
}

}  // namespace
}  // namespace uxds::testing
