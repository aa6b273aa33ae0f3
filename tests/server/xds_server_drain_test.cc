// XdsServer drains (A36): a new Listener version drains the connections
// accepted under the old one (two-phase GOAWAY) while calls in flight
// finish and the listening socket stays open; under load from a real gRPC
// client (grpcio) no RPC fails. Also: logging without a status callback.
#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "runtime/socket_address.h"
#include "support/poll_until.h"
#include "support/test_support.h"
#include "support/unfinished_messages_client.h"
#include "uxds/log.h"
#include "xds_server_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

ServerListenerSpec Version(const std::string& name, uint16_t port, int version) {
  // A different Listener each time.
  return Listener(name, "127.0.0.1", port, {Chain("chain-v" + std::to_string(version))});
}

TEST_F(XdsServerTest, ListenerUpdateDrainsOldConnectionsAndInFlightCallsFinish) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  XdsServerOptions options;
  options.drain_grace_time = std::chrono::seconds(10);
  StartServer("127.0.0.1:" + std::to_string(port_), options);
  SetListener(Version(name, port_, 1), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  auto run = [](XdsServerTest* test, std::string name) -> Task<void> {
    Loop& loop = *test->client_loop_;
    auto address = *SocketAddress::FromIpAndPort("127.0.0.1", test->port_);
    auto old_connection = co_await http2::ClientConnection::Connect(loop, address, {});
    EXPECT_TRUE(old_connection.ok());
    if (!old_connection.ok()) co_return;
    // A slow call in flight across the drain.
    std::optional<StatusOr<std::string>> slow;
    TaskGroup calls(loop);
    auto call = [](http2::ClientConnection* connection,
                   std::optional<StatusOr<std::string>>* out) -> Task<void> {
      out->emplace(co_await http2::UnaryCall(*connection, "/slow.S/M", ""));
    };
    calls.Spawn(call(old_connection->get(), &slow));
    const Status slept = co_await SleepFor(loop, milliseconds(100));
    (void)slept;
    test->SetListener(Version(name, test->port_, 2), "2");
    // The GOAWAY comes; the slow call still finishes OK.
    const Status unusable = co_await (*old_connection)->WaitUntilUnusable();
    EXPECT_TRUE(unusable.ok());
    co_await calls.Join();
    EXPECT_TRUE(slow.has_value() && slow->ok());
    // The listening socket stayed open: a new connection is served.
    auto fresh = co_await http2::ClientConnection::Connect(loop, address, {});
    EXPECT_TRUE(fresh.ok());
    if (fresh.ok()) {
      auto reply = co_await http2::UnaryCall(**fresh, "/a.S/M", "");
      EXPECT_TRUE(reply.ok()) << reply.status().ToString();
      EXPECT_TRUE((*fresh)->usable());
      co_await (*fresh)->Close();
    }
    // The drained connection closes once its calls are done.
    const Status closed = co_await (*old_connection)->closed_event().Wait();
    EXPECT_TRUE(closed.ok());
    co_await (*old_connection)->Close();
  };
  client_loop_->BlockOn(run(this, name));
}

TEST_F(XdsServerTest, ListenerUpdateWaitsForItsRouteConfiguration) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  StartServer("127.0.0.1:" + std::to_string(port_));
  SetListener(Version(name, port_, 1), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  auto run = [](XdsServerTest* test, std::string name) -> Task<void> {
    Loop& loop = *test->client_loop_;
    auto address = *SocketAddress::FromIpAndPort("127.0.0.1", test->port_);
    http2::ClientConnectionOptions options;
    auto connection = co_await http2::ClientConnection::Connect(loop, address, options);
    EXPECT_TRUE(connection.ok());
    if (!connection.ok()) co_return;
    // Version 2 names a RouteConfiguration the control plane has not sent.
    ServerChain chain = Chain("rds");
    chain.rds_name = "later-routes";
    test->SetListener(Listener(name, "127.0.0.1", test->port_, {chain}), "2");
    EXPECT_TRUE(test->cp_->NextRequest(milliseconds(10000), kRdsType).has_value());
    const Status slept = co_await SleepFor(loop, milliseconds(300));
    (void)slept;
    // A36: not applied yet, so nothing drains and version 1 still serves.
    EXPECT_TRUE((*connection)->usable());
    auto reply = co_await http2::UnaryCall(**connection, "/a.S/M", "");
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    test->SetRouteConfig("later-routes", {}, "1");
    const Status unusable = co_await (*connection)->WaitUntilUnusable();
    EXPECT_TRUE(unusable.ok());
    co_await (*connection)->Close();
  };
  client_loop_->BlockOn(run(this, name));
}

