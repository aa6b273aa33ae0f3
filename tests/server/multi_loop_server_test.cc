// uxds::Server on several loops (ServerOptions::loops): one port, a socket
// and a thread per loop; connections land on every loop, max_connections is
// one count for all of them, and Shutdown() drains every loop's calls in
// flight. Clients are uxds's own HTTP/2 client on the test thread's loop.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http2/client_connection.h"
#include "runtime/socket_address.h"
#include "support/owner_teardown.h"
#include "support/poll_until.h"
#include "uxds/loop.h"
#include "uxds/server.h"
#include "uxds/service_registry.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kSlowCall{300};

// What the handlers saw, from every loop.
struct HandlerCounts {
  std::atomic<int> started{0};
  std::atomic<int> cancelled{0};
  std::atomic<bool> gate_open{false};
};

// "/t.S/Thread" answers with the id of the thread that ran it; "/t.S/Slow"
// the same after kSlowCall, "/t.S/Gate" once gate_open is set; "/t.S/Hang"
// ends only when cancelled.
std::shared_ptr<ServiceRegistry> MakeRegistry(std::shared_ptr<HandlerCounts> counts) {
  auto registry = std::make_shared<ServiceRegistry>();
  registry->Register(
      "/t.S/Thread", MakeUnaryHandler([](ServerCall&, std::string) -> Task<StatusOr<std::string>> {
        co_return std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
      }));
  registry->Register(
      "/t.S/Slow",
      MakeUnaryHandler([counts](ServerCall& call, std::string) -> Task<StatusOr<std::string>> {
        ++counts->started;
        const Status slept = co_await SleepFor(call.loop(), kSlowCall);
        if (!slept.ok()) ++counts->cancelled;
        co_return std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
      }));
  registry->Register(
      "/t.S/Gate",
      MakeUnaryHandler([counts](ServerCall& call, std::string) -> Task<StatusOr<std::string>> {
        ++counts->started;
        while (!counts->gate_open.load()) {
          const Status slept = co_await SleepFor(call.loop(), milliseconds(1));
          if (!slept.ok()) {
            ++counts->cancelled;
            co_return slept;
          }
        }
        co_return std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
      }));
  // Runs as soon as the call's headers arrive, before any message.
  registry->Register("/t.S/Hang", [counts](ServerCall& call) -> Task<Status> {
    ++counts->started;
    const Status slept = co_await SleepFor(call.loop(), std::chrono::seconds(120));
    ++counts->cancelled;
    co_return slept.ok() ? InternalError("not cancelled") : slept;
  });
  return registry;
}

class MultiLoopServerTest : public ::testing::Test {
  // Public: the tests' coroutines reach the fixture through a pointer.
 public:
  void SetUp() override {
    auto server_thread = LoopThread::Start();
    ASSERT_TRUE(server_thread.ok()) << server_thread.status().ToString();
    server_thread_ = *std::move(server_thread);
    auto client_loop = Loop::Create();
    ASSERT_TRUE(client_loop.ok()) << client_loop.status().ToString();
    client_loop_ = *std::move(client_loop);
    counts_ = std::make_shared<HandlerCounts>();
  }
  void TearDown() override {
    ShutdownServer(milliseconds(0));
    server_thread_->RunSync([&] { serve_group_.reset(); });
    client_loop_.reset();
    server_thread_.reset();
  }

  // Listens on 127.0.0.1 (a free port) on `options.loops` loops and serves.
  void StartServer(ServerOptions options) {
    server_thread_->RunSync([&] {
      auto server =
          Server::Listen(server_thread_->loop(), "127.0.0.1:0", MakeRegistry(counts_), options);
      ASSERT_TRUE(server.ok()) << server.status().ToString();
      server_ = *std::move(server);
      serve_returned_ = std::make_shared<std::promise<void>>();
      serve_group_ = std::make_unique<TaskGroup>(server_thread_->loop());
      serve_group_->Spawn(
          [](Server& s, std::shared_ptr<std::promise<void>> returned) -> Task<void> {
            co_await s.Serve();
            returned->set_value();
          }(*server_, serve_returned_));
    });
    ASSERT_NE(server_, nullptr);
    address_ = SocketAddress::Loopback4(server_->port());
  }

