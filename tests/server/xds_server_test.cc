// XdsServer (A36) against the fake control plane, called over loopback by
// uxds's own HTTP/2 client and by raw sockets that count the bytes the
// server sends: serving and not serving, the address check, the bind retry,
// filter chains by destination, source port and source type, and routing.
#include <sys/socket.h>

#include <string>

#include "runtime/socket_address.h"
#include "runtime/tcp_socket.h"
#include "uxds/log.h"
#include "xds_server_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

bool HasText(const Status& status, const std::string& text) {
  return status.message().find(text) != std::string::npos;
}

ServerListenerSpec OneChain(const std::string& name, uint16_t port, ServerRoutes routes = {}) {
  ServerChain chain = Chain("only");
  chain.routes = std::move(routes);
  return Listener(name, "127.0.0.1", port, {chain});
}

TEST_F(XdsServerTest, CreateFailsWithoutTemplateOrWithEphemeralPort) {
  Bootstrap bootstrap;
  XdsServerConfig server;
  server.server_uri = cp_->target();
  bootstrap.xds_servers.push_back(server);
  const Status no_template = TryCreate("127.0.0.1:" + std::to_string(port_), bootstrap);
  EXPECT_EQ(no_template.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(HasText(no_template, "server_listener_resource_name_template"))
      << no_template.ToString();
  bootstrap.server_listener_resource_name_template = kTemplate;
  const Status ephemeral = TryCreate("127.0.0.1:0", bootstrap);
  EXPECT_EQ(ephemeral.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasText(ephemeral, "fixed port")) << ephemeral.ToString();
  const Status bad_address = TryCreate("localhost:80", bootstrap);
  EXPECT_EQ(bad_address.code(), StatusCode::kInvalidArgument) << bad_address.ToString();
  EXPECT_TRUE(TryCreate("[::]:" + std::to_string(port_), bootstrap).ok());
  XdsServerOptions too_many_loops;
  too_many_loops.serving_loops = 100'000;
  const Status loops = TryCreate("127.0.0.1:" + std::to_string(port_), bootstrap, too_many_loops);
  EXPECT_EQ(loops.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasText(loops, "XdsServerOptions.serving_loops")) << loops.ToString();
}

TEST_F(XdsServerTest, ListenerNameUsesTheListeningAddress) {
  StartServer("[::]:" + std::to_string(port_));
  control_->RunSync([&] {
    EXPECT_EQ(server_->listening_address(), "[::]:" + std::to_string(port_));
    EXPECT_EQ(server_->listener_resource_name(),
              "grpc/server?xds.resource.listening_address=[::]:" + std::to_string(port_));
  });
}

TEST_F(XdsServerTest, NotListeningBeforeTheFirstConfigThenServing) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_));
  auto request = cp_->NextRequest(milliseconds(10000), kLdsType);
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->resource_names, std::vector<std::string>{name});
  // A36: no listen() before the configuration.
  EXPECT_FALSE(Probe("127.0.0.1", port_).connected);
  SetListener(OneChain(name, port_), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  auto reply = Call("127.0.0.1", "/pkg.Service/Method");
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(*reply, "/pkg.Service/Method");
}

TEST_F(XdsServerTest, AddressMismatchIsNotServing) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_));
  SetListener(OneChain(name, static_cast<uint16_t>(port_ + 1)), "1");
  auto status = WaitForStatus([](const Status& s) { return !s.ok(); });
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(HasText(*status, "does not match listening address")) << status->ToString();
  EXPECT_FALSE(Probe("127.0.0.1", port_).connected);
  // Fixed: serving.
  SetListener(OneChain(name, port_), "2");
  ASSERT_TRUE(WaitForServing().has_value());
  EXPECT_TRUE(Call("127.0.0.1", "/a.B/C").ok());
}