// Far below the drain grace time, and the 2 s backstop after it.
constexpr milliseconds kShutdownGrace{400};

// Shutdown(grace) bounds every connection, one already draining after a
// Listener update under a longer drain grace time included: its call in
// flight ends at the shorter grace and the connection closes then, not when
// Shutdown()'s backstop (grace + 2 s) cancels it.
TEST_F(XdsServerTest, ShutdownShortensADrainInProgress) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  XdsServerOptions options;
  options.drain_grace_time = std::chrono::seconds(60);
  StartServer("127.0.0.1:" + std::to_string(port_), options);
  SetListener(Version(name, port_, 1), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  struct Outcome {
    std::optional<StatusOr<std::string>> call;
    std::chrono::steady_clock::time_point shutdown_started;
    std::chrono::steady_clock::time_point call_ended;
    std::chrono::steady_clock::time_point connection_closed;
    std::optional<std::future<std::chrono::steady_clock::time_point>> shutdown_returned;
  } outcome;
  auto run = [](XdsServerTest* test, std::string name, Outcome* out) -> Task<void> {
    Loop& loop = *test->client_loop_;
    auto address = *SocketAddress::FromIpAndPort("127.0.0.1", test->port_);
    auto connection = co_await http2::ClientConnection::Connect(loop, address, {});
    EXPECT_TRUE(connection.ok());
    if (!connection.ok()) co_return;
    TaskGroup calls(loop);
    auto call = [](http2::ClientConnection* connection, Outcome* out) -> Task<void> {
      out->call.emplace(co_await http2::UnaryCall(*connection, "/hang.S/M", ""));
      out->call_ended = std::chrono::steady_clock::now();
    };
    calls.Spawn(call(connection->get(), out));
    const Status slept = co_await SleepFor(loop, milliseconds(100));
    (void)slept;
    test->SetListener(Version(name, test->port_, 2), "2");
    const Status unusable = co_await (*connection)->WaitUntilUnusable();
    EXPECT_TRUE(unusable.ok());
    // The drain's PING round trip and final GOAWAY are done; the call runs.
    const Status settled = co_await SleepFor(loop, milliseconds(200));
    (void)settled;
    EXPECT_FALSE(out->call.has_value());
    out->shutdown_started = std::chrono::steady_clock::now();
    out->shutdown_returned = test->StartShutdown(kShutdownGrace);
    co_await calls.Join();
    const Status closed = co_await (*connection)->closed_event().Wait();
    EXPECT_TRUE(closed.ok());
    out->connection_closed = std::chrono::steady_clock::now();
    co_await (*connection)->Close();
  };
  client_loop_->BlockOn(run(this, name, &outcome));
  ASSERT_TRUE(outcome.call.has_value());
  ASSERT_TRUE(outcome.shutdown_returned.has_value());
  ASSERT_EQ(outcome.shutdown_returned->wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  const std::chrono::steady_clock::time_point returned = outcome.shutdown_returned->get();
  auto since_shutdown = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<milliseconds>(t - outcome.shutdown_started);
  };
  // The call had the shorter grace, and no more than that (plus slack for
  // a loaded machine, well below the 2 s backstop).
  EXPECT_EQ(outcome.call->status().code(), StatusCode::kUnavailable)
      << outcome.call->status().ToString();
  EXPECT_GE(since_shutdown(outcome.call_ended), kShutdownGrace - milliseconds(50));
  EXPECT_LT(since_shutdown(outcome.call_ended), kShutdownGrace + milliseconds(1000));
  EXPECT_LT(since_shutdown(outcome.connection_closed), kShutdownGrace + milliseconds(1000));
  EXPECT_LT(since_shutdown(returned), kShutdownGrace + milliseconds(1000));
}