  // Shutdown(grace) on the server's thread; returns once it has, and Serve()
  // too; then destroys the server.
  void ShutdownServer(milliseconds grace) {
    if (server_ == nullptr) return;
    std::future<void> done = StartShutdown(grace);
    ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    if (serve_returned_ != nullptr) {
      ASSERT_EQ(serve_returned_->get_future().wait_for(std::chrono::seconds(30)),
                std::future_status::ready);
    }
    server_thread_->RunSync([&] { server_.reset(); });
  }
  // Starts Shutdown(grace) on the server's thread; the future is ready
  // once it has returned.
  std::future<void> StartShutdown(milliseconds grace) {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> returned = done->get_future();
    server_thread_->RunSync([&] {
      server_thread_->loop().Spawn([](Server& s, milliseconds grace,
                                      std::shared_ptr<std::promise<void>> done) -> Task<void> {
        co_await s.Shutdown(grace);
        done->set_value();
      }(*server_, grace, done));
    });
    return returned;
  }

  // `n` connections, each making one call of `method` at the same time;
  // every reply (or error).
  std::vector<StatusOr<std::string>> CallsOnNewConnections(size_t n, const std::string& method,
                                                           milliseconds deadline) {
    return client_loop_->BlockOn(
        [](Loop& loop, SocketAddress address, size_t n, std::string method,
           milliseconds deadline) -> Task<std::vector<StatusOr<std::string>>> {
          std::vector<StatusOr<std::string>> replies(n, Status(StatusCode::kUnknown, "not run"));
          TaskGroup calls(loop);
          for (size_t i = 0; i < n; ++i) {
            calls.Spawn([](Loop& loop, SocketAddress address, std::string method,
                           milliseconds deadline, StatusOr<std::string>& out) -> Task<void> {
              auto connection = co_await http2::ClientConnection::Connect(
                  loop, address, http2::ClientConnectionOptions());
              if (!connection.ok()) {
                out = connection.status();
                co_return;
              }
              out = co_await http2::UnaryCall(**connection, method, "", {},
                                              Loop::Clock::now() + deadline);
              co_await (*connection)->Close();
            }(loop, address, method, deadline, replies[i]));
          }
          co_await calls.Join();
          co_return replies;
        }(*client_loop_, address_, n, method, deadline));
  }

  std::unique_ptr<LoopThread> server_thread_;
  std::unique_ptr<Loop> client_loop_;
  std::shared_ptr<HandlerCounts> counts_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<std::promise<void>> serve_returned_;
  std::unique_ptr<TaskGroup> serve_group_;  // on the server's thread
  SocketAddress address_;
};

TEST_F(MultiLoopServerTest, ServesOnEveryLoopFromOnePort) {
  ServerOptions options;
  options.loops = 2;
  StartServer(options);
  EXPECT_EQ(server_->loop_count(), 2u);
  // The kernel spreads connections over the two sockets by a hash of their
  // addresses: 32 connections all landing on one has probability 2^-31.
  const std::vector<StatusOr<std::string>> replies =
      CallsOnNewConnections(32, "/t.S/Thread", std::chrono::seconds(10));
  std::set<std::string> threads;
  for (const StatusOr<std::string>& reply : replies) {
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    threads.insert(*reply);
  }
  EXPECT_EQ(threads.size(), 2u);
}