TEST_F(XdsServerTest, PortInUseIsNotServingUntilFreed) {
  auto occupied =
      TcpListener::Bind(*client_loop_, *SocketAddress::FromIpAndPort("127.0.0.1", port_));
  ASSERT_TRUE(occupied.ok()) << occupied.status().ToString();
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  XdsServerOptions options;
  options.bind_retry_interval = milliseconds(200);
  StartServer("127.0.0.1:" + std::to_string(port_), options);
  SetListener(OneChain(name, port_), "1");
  auto status = WaitForStatus([](const Status& s) { return !s.ok(); });
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->code(), StatusCode::kUnavailable);
  EXPECT_TRUE(HasText(*status, "cannot listen")) << status->ToString();
  (*occupied)->Close();
  occupied->reset();
  ASSERT_TRUE(WaitForServing().has_value());
  EXPECT_TRUE(Call("127.0.0.1", "/a.B/C").ok());
}

TEST_F(XdsServerTest, DeletedListenerStopsServingUnderFailOnDataErrors) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_), {}, /*fail_on_data_errors=*/true);
  SetListener(OneChain(name, port_), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  ASSERT_TRUE(cp_->SetResources(kLdsType, {}, "2"));
  auto status = WaitForStatus([](const Status& s) { return !s.ok(); });
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->code(), StatusCode::kNotFound) << status->ToString();
  // A36: not serving after startup: accept, then close without a byte.
  const ConnectionProbe probe = Probe("127.0.0.1", port_);
  EXPECT_TRUE(probe.connected);
  EXPECT_TRUE(probe.closed_by_server);
  EXPECT_EQ(probe.bytes_received, 0u);
  // Back: serving again on the socket it kept.
  SetListener(OneChain(name, port_), "3");
  ASSERT_TRUE(WaitForServing().has_value());
  EXPECT_TRUE(Call("127.0.0.1", "/a.B/C").ok());
}

TEST_F(XdsServerTest, DeletedListenerKeepsServingWithoutFailOnDataErrors) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_));
  SetListener(OneChain(name, port_), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  ASSERT_TRUE(cp_->SetResources(kLdsType, {}, "2"));
  // A88: the deletion is an ambient error; the ACK of version 2 shows it
  // has been processed.
  ASSERT_TRUE(cp_->NextRequestMatching(milliseconds(10000), [](const ObservedRequest& r) {
    return r.type_url == kLdsType && r.version_info == "2";
  }));
  EXPECT_FALSE(WaitForStatus([](const Status& s) { return !s.ok(); }, milliseconds(300)));
  EXPECT_TRUE(Call("127.0.0.1", "/a.B/C").ok());
}

TEST_F(XdsServerTest, ControlPlaneOutageKeepsServing) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_), {}, /*fail_on_data_errors=*/true);
  SetListener(OneChain(name, port_), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  // A36: "Communication failures do not impact the XdsServer's xDS
  // configuration", even with fail_on_data_errors.
  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(cp_->DropAllConnections());
  ASSERT_TRUE(cp_->WaitForStreamClosed(milliseconds(10000)).has_value());
  EXPECT_FALSE(WaitForStatus([](const Status& s) { return !s.ok(); }, milliseconds(1000)));
  EXPECT_TRUE(Call("127.0.0.1", "/a.B/C").ok());
  ASSERT_TRUE(cp_->RestartListening());
}

