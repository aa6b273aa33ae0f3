#include "xds_server_test_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <thread>
#include <utility>

#include "test_service/test_service.h"

namespace uxds::testing {

using std::chrono::milliseconds;

void XdsServerTest::SetUp() {
  cp_ = FakeControlPlane::Start();
  ASSERT_NE(cp_, nullptr);
  auto control = LoopThread::Start();
  ASSERT_TRUE(control.ok()) << control.status().ToString();
  control_ = *std::move(control);
  auto client_loop = Loop::Create();
  ASSERT_TRUE(client_loop.ok()) << client_loop.status().ToString();
  client_loop_ = *std::move(client_loop);
  port_ = FreePort();
}

void XdsServerTest::TearDown() {
  ShutdownServer();
  if (control_ != nullptr) control_->RunSync([&] { pool_.reset(); });
  control_.reset();
}

void XdsServerTest::ShutdownServer() {
  if (server_ == nullptr) return;
  std::promise<void> done;
  control_->RunSync([&] {
    auto shutdown = [](XdsServer* server, std::promise<void>* done) -> Task<void> {
      co_await server->Shutdown(milliseconds(100));
      done->set_value();
    };
    control_->loop().Spawn(shutdown(server_.get(), &done));
  });
  done.get_future().wait();
  control_->RunSync([&] { server_.reset(); });
}

std::future<std::chrono::steady_clock::time_point> XdsServerTest::StartShutdown(
    milliseconds grace) {
  auto done = std::make_shared<std::promise<std::chrono::steady_clock::time_point>>();
  std::future<std::chrono::steady_clock::time_point> returned = done->get_future();
  control_->RunSync([&] {
    auto shutdown = [](XdsServer* server, milliseconds grace,
                       std::shared_ptr<std::promise<std::chrono::steady_clock::time_point>> done)
        -> Task<void> {
      co_await server->Shutdown(grace);
      done->set_value(std::chrono::steady_clock::now());
    };
    control_->loop().Spawn(shutdown(server_.get(), grace, done));
  });
  return returned;
}

std::string XdsServerTest::ListenerNameFor(const std::string& listening_address) {
  return ExpandListenerResourceNameTemplate(kTemplate, listening_address);
}

uint16_t XdsServerTest::FreePort() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_any;
  socklen_t size = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    ADD_FAILURE() << "no free port: " << std::strerror(errno);
  }
  ::close(fd);
  return ntohs(address.sin6_port);
}

std::shared_ptr<http2::ServiceRegistry> XdsServerTest::MakeRegistry() {
  auto registry = std::make_shared<http2::ServiceRegistry>();
  test_service::RegisterTestService(*registry, "xds-server");
  registry->SetFallbackHandler(http2::MakeUnaryHandler(
      [this](http2::ServerCall& call, std::string) -> Task<StatusOr<std::string>> {
        if (call.method().starts_with("/gate.")) {
          ++gate_calls_started_;
          while (!gate_open_.load()) {
            const Status slept = co_await SleepFor(call.loop(), milliseconds(1));
            if (!slept.ok()) co_return slept;
          }
          co_return call.method();
        }
        if (call.method().starts_with("/thread.")) {
          co_return std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
        }
        if (call.method().starts_with("/slow.") || call.method().starts_with("/hang.")) {
          const Status slept = co_await SleepFor(
              call.loop(), call.method().starts_with("/slow.") ? kSlowCall : kHangCall);
          if (!slept.ok()) co_return slept;
        }
        co_return call.method();
      }));
  return registry;
}

void XdsServerTest::StartServer(const std::string& listening_address, XdsServerOptions options,
                                bool fail_on_data_errors) {
  // The suites run again with every server on more loops.
  if (const char* loops = std::getenv("UXDS_TEST_SERVING_LOOPS");
      loops != nullptr && options.serving_loops == XdsServerOptions{}.serving_loops) {
    char* end = nullptr;
    const unsigned long count = std::strtoul(loops, &end, 10);
    ASSERT_TRUE(*loops != '\0' && *end == '\0' && count >= 1)
        << "UXDS_TEST_SERVING_LOOPS=" << loops << ": not a loop count";
    options.serving_loops = count;
  }
  serving_loops_ = options.serving_loops;
  control_->RunSync([&] {
    Bootstrap bootstrap;
    XdsServerConfig server;
    server.server_uri = cp_->target();
    server.fail_on_data_errors = fail_on_data_errors;
    bootstrap.xds_servers.push_back(server);
    bootstrap.node.id = "xds-server-test";
    bootstrap.server_listener_resource_name_template = kTemplate;
    if (customize_bootstrap_) customize_bootstrap_(bootstrap);
    XdsClientOptions client_options;
    client_options.resource_does_not_exist_timeout = milliseconds(500);
    auto pool = XdsClientPool::Create(control_->loop(), bootstrap, client_options);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = *std::move(pool);
    options.xds_client_pool = pool_;
    options.serving_status = [this](std::string_view, const Status& status) {
      std::lock_guard<std::mutex> lock(mutex_);
      statuses_.push_back(status);
      status_changed_.notify_all();
    };
    auto created = XdsServer::Create(listening_address, MakeRegistry(), std::move(options));
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    server_ = *std::move(created);
    server_->Start();
  });
}