TEST_F(MultiLoopServerTest, MaxConnectionsIsOneCountForEveryLoop) {
  ServerOptions options;
  options.loops = 2;
  options.max_connections = 3;
  StartServer(options);
  client_loop_->BlockOn([](MultiLoopServerTest* test) -> Task<void> {
    Loop& loop = *test->client_loop_;
    // Three connections hold a call each: every slot of the server is taken,
    // on whichever loops they landed.
    std::vector<std::unique_ptr<http2::ClientConnection>> held;
    std::vector<std::unique_ptr<http2::ClientCall>> calls;
    for (int i = 0; i < 3; ++i) {
      auto connection = co_await http2::ClientConnection::Connect(loop, test->address_,
                                                                  http2::ClientConnectionOptions());
      EXPECT_TRUE(connection.ok()) << connection.status().ToString();
      if (!connection.ok()) co_return;
      calls.push_back((*connection)->StartCall("/t.S/Hang"));
      held.push_back(*std::move(connection));
    }
    const bool all_held =
        co_await PollUntil(loop, [&] { return test->counts_->started.load() == 3; });
    EXPECT_TRUE(all_held);
    // More connections, spread over both loops, are all closed at accept:
    // neither loop has a slot of its own to give.
    for (int i = 0; i < 8; ++i) {
      auto extra = co_await http2::ClientConnection::Connect(loop, test->address_,
                                                             http2::ClientConnectionOptions());
      if (!extra.ok()) continue;  // refused before the preface: as good
      StatusOr<std::string> reply = co_await http2::UnaryCall(
          **extra, "/t.S/Thread", "", {}, Loop::Clock::now() + std::chrono::seconds(5));
      EXPECT_FALSE(reply.ok()) << "connection " << i << " was served over max_connections";
      co_await (*extra)->Close();
    }
    // The held connections go: their slots come back, whichever loop
    // takes the next connection.
    calls.clear();
    for (auto& connection : held) co_await connection->Close();
    held.clear();
    bool served = false;
    for (int attempt = 0; attempt < 200 && !served; ++attempt) {
      auto fresh = co_await http2::ClientConnection::Connect(loop, test->address_,
                                                             http2::ClientConnectionOptions());
      if (fresh.ok()) {
        served = (co_await http2::UnaryCall(**fresh, "/t.S/Thread", "", {},
                                            Loop::Clock::now() + std::chrono::seconds(5)))
                     .ok();
        co_await (*fresh)->Close();
      }
      if (!served) {
        const Status slept = co_await SleepFor(loop, milliseconds(10));
        (void)slept;
      }
    }
    EXPECT_TRUE(served);
  }(this));
}

