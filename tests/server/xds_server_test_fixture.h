// The XdsServer tests' world: the fake control plane (grpcio) on loopback,
// an XdsClientPool and XdsServer on a control LoopThread, and clients on the
// test thread: uxds's own HTTP/2 client, raw sockets that count what the
// server sends, and grpcio peers.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "http2/client_connection.h"
#include "http2/service_registry.h"
#include "support/fake_control_plane.h"
#include "support/xds_test_resources.h"
#include "uxds/loop.h"
#include "uxds/server.h"
#include "uxds/xds_client_pool.h"
#include "xds_server_resources.h"

namespace uxds::testing {

// What a raw TCP client saw of the server.
struct ConnectionProbe {
  bool connected = false;
  size_t bytes_received = 0;
  bool closed_by_server = false;  // EOF or reset
};

class XdsServerTest : public ::testing::Test {
  // Public: the tests' coroutines reach the fixture through a pointer.
 public:
  static constexpr char kTemplate[] = "grpc/server?xds.resource.listening_address=%s";

  void SetUp() override;
  void TearDown() override;

  static std::string ListenerNameFor(const std::string& listening_address);
  // A TCP port free on every local address now.
  static uint16_t FreePort();

  // Creates the pool (fail_on_data_errors as given) and the server on
  // `listening_address`, and starts it. `options` gets the pool and the
  // status callback filled in.
  void StartServer(const std::string& listening_address, XdsServerOptions options = {},
                   bool fail_on_data_errors = false);
  // The status of XdsServer::Create on the control thread (not kept).
  Status TryCreate(const std::string& listening_address, Bootstrap bootstrap,
                   XdsServerOptions options = {});
  void ShutdownServer();
  // Starts XdsServer::Shutdown(grace) on the control thread; the future
  // gets the time it returned.
  std::future<std::chrono::steady_clock::time_point> StartShutdown(std::chrono::milliseconds grace);

  // The control plane's whole LDS / RDS state (one resource each).
  void SetListener(const ServerListenerSpec& spec, const std::string& version);
  void SetRouteConfig(const std::string& name, const ServerRoutes& routes,
                      const std::string& version);

  // The next serving-status update for which `match` holds (earlier ones are
  // consumed); nullopt after `timeout`.
  std::optional<Status> WaitForStatus(std::function<bool(const Status&)> match,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(20));
  std::optional<Status> WaitForServing() {
    return WaitForStatus([](const Status& s) { return s.ok(); });
  }

  // One unary call on a new connection to ip:port (what the fallback
  // handler answers: the method name), made with `options` (TLS).
  StatusOr<std::string> Call(const std::string& ip, const std::string& method);
  StatusOr<std::string> Call(const std::string& ip, const std::string& method,
                             http2::ClientConnectionOptions options);
  // Connects (from `source_port` if set), sends nothing, and reads for up
  // to `wait`.
  static ConnectionProbe Probe(const std::string& ip, uint16_t port,
                               std::optional<uint16_t> source_port = std::nullopt,
                               std::chrono::milliseconds wait = std::chrono::milliseconds(1500));

  // The application's methods: grpc.testing.TestService, and for every other
  // path a unary echo of the method name; "/slow.*" methods answer after
  // kSlowCall, "/hang.*" methods after kHangCall (unless cancelled first),
  // "/thread.*" methods with the id of the thread that ran them, "/gate.*"
  // methods once gate_open_ is set (counting in gate_calls_started_).
  static constexpr std::chrono::milliseconds kSlowCall{600};
  static constexpr std::chrono::milliseconds kHangCall{120'000};
  std::shared_ptr<http2::ServiceRegistry> MakeRegistry();

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<LoopThread> control_;
  std::unique_ptr<Loop> client_loop_;  // the test thread's
  uint16_t port_ = 0;
  std::shared_ptr<XdsClientPool> pool_;
  std::unique_ptr<XdsServer> server_;
  // Changes the bootstrap of the pool StartServer() makes.
  std::function<void(Bootstrap&)> customize_bootstrap_;

  // The serving loops of the server StartServer() made.
  size_t serving_loops_ = 1;
  std::atomic<bool> gate_open_{false};
  std::atomic<int> gate_calls_started_{0};

  std::mutex mutex_;
  std::condition_variable status_changed_;
  std::deque<Status> statuses_;
};

}  // namespace uxds::testing