Status XdsServerTest::TryCreate(const std::string& listening_address, Bootstrap bootstrap,
                                XdsServerOptions options) {
  Status result;
  control_->RunSync([&] {
    auto pool = XdsClientPool::Create(control_->loop(), std::move(bootstrap));
    if (!pool.ok()) {
      result = pool.status();
      return;
    }
    options.xds_client_pool = *pool;
    auto created = XdsServer::Create(listening_address, MakeRegistry(), options);
    result = created.status();
    if (created.ok()) {
      // Never started: nothing runs on its loop, so it ends at once.
      auto shutdown = [](std::unique_ptr<XdsServer> server) -> Task<void> {
        co_await server->Shutdown();
      };
      control_->loop().Spawn(shutdown(*std::move(created)));
    }
  });
  return result;
}

void XdsServerTest::SetListener(const ServerListenerSpec& spec, const std::string& version) {
  ASSERT_TRUE(cp_->SetResources(kLdsType, {{spec.name, ServerListener(spec)}}, version));
}

void XdsServerTest::SetRouteConfig(const std::string& name, const ServerRoutes& routes,
                                   const std::string& version) {
  ASSERT_TRUE(cp_->SetResources(kRdsType, {{name, ServerRouteConfig(name, routes)}}, version));
}

std::optional<Status> XdsServerTest::WaitForStatus(std::function<bool(const Status&)> match,
                                                   milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    while (!statuses_.empty()) {
      Status status = std::move(statuses_.front());
      statuses_.pop_front();
      if (match(status)) return status;
    }
    if (status_changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
        statuses_.empty()) {
      return std::nullopt;
    }
  }
}

StatusOr<std::string> XdsServerTest::Call(const std::string& ip, const std::string& method) {
  return Call(ip, method, http2::ClientConnectionOptions());
}

StatusOr<std::string> XdsServerTest::Call(const std::string& ip, const std::string& method,
                                          http2::ClientConnectionOptions options) {
  auto address = SocketAddress::FromIpAndPort(ip, port_);
  if (!address.ok()) return address.status();
  options.connect_timeout = milliseconds(5000);
  auto call = [](Loop& loop, SocketAddress address, std::string method,
                 http2::ClientConnectionOptions options) -> Task<StatusOr<std::string>> {
    auto connection = co_await http2::ClientConnection::Connect(loop, address, options);
    if (!connection.ok()) co_return connection.status();
    StatusOr<std::string> reply = co_await http2::UnaryCall(
        **connection, method, "", {}, Loop::Clock::now() + std::chrono::seconds(10));
    co_await (*connection)->Close();
    co_return reply;
  };
  return client_loop_->BlockOn(call(*client_loop_, *address, method, std::move(options)));
}

ConnectionProbe XdsServerTest::Probe(const std::string& ip, uint16_t port,
                                     std::optional<uint16_t> source_port, milliseconds wait) {
  ConnectionProbe probe;
  auto address = SocketAddress::FromIpAndPort(ip, port);
  if (!address.ok()) {
    ADD_FAILURE() << address.status().ToString();
    return probe;
  }
  const int fd = ::socket(address->family(), SOCK_STREAM, 0);
  if (source_port.has_value()) {
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    auto local = SocketAddress::FromIpAndPort(ip, *source_port);
    if (::bind(fd, local->sockaddr_ptr(), local->size()) != 0) {
      ADD_FAILURE() << "bind to source port " << *source_port << ": " << std::strerror(errno);
    }
  }
  if (::connect(fd, address->sockaddr_ptr(), address->size()) != 0) {
    ::close(fd);
    return probe;
  }
  probe.connected = true;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      probe.closed_by_server = true;
      break;
    }
    probe.bytes_received += static_cast<size_t>(n);
  }
  ::close(fd);
  return probe;
}

}  // namespace uxds::testing