TEST_F(MultiLoopServerTest, ShutdownDrainsCallsInFlightOnEveryLoop) {
  ServerOptions options;
  options.loops = 2;
  StartServer(options);
  constexpr int kConnections = 24;
  // Calls held by the gate on both loops; Shutdown() with a grace longer
  // than the test cannot return while they run, and every one of them
  // finishes OK once the gate opens.
  std::future<std::vector<StatusOr<std::string>>> replies = std::async(std::launch::async, [this] {
    return CallsOnNewConnections(kConnections, "/t.S/Gate", std::chrono::seconds(30));
  });
  for (int i = 0; i < 20'000 && counts_->started.load() < kConnections; ++i) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(counts_->started.load(), kConnections);
  std::future<void> shut = StartShutdown(std::chrono::seconds(30));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_NE(shut.wait_for(milliseconds(0)), std::future_status::ready)
      << "Shutdown() returned with calls in flight";
  counts_->gate_open = true;
  ASSERT_EQ(shut.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  std::set<std::string> threads;
  for (const StatusOr<std::string>& reply : replies.get()) {
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    threads.insert(*reply);
  }
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(counts_->cancelled.load(), 0);
  ShutdownServer(milliseconds(0));  // returns at once: the teardown has ended
}

// Serve() cancelled with no Shutdown(): every loop's connections end at
// once, and Serve() returns only after the other loops have stopped.
TEST_F(MultiLoopServerTest, CancellingServeEndsEveryLoop) {
  ServerOptions options;
  options.loops = 2;
  StartServer(options);
  std::future<std::vector<StatusOr<std::string>>> replies = std::async(std::launch::async, [this] {
    return CallsOnNewConnections(16, "/t.S/Hang", std::chrono::seconds(30));
  });
  for (int i = 0; i < 20'000 && counts_->started.load() < 16; ++i) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(counts_->started.load(), 16);
  server_thread_->RunSync([&] { serve_group_->Cancel(); });
  ASSERT_EQ(serve_returned_->get_future().wait_for(std::chrono::seconds(30)),
            std::future_status::ready);
  for (const StatusOr<std::string>& reply : replies.get()) EXPECT_FALSE(reply.ok());
  EXPECT_EQ(counts_->cancelled.load(), 16);
  // Serve() has returned: a Shutdown() now returns at once.
  serve_returned_ = nullptr;
  ShutdownServer(milliseconds(0));
}

// Shutdown() before Serve(): the other loops' servers never served and
// still go on their own loops; a Serve() afterwards returns at once.
TEST_F(MultiLoopServerTest, ShutdownBeforeServe) {
  server_thread_->RunSync([&] {
    ServerOptions options;
    options.loops = 3;
    auto server =
        Server::Listen(server_thread_->loop(), "127.0.0.1:0", MakeRegistry(counts_), options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = *std::move(server);
  });
  ASSERT_NE(server_, nullptr);
  EXPECT_EQ(server_->loop_count(), 3u);
  std::future<void> shut = StartShutdown(milliseconds(0));
  ASSERT_EQ(shut.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  auto served = std::make_shared<std::promise<void>>();
  std::future<void> serve_returned = served->get_future();
  server_thread_->RunSync([&] {
    server_thread_->loop().Spawn(
        [](Server& s, std::shared_ptr<std::promise<void>> served) -> Task<void> {
          co_await s.Serve();
          served->set_value();
        }(*server_, served));
  });
  ASSERT_EQ(serve_returned.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(server_->loop_count(), 3u);
  server_thread_->RunSync([&] { server_.reset(); });
}

TEST_F(MultiLoopServerTest, TooManyLoopsIsAClearError) {
  server_thread_->RunSync([&] {
    ServerOptions options;
    options.loops = 100'000;
    auto server =
        Server::Listen(server_thread_->loop(), "127.0.0.1:0", MakeRegistry(counts_), options);
    ASSERT_FALSE(server.ok());
    EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(server.status().message().find("ServerOptions.loops"), std::string::npos)
        << server.status().ToString();
  });
}

TEST_F(MultiLoopServerTest, ShutdownAwaitedTwiceMayBeDestroyedByTheFirstToReturn) {
  ServerOptions options;
  options.loops = 2;
  StartServer(options);
  // Calls that never end on their own, on both loops; the one teardown's
  // short grace cancels them all.
  std::future<std::vector<StatusOr<std::string>>> replies = std::async(std::launch::async, [this] {
    return CallsOnNewConnections(16, "/t.S/Hang", std::chrono::seconds(20));
  });
  for (int i = 0; i < 20'000 && counts_->started.load() < 16; ++i) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(counts_->started.load(), 16);
  std::promise<TwoTeardownCallers> result;
  server_thread_->RunSync([&] {
    server_thread_->loop().Spawn([](Loop& loop, std::unique_ptr<Server>& server,
                                    std::promise<TwoTeardownCallers>& out) -> Task<void> {
      out.set_value(co_await AwaitTeardownTwiceAndDestroy(
          loop, server, [](Server& s) { return s.Shutdown(milliseconds(20)); }));
    }(server_thread_->loop(), server_, result));
  });
  std::future<TwoTeardownCallers> returned = result.get_future();
  ASSERT_EQ(returned.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const TwoTeardownCallers callers = returned.get();
  EXPECT_TRUE(callers.destroyed_by_first);
  EXPECT_EQ(callers.returned, 2);
  server_thread_->RunSync([&] { EXPECT_EQ(server_, nullptr); });
  ASSERT_EQ(serve_returned_->get_future().wait_for(std::chrono::seconds(30)),
            std::future_status::ready);
  for (const StatusOr<std::string>& reply : replies.get()) {
    EXPECT_FALSE(reply.ok());
  }
  EXPECT_EQ(counts_->cancelled.load(), 16);
}

}  // namespace
}  // namespace uxds::testing