// Connections draining after a Listener update are on their way out: they
// do not keep new connections out while the server reports serving. The
// limit still holds for the connections served under the new version.
TEST_F(XdsServerTest, DrainingConnectionsDoNotCountAgainstMaxConnections) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  XdsServerOptions options;
  options.drain_grace_time = std::chrono::seconds(60);
  options.max_connections = 2;
  StartServer("127.0.0.1:" + std::to_string(port_), options);
  SetListener(Version(name, port_, 1), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  auto run = [](XdsServerTest* test, std::string name) -> Task<void> {
    Loop& loop = *test->client_loop_;
    auto address = *SocketAddress::FromIpAndPort("127.0.0.1", test->port_);
    http2::ClientConnectionOptions connect_options;
    connect_options.connect_timeout = milliseconds(3000);
    std::vector<std::unique_ptr<http2::ClientConnection>> old_connections;
    TaskGroup calls(loop);
    auto call = [](http2::ClientConnection* connection) -> Task<void> {
      const StatusOr<std::string> reply = co_await http2::UnaryCall(*connection, "/hang.S/M", "");
      (void)reply;
    };
    // The two old connections are served by different loops when the
    // server has two: their GOAWAYs below then show that every loop has
    // applied version 2 before the fresh connections come.
    std::set<std::string> threads;
    for (int attempt = 0; attempt < 400 && old_connections.size() < 2; ++attempt) {
      auto connection = co_await http2::ClientConnection::Connect(loop, address, connect_options);
      StatusOr<std::string> thread = Status(StatusCode::kUnavailable, "not connected");
      if (connection.ok()) {
        thread = co_await http2::UnaryCall(**connection, "/thread.S/M", "", {},
                                           Loop::Clock::now() + std::chrono::seconds(5));
      }
      if (thread.ok() && (test->serving_loops_ < 2 || threads.insert(*thread).second)) {
        calls.Spawn(call(connection->get()));
        old_connections.push_back(*std::move(connection));
        continue;
      }
      // The same loop again, or refused while a closed one's slot is
      // still being given back.
      if (connection.ok()) co_await (*connection)->Close();
      const Status paused = co_await SleepFor(loop, milliseconds(5));
      (void)paused;
    }
    EXPECT_EQ(old_connections.size(), 2u);
    if (old_connections.size() != 2) {
      calls.Cancel();
      co_await calls.Join();
      for (auto& connection : old_connections) co_await connection->Close();
      co_return;
    }
    const Status slept = co_await SleepFor(loop, milliseconds(100));
    (void)slept;
    test->SetListener(Version(name, test->port_, 2), "2");
    for (auto& connection : old_connections) {
      const Status unusable = co_await connection->WaitUntilUnusable();
      EXPECT_TRUE(unusable.ok());
      EXPECT_FALSE(connection->closed());  // draining: its call still runs
    }
    // Two connections under version 2 are served...
    std::vector<std::unique_ptr<http2::ClientConnection>> fresh_connections;
    for (int i = 0; i < 2; ++i) {
      auto fresh = co_await http2::ClientConnection::Connect(loop, address, connect_options);
      EXPECT_TRUE(fresh.ok()) << "new connection " << i << ": " << fresh.status().ToString();
      if (!fresh.ok()) break;
      auto reply = co_await http2::UnaryCall(**fresh, "/a.S/M", "");
      EXPECT_TRUE(reply.ok()) << reply.status().ToString();
      fresh_connections.push_back(*std::move(fresh));
    }
    // ...and a third is over the limit: closed at accept, without a byte.
    auto over = co_await http2::ClientConnection::Connect(loop, address, connect_options);
    EXPECT_FALSE(over.ok());
    if (over.ok()) co_await (*over)->Close();
    for (auto& connection : fresh_connections) co_await connection->Close();
    calls.Cancel();
    co_await calls.Join();
    for (auto& connection : old_connections) co_await connection->Close();
  };
  client_loop_->BlockOn(run(this, name));
}

// Serves version 1 of the Listener for 127.0.0.1:port_ with `options`;
// true once serving.
bool ServeListenerWith(XdsServerTest& test, uint16_t port, XdsServerOptions options) {
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string name = XdsServerTest::ListenerNameFor(address);
  test.StartServer(address, std::move(options));
  test.SetListener(Version(name, port, 1), "1");
  return test.WaitForServing().has_value();
}

Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> ConnectTo(Loop& loop, uint16_t port) {
  http2::ClientConnectionOptions connect_options;
  connect_options.connect_timeout = milliseconds(3000);
  co_return co_await http2::ClientConnection::Connect(
      loop, *SocketAddress::FromIpAndPort("127.0.0.1", port), connect_options);
}