TEST_F(XdsServerTest, ChainsByDestinationIp) {
  const std::string name = ListenerNameFor("[::]:" + std::to_string(port_));
  StartServer("[::]:" + std::to_string(port_));
  ServerChain v4 = Chain("v4");
  v4.prefix_ranges = {"127.0.0.1/32"};
  v4.routes.routes = {{"/v4.", ServerRouteAction::kNonForwarding}};
  ServerChain v6 = Chain("v6");
  v6.prefix_ranges = {"::1/128"};
  v6.routes.routes = {{"/v6.", ServerRouteAction::kNonForwarding}};
  SetListener(Listener(name, "::", port_, {v4, v6}), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  EXPECT_TRUE(Call("127.0.0.1", "/v4.S/M").ok());
  EXPECT_EQ(Call("127.0.0.1", "/v6.S/M").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Call("::1", "/v6.S/M").ok());
  EXPECT_EQ(Call("::1", "/v4.S/M").status().code(), StatusCode::kUnavailable);
  // 127.0.0.2 matches no chain and there is no default one: zero bytes.
  const ConnectionProbe probe = Probe("127.0.0.2", port_);
  EXPECT_TRUE(probe.connected);
  EXPECT_TRUE(probe.closed_by_server);
  EXPECT_EQ(probe.bytes_received, 0u);
  EXPECT_GT(Probe("127.0.0.1", port_, std::nullopt, milliseconds(500)).bytes_received, 0u);
}

// A36: a Listener whose most specific chain may not be unique is NACKed,
// matchers normalized first. On a dual-stack socket 127.0.0.1 arrives as
// ::ffff:127.0.0.1, which both prefixes below match: the second chain would
// be unreachable. The server keeps the version it has.
TEST_F(XdsServerTest, Ipv4MappedPrefixDuplicatingAnIpv4OneIsNacked) {
  const std::string name = ListenerNameFor("[::]:" + std::to_string(port_));
  StartServer("[::]:" + std::to_string(port_));
  ServerChain v4 = Chain("v4");
  v4.prefix_ranges = {"127.0.0.0/8"};
  v4.routes.routes = {{"/v4.", ServerRouteAction::kNonForwarding}};
  SetListener(Listener(name, "::", port_, {v4}), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  ServerChain mapped = Chain("mapped");
  mapped.prefix_ranges = {"::ffff:127.0.0.0/104"};
  mapped.routes.routes = {{"/mapped.", ServerRouteAction::kNonForwarding}};
  SetListener(Listener(name, "::", port_, {v4, mapped}), "2");
  auto nack = cp_->NextRequestMatching(milliseconds(10000), [](const ObservedRequest& r) {
    return r.type_url == kLdsType && r.error_detail.has_value();
  });
  ASSERT_TRUE(nack.has_value()) << "version 2 was not NACKed";
  EXPECT_EQ(nack->version_info, "1");
  EXPECT_NE(nack->error_detail->message.find(
                "field:filter_chains[1].filter_chain_match error:duplicate matching rules "
                "detected when adding filter chain: {prefix_ranges={::ffff:127.0.0.0/104}}"),
            std::string::npos)
      << nack->error_detail->message;
  EXPECT_TRUE(Call("127.0.0.1", "/v4.S/M").ok());
  EXPECT_EQ(Call("127.0.0.1", "/mapped.S/M").status().code(), StatusCode::kUnavailable);
}

TEST_F(XdsServerTest, ChainsBySourcePortAndSourceType) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_));
  const uint16_t chosen_port = FreePort();
  const uint16_t other_port = FreePort();
  ServerChain by_port = Chain("by-port");
  by_port.source_ports = {chosen_port};
  // Loopback peers are SAME_IP_OR_LOOPBACK: an EXTERNAL chain never
  // matches them, whatever their port.
  ServerChain external = Chain("external");
  external.source_type = 2;
  SetListener(Listener(name, "127.0.0.1", port_, {by_port, external}), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  EXPECT_GT(Probe("127.0.0.1", port_, chosen_port, milliseconds(500)).bytes_received, 0u);
  ConnectionProbe other = Probe("127.0.0.1", port_, other_port);
  EXPECT_TRUE(other.closed_by_server);
  EXPECT_EQ(other.bytes_received, 0u);
  // A SAME_IP_OR_LOOPBACK chain takes every loopback peer.
  ServerChain loopback = Chain("loopback");
  loopback.source_type = 1;
  SetListener(Listener(name, "127.0.0.1", port_, {by_port, loopback}), "2");
  ASSERT_TRUE(cp_->NextRequestMatching(milliseconds(10000), [](const ObservedRequest& r) {
    return r.type_url == kLdsType && r.version_info == "2";
  }));
  bool served = false;
  for (int attempt = 0; attempt < 50 && !served; ++attempt) {
    served = Call("127.0.0.1", "/a.B/C").ok();
  }
  EXPECT_TRUE(served);
}