// XdsServerOptions::max_connection_idle (gRFC A9) reaches every connection:
// an idle one is drained (GOAWAY, then closed) and frees its
// max_connections slot for the next client.
TEST_F(XdsServerTest, IdleConnectionsAreDrainedAndFreeTheirSlot) {
  XdsServerOptions options;
  options.max_connections = 1;
  options.max_connection_idle = milliseconds(200);
  ASSERT_TRUE(ServeListenerWith(*this, port_, options));
  auto run = [](XdsServerTest* test) -> Task<void> {
    Loop& loop = *test->client_loop_;
    for (int i = 0; i < 2; ++i) {
      // The client sees the drained connection close as soon as the server
      // closes its socket; the server frees the slot once that
      // connection's tasks have ended, a moment later. Until then a new
      // client is refused (closed at accept), so the second one tries again
      // for a bounded while.
      auto connection = co_await ConnectTo(loop, test->port_);
      for (int attempt = 0; i > 0 && !connection.ok() && attempt < 200; ++attempt) {
        const Status slept = co_await SleepFor(loop, milliseconds(10));
        (void)slept;
        connection = co_await ConnectTo(loop, test->port_);
      }
      EXPECT_TRUE(connection.ok()) << i << ": " << connection.status().ToString();
      if (!connection.ok()) co_return;
      auto reply = co_await http2::UnaryCall(**connection, "/a.S/M", "");
      EXPECT_TRUE(reply.ok()) << reply.status().ToString();
      // Idle now: the server drains and closes it (bounded generously).
      for (int waited = 0; waited < 2000 && !(*connection)->closed(); ++waited) {
        const Status slept = co_await SleepFor(loop, milliseconds(10));
        (void)slept;
      }
      EXPECT_TRUE((*connection)->closed()) << "connection " << i << " not closed as idle";
      co_await (*connection)->Close();
    }
  };
  client_loop_->BlockOn(run(this));
}

// A9 max_connection_age through the xDS-enabled server: a connection kept
// busy with calls (idleness never drains it here) is still drained once it
// is old, and a new connection is served.
TEST_F(XdsServerTest, MaxConnectionAgeDrainsABusyConnection) {
  XdsServerOptions options;
  options.max_connection_idle = milliseconds(0);
  options.max_connection_age = milliseconds(300);
  ASSERT_TRUE(ServeListenerWith(*this, port_, options));
  auto run = [](XdsServerTest* test) -> Task<void> {
    Loop& loop = *test->client_loop_;
    auto connection = co_await ConnectTo(loop, test->port_);
    EXPECT_TRUE(connection.ok()) << connection.status().ToString();
    if (!connection.ok()) co_return;
    int calls = 0;
    for (int waited = 0; waited < 500 && !(*connection)->closed(); ++waited) {
      if ((*connection)->usable()) {
        auto reply = co_await http2::UnaryCall(**connection, "/a.S/M", "");
        EXPECT_TRUE(reply.ok() || !(*connection)->usable()) << reply.status().ToString();
        ++calls;
      }
      const Status slept = co_await SleepFor(loop, milliseconds(10));
      (void)slept;
    }
    EXPECT_TRUE((*connection)->closed()) << "not drained for its age after " << calls << " calls";
    EXPECT_GE(calls, 1);
    co_await (*connection)->Close();
    auto next = co_await ConnectTo(loop, test->port_);
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok()) co_return;
    auto reply = co_await http2::UnaryCall(**next, "/a.S/M", "");
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    co_await (*next)->Close();
  };
  client_loop_->BlockOn(run(this));
}

TEST_F(XdsServerTest, DrainsDuringLoadFromGrpcioFailNoRpc) {
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  XdsServerOptions options;
  options.drain_grace_time = std::chrono::seconds(10);
  StartServer("127.0.0.1:" + std::to_string(port_), options);
  SetListener(Version(name, port_, 1), "1");
  ASSERT_TRUE(WaitForServing().has_value());
  constexpr int kCalls = 1500;
  Subprocess client =
      Subprocess::Start({Python(), SourceRoot() + "/tests/peers/grpc_test_client.py", "--target",
                         "127.0.0.1:" + std::to_string(port_), "--call", "UnaryCall", "--count",
                         std::to_string(kCalls)});
  // Reads the client's lines as they come (its pipe must not fill up) and
  // pushes a new Listener version every 150 calls.
  int lines = 0;
  int failed = 0;
  int version = 1;
  while (lines < kCalls) {
    auto line = client.ReadLine(std::chrono::seconds(30));
    if (!line.has_value()) break;
    ++lines;
    if (line->find("\"code\": \"OK\"") == std::string::npos) {
      ++failed;
      ADD_FAILURE() << *line;
    }
    if (lines % 150 == 0) {
      ++version;
      SetListener(Version(name, port_, version), std::to_string(version));
    }
  }
  EXPECT_EQ(client.Wait(std::chrono::seconds(30)), 0);
  EXPECT_EQ(lines, kCalls);
  EXPECT_EQ(failed, 0);
  EXPECT_GE(version, 10);
}

TEST_F(XdsServerTest, WithoutCallbackErrorsAndResumptionAreLogged) {
  std::mutex log_mutex;
  std::vector<std::string> warnings;
  SetLogSink([&](LogSeverity severity, std::string_view message) {
    if (severity != LogSeverity::kWarning) return;
    std::lock_guard<std::mutex> lock(log_mutex);
    warnings.emplace_back(message);
  });
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  control_->RunSync([&] {
    Bootstrap bootstrap;
    XdsServerConfig server;
    server.server_uri = cp_->target();
    bootstrap.xds_servers.push_back(server);
    bootstrap.server_listener_resource_name_template = kTemplate;
    pool_ = *XdsClientPool::Create(control_->loop(), bootstrap);
    XdsServerOptions options;
    options.xds_client_pool = pool_;
    server_ = *XdsServer::Create("127.0.0.1:" + std::to_string(port_), MakeRegistry(), options);
    server_->Start();
  });
  auto logged = [&](const std::string& text) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(log_mutex);
        for (const std::string& line : warnings) {
          if (line.find(text) != std::string::npos) return true;
        }
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  };
  SetListener(Version(name, static_cast<uint16_t>(port_ + 1), 1), "1");
  EXPECT_TRUE(logged("is not serving"));
  SetListener(Version(name, port_, 2), "2");
  EXPECT_TRUE(logged("is serving again"));
  SetLogSink(nullptr);
}