TEST_F(XdsServerTest, NonForwardingActionVsRouteAction) {
  std::mutex log_mutex;
  std::vector<std::string> warnings;
  SetLogSink([&](LogSeverity, std::string_view message) {
    std::lock_guard<std::mutex> lock(log_mutex);
    warnings.emplace_back(message);
  });
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_));
  ServerRoutes routes;
  routes.routes = {{"/ok.", ServerRouteAction::kNonForwarding},
                   {"/forward.", ServerRouteAction::kRoute}};
  SetListener(OneChain(name, port_, routes), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  EXPECT_TRUE(Call("127.0.0.1", "/ok.S/M").ok());
  auto forwarded = Call("127.0.0.1", "/forward.S/M");
  EXPECT_EQ(forwarded.status().code(), StatusCode::kUnavailable) << forwarded.status().ToString();
  auto unrouted = Call("127.0.0.1", "/other.S/M");
  EXPECT_EQ(unrouted.status().code(), StatusCode::kUnavailable) << unrouted.status().ToString();
  // A36 configuration error logging: a warning while broken, one when fixed.
  SetListener(OneChain(name, port_), "2");
  bool fixed_logged = false;
  for (int i = 0; i < 200 && !fixed_logged; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    std::lock_guard<std::mutex> lock(log_mutex);
    for (const std::string& line : warnings)
      fixed_logged |= line.find("fixed") != std::string::npos;
  }
  SetLogSink(nullptr);
  EXPECT_TRUE(fixed_logged);
  size_t errors = 0;
  for (const std::string& line : warnings)
    errors += line.find("fail with UNAVAILABLE") != std::string::npos;
  EXPECT_EQ(errors, 1u);
}

TEST_F(XdsServerTest, RdsArrivingAfterLdsThenUpdatedWithoutDrain) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_));
  ServerChain chain = Chain("rds");
  chain.rds_name = "server-routes";
  SetListener(Listener(name, "127.0.0.1", port_, {chain}), "1");
  auto rds_request = cp_->NextRequest(milliseconds(10000), kRdsType);
  ASSERT_TRUE(rds_request.has_value());
  // A36: the Listener waits for its RouteConfiguration.
  EXPECT_FALSE(Probe("127.0.0.1", port_).connected);
  SetRouteConfig("server-routes", {}, "1");
  ASSERT_TRUE(WaitForServing().has_value());
  // One connection across an RDS update: the update applies to it, and it
  // is not drained.
  auto run = [](XdsServerTest* test) -> Task<void> {
    auto address = *SocketAddress::FromIpAndPort("127.0.0.1", test->port_);
    auto connection = co_await http2::ClientConnection::Connect(*test->client_loop_, address, {});
    EXPECT_TRUE(connection.ok());
    if (!connection.ok()) co_return;
    auto first = co_await http2::UnaryCall(**connection, "/a.S/M", "");
    EXPECT_TRUE(first.ok()) << first.status().ToString();
    ServerRoutes routes;
    routes.routes = {{"", ServerRouteAction::kRoute}};
    test->SetRouteConfig("server-routes", routes, "2");
    StatusCode code = StatusCode::kOk;
    for (int i = 0; i < 200 && code == StatusCode::kOk; ++i) {
      auto later = co_await http2::UnaryCall(**connection, "/a.S/M", "");
      code = later.status().code();
      if (code == StatusCode::kOk) {
        const Status slept = co_await SleepFor(*test->client_loop_, milliseconds(20));
        (void)slept;
      }
    }
    EXPECT_EQ(code, StatusCode::kUnavailable);
    EXPECT_TRUE((*connection)->usable());  // no GOAWAY
    co_await (*connection)->Close();
  };
  client_loop_->BlockOn(run(this));
}

TEST_F(XdsServerTest, MissingRdsFailsEveryRpcWithUnavailable) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_));
  ASSERT_TRUE(cp_->SetResources(kRdsType, {}, "1"));
  ServerChain chain = Chain("rds");
  chain.rds_name = "missing-routes";
  SetListener(Listener(name, "127.0.0.1", port_, {chain}), "1");
  // The RDS timer (500 ms here) makes the resource "does not exist": the
  // Listener applies, and its RPCs fail with UNAVAILABLE.
  ASSERT_TRUE(WaitForServing().has_value());
  auto reply = Call("127.0.0.1", "/a.S/M");
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status().ToString();
}

}  // namespace
}  // namespace uxds::testing