// XdsServerOptions::request_memory_budget: one budget across the
// xDS-enabled server's connections. Four connections of unfinished 4 MiB
// messages could hold 4 x 41.6 MiB under the per-connection bounds; under
// a 16 MiB budget the server ends the largest calls (RESOURCE_EXHAUSTED),
// and a well-behaved client's 1 MiB call is served meanwhile.
TEST_F(XdsServerTest, TheRequestMemoryBudgetHoldsAcrossItsConnections) {
  constexpr int kConnections = 4;
  XdsServerOptions options;
  options.request_memory_budget = size_t{16} << 20;
  ASSERT_TRUE(ServeListenerWith(*this, port_, options));
  std::deque<UnfinishedMessagesClient> clients;
  for (int i = 0; i < kConnections; ++i) clients.emplace_back("/a.S/M", 100);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (UnfinishedMessagesClient& client : clients) {
    threads.emplace_back([&, port = port_] { EXPECT_TRUE(client.Run(port, &stop)); });
  }
  auto resource_exhausted = [&] {
    int total = 0;
    for (const UnfinishedMessagesClient& client : clients) total += client.resource_exhausted();
    return total;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (resource_exhausted() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  auto good_call = [](XdsServerTest* test) -> Task<StatusOr<std::string>> {
    auto connection = co_await ConnectTo(*test->client_loop_, test->port_);
    if (!connection.ok()) co_return connection.status();
    StatusOr<std::string> reply =
        co_await http2::UnaryCall(**connection, "/a.S/M", std::string(size_t{1} << 20, 'g'), {},
                                  Loop::Clock::now() + std::chrono::seconds(60));
    co_await (*connection)->Close();
    co_return reply;
  };
  const StatusOr<std::string> reply = client_loop_->BlockOn(good_call(this));
  stop = true;
  for (std::thread& thread : threads) thread.join();
  EXPECT_GT(resource_exhausted(), 0) << "no call was ended for the budget";
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(*reply, "/a.S/M");
}

// One connection served by each of `loops` serving loops (told apart by
// the thread that answers "/thread.*" on it); empty if 64 connections did
// not reach them all (all on one of two sockets: probability 2^-63).
Task<std::vector<std::unique_ptr<http2::ClientConnection>>> ConnectionPerLoop(Loop& loop,
                                                                              uint16_t port,
                                                                              size_t loops) {
  std::vector<std::unique_ptr<http2::ClientConnection>> held;
  std::set<std::string> threads;
  for (int i = 0; i < 64 && held.size() < loops; ++i) {
    auto connection = co_await ConnectTo(loop, port);
    if (!connection.ok()) break;
    StatusOr<std::string> thread = co_await http2::UnaryCall(
        **connection, "/thread.S/M", "", {}, Loop::Clock::now() + std::chrono::seconds(20));
    if (thread.ok() && threads.insert(*thread).second) {
      held.push_back(*std::move(connection));
    } else {
      co_await (*connection)->Close();
    }
  }
  if (held.size() < loops) {
    for (auto& connection : held) co_await connection->Close();
    held.clear();
  }
  co_return held;
}

// XdsServerOptions::serving_loops: one port, a socket and a thread per
// loop. A Listener update drains the connections of every loop while
// their calls finish; Shutdown() drains every loop too, and waits for the
// calls in flight on each.
TEST_F(XdsServerTest, ServingLoopsShareOnePortAndDrainTogether) {
  XdsServerOptions options;
  options.serving_loops = 2;
  options.drain_grace_time = std::chrono::seconds(20);
  ASSERT_TRUE(ServeListenerWith(*this, port_, options));
  const std::string name = ListenerNameFor("127.0.0.1:" + std::to_string(port_));
  auto run = [](XdsServerTest* test, std::string name) -> Task<void> {
    Loop& loop = *test->client_loop_;
    // Starts a call of `method` on every connection; returns once all ended.
    auto call_on_each =
        [](Loop& loop, std::vector<std::unique_ptr<http2::ClientConnection>>& connections,
           std::string method, std::vector<StatusOr<std::string>>& replies) -> Task<void> {
      TaskGroup calls(loop);
      replies.assign(connections.size(), Status(StatusCode::kUnknown, "not run"));
      for (size_t i = 0; i < connections.size(); ++i) {
        calls.Spawn([](http2::ClientConnection& connection, std::string method,
                       StatusOr<std::string>& out) -> Task<void> {
          out = co_await http2::UnaryCall(connection, method, "", {},
                                          Loop::Clock::now() + std::chrono::seconds(30));
        }(*connections[i], method, replies[i]));
      }
      co_await calls.Join();
    };
    auto close_all =
        [](std::vector<std::unique_ptr<http2::ClientConnection>>& connections) -> Task<void> {
      for (auto& connection : connections) co_await connection->Close();
    };

    // Version 1 on both loops; a call in flight on each across version 2.
    std::vector<std::unique_ptr<http2::ClientConnection>> v1 =
        co_await ConnectionPerLoop(loop, test->port_, 2);
    EXPECT_EQ(v1.size(), 2u) << "connections did not reach both loops";
    if (v1.size() != 2) co_return;
    std::vector<StatusOr<std::string>> replies;
    TaskGroup in_flight(loop);
    in_flight.Spawn(call_on_each(loop, v1, "/gate.S/M", replies));
    bool started = co_await PollUntil(loop, [&] { return test->gate_calls_started_.load() == 2; });
    EXPECT_TRUE(started);
    test->SetListener(Version(name, test->port_, 2), "2");
    // Each loop applied version 2: its connection gets the GOAWAY.
    for (auto& connection : v1) {
      const Status unusable = co_await connection->WaitUntilUnusable();
      EXPECT_TRUE(unusable.ok());
    }
    test->gate_open_ = true;
    co_await in_flight.Join();
    for (const StatusOr<std::string>& reply : replies) {
      EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    }
    co_await close_all(v1);

    // Version 2 on both loops; Shutdown() with a call in flight on each.
    test->gate_open_ = false;
    test->gate_calls_started_ = 0;
    std::vector<std::unique_ptr<http2::ClientConnection>> v2 =
        co_await ConnectionPerLoop(loop, test->port_, 2);
    EXPECT_EQ(v2.size(), 2u) << "connections did not reach both loops";
    if (v2.size() != 2) co_return;
    in_flight.Spawn(call_on_each(loop, v2, "/gate.S/M", replies));
    started = co_await PollUntil(loop, [&] { return test->gate_calls_started_.load() == 2; });
    EXPECT_TRUE(started);
    std::future<std::chrono::steady_clock::time_point> shut =
        test->StartShutdown(std::chrono::seconds(20));
    for (auto& connection : v2) {
      const Status unusable = co_await connection->WaitUntilUnusable();
      EXPECT_TRUE(unusable.ok());
    }
    // Both loops are draining and their calls still hold them: Shutdown()
    // cannot have returned.
    EXPECT_NE(shut.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    test->gate_open_ = true;
    co_await in_flight.Join();
    for (const StatusOr<std::string>& reply : replies) {
      EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    }
    EXPECT_EQ(shut.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    co_await close_all(v2);
  };
  client_loop_->BlockOn(run(this, name));
  // Shut down: nothing listens on the port any more.
  EXPECT_FALSE(Probe("127.0.0.1", port_).connected);
}

}  // namespace
}  // namespace uxds::testing
