// Subchannels against real endpoints on loopback: states, gRPC connection
// backoff with sticky TRANSIENT_FAILURE, one per address, requests from
// other threads.
#include "lb/subchannel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "lb/lb_test_util.h"

namespace uxds {
namespace {

using lb_testing::Backend;
using lb_testing::WaitForState;

class SubchannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    pool_ = SubchannelPool::Create(*loop_, lb_testing::FastSubchannelOptions());
  }
  void TearDown() override {
    loop_->BlockOn(pool_->Shutdown());
    pool_.reset();
  }

  std::unique_ptr<Loop> loop_;
  std::shared_ptr<SubchannelPool> pool_;
};

TEST_F(SubchannelTest, StartsIdleAndConnectsOnlyWhenAsked) {
  Backend backend(*loop_);
  ASSERT_TRUE(backend.Start().ok());
  loop_->BlockOn([&]() -> Task<void> {
    SubchannelRef s = pool_->Get(backend.address());
    EXPECT_EQ(s->state(), ConnectivityState::kIdle);
    (void)co_await SleepFor(*loop_, std::chrono::milliseconds(50));
    EXPECT_EQ(s->state(), ConnectivityState::kIdle);  // nobody asked
    EXPECT_EQ(s->connection_attempts(), 0u);
    std::vector<ConnectivityState> seen;
    s->AddWatcher([&seen](ConnectivityState st, const Status&) { seen.push_back(st); });
    s->RequestConnection();
    const bool ready = co_await WaitForState(*loop_, s.get(), ConnectivityState::kReady);
    EXPECT_TRUE(ready);
    EXPECT_NE(s->connection(), nullptr);
    EXPECT_EQ(seen, (std::vector<ConnectivityState>{ConnectivityState::kConnecting,
                                                    ConnectivityState::kReady}));
    EXPECT_EQ(s->address(), backend.address_text());
    EXPECT_EQ(s->endpoint().subchannel, s.get());
    co_await backend.Stop();
  }());
}

TEST_F(SubchannelTest, OnePerAddressSharedByEveryUser) {
  const SocketAddress a = SocketAddress::Loopback4(1);
  const SocketAddress b = SocketAddress::Loopback4(2);
  {
    SubchannelRef first = pool_->Get(a);
    SubchannelRef second = pool_->Get(a);
    SubchannelRef other = pool_->Get(b);
    EXPECT_EQ(first.get(), second.get());
    EXPECT_NE(first.get(), other.get());
    EXPECT_EQ(pool_->size(), 2u);
  }
  // The last reference shuts a subchannel down.
  EXPECT_EQ(pool_->size(), 0u);
}

// A call on the control loop holds its subchannel and a CallHold on the
// pool: the pool outlives the call's reference even when every owner of
// the pool has let go first (ASan sees a use after the free).
TEST_F(SubchannelTest, ACallsHoldKeepsThePoolUntilItsSubchannelIsReleased) {
  SubchannelPool::CallHold hold(pool_.get());
  SubchannelRef subchannel = pool_->Get(SocketAddress::Loopback4(1));
  loop_->BlockOn(pool_->Shutdown());
  std::weak_ptr<SubchannelPool> weak = pool_;
  pool_.reset();
  EXPECT_TRUE(weak.expired());        // no owner is left; the hold keeps the pool
  subchannel = SubchannelRef();       // releases into the pool: still there
  hold = SubchannelPool::CallHold();  // and now the pool goes
  // TearDown() shuts down a pool of its own.
  pool_ = SubchannelPool::Create(*loop_, lb_testing::FastSubchannelOptions());
}

// Endpoint::index: unique among live subchannels, the smallest free one
// taken, so pickers can keep per-endpoint arrays; Find() sees live ones.
TEST_F(SubchannelTest, EndpointIndicesAreDenseAndReused) {
  SubchannelRef s0 = pool_->Get(SocketAddress::Loopback4(1));
  SubchannelRef s1 = pool_->Get(SocketAddress::Loopback4(2));
  SubchannelRef s2 = pool_->Get(SocketAddress::Loopback4(3));
  EXPECT_EQ(s0->endpoint().index, 0u);
  EXPECT_EQ(s1->endpoint().index, 1u);
  EXPECT_EQ(s2->endpoint().index, 2u);
  EXPECT_EQ(pool_->Find(s1->address()), s1.get());
  const std::string released = s1->address();
  s1 = SubchannelRef();
  EXPECT_EQ(pool_->Find(released), nullptr);
  SubchannelRef s3 = pool_->Get(SocketAddress::Loopback4(4));
  EXPECT_EQ(s3->endpoint().index, 1u);
  SubchannelRef s4 = pool_->Get(SocketAddress::Loopback4(5));
  EXPECT_EQ(s4->endpoint().index, 3u);
}

TEST_F(SubchannelTest, RefusedConnectionIsStickyTransientFailureAndRetriesWithBackoff) {
  const SocketAddress refused = lb_testing::RefusedAddress();
  loop_->BlockOn([&]() -> Task<void> {
    SubchannelRef s = pool_->Get(refused);
    std::vector<ConnectivityState> seen;
    s->AddWatcher([&seen](ConnectivityState st, const Status&) { seen.push_back(st); });
    s->RequestConnection();
    const bool failed =
        co_await WaitForState(*loop_, s.get(), ConnectivityState::kTransientFailure);
    EXPECT_TRUE(failed);
    EXPECT_EQ(s->last_failure().code(), StatusCode::kUnavailable) << s->last_failure().ToString();
    // It keeps trying after each backoff (100 ms, 160 ms, 256 ms, 300 ms ...)
    // without leaving TRANSIENT_FAILURE in between.
    const bool retried = co_await lb_testing::WaitUntil(
        *loop_, [&] { return s->connection_attempts() >= 4; }, std::chrono::seconds(10));
    EXPECT_TRUE(retried);
    EXPECT_EQ(seen, (std::vector<ConnectivityState>{ConnectivityState::kConnecting,
                                                    ConnectivityState::kTransientFailure}));
  }());
}

TEST_F(SubchannelTest, RecoversWhenTheServerComesBackAndGoesIdleWhenItLeaves) {
  Backend backend(*loop_);
  ASSERT_TRUE(backend.Start().ok());
  loop_->BlockOn([&]() -> Task<void> {
    co_await backend.Stop();  // the port is known now, and closed
    SubchannelRef s = pool_->Get(backend.address());
    s->RequestConnection();
    const bool failed =
        co_await WaitForState(*loop_, s.get(), ConnectivityState::kTransientFailure);
    EXPECT_TRUE(failed);
    EXPECT_TRUE(backend.Start().ok());
    const bool ready = co_await WaitForState(*loop_, s.get(), ConnectivityState::kReady);
    EXPECT_TRUE(ready);
    // A lost connection makes the subchannel IDLE (gRPC), not failed.
    co_await backend.Stop();
    const bool idle = co_await WaitForState(*loop_, s.get(), ConnectivityState::kIdle);
    EXPECT_TRUE(idle);
    EXPECT_EQ(s->connection(), nullptr);
  }());
}

TEST_F(SubchannelTest, GoawayMakesItIdleAtOnceWhileCallsInFlightFinish) {
  Backend backend(*loop_);
  ASSERT_TRUE(backend.Start().ok());
  loop_->BlockOn([&]() -> Task<void> {
    SubchannelRef s = pool_->Get(backend.address());
    s->RequestConnection();
    const bool ready = co_await WaitForState(*loop_, s.get(), ConnectivityState::kReady);
    CO_ASSERT_TRUE(ready);
    std::unique_ptr<http2::ClientCall> call = s->connection()->StartCall("/test.Echo/Hold");
    const Status written = co_await call->WritesDone();
    EXPECT_TRUE(written.ok()) << written.ToString();
    const bool started = co_await lb_testing::WaitUntil(
        *loop_, [&] { return backend.probe().handlers_started == 1; });
    CO_ASSERT_TRUE(started);
    // The server drains: GOAWAY now, the held call may finish within 10 s.
    TaskGroup stopping(*loop_);
    stopping.Spawn(backend.Stop(std::chrono::seconds(10)));
    const bool idle = co_await WaitForState(*loop_, s.get(), ConnectivityState::kIdle);
    EXPECT_TRUE(idle);
    EXPECT_TRUE(backend.running());  // still draining
    // The call in flight on the old connection still completes.
    backend.probe().release.Set();
    const Status finished = co_await call->Finish();
    EXPECT_TRUE(finished.ok()) << finished.ToString();
    co_await stopping.Join();
  }());
}

// A server that drains every connection as it is made, as an xDS-enabled
// server does to one accepted under an older Listener (A36): its SETTINGS
// and a GOAWAY(NO_ERROR, last stream 0) in one write, then it closes, or,
// as a hostile server may, keeps the connection open for good.
class DrainingAtOnceServer {
 public:
  enum class AfterGoaway { kClose, kKeepOpen };
  explicit DrainingAtOnceServer(AfterGoaway after = AfterGoaway::kClose) : after_(after) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listen_fd_, 64), 0);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~DrainingAtOnceServer() {
    shutdown(listen_fd_, SHUT_RDWR);  // ends the accept
    thread_.join();
    close(listen_fd_);
    for (int fd : kept_) close(fd);
  }
  SocketAddress address() const { return SocketAddress::Loopback4(port_); }
  int accepted() const { return accepted_.load(); }
  // Kept connections the client has closed (its FIN read), and all kept.
  std::pair<int, int> KeptClosedByClient() {
    std::lock_guard lock(mu_);
    int closed = 0;
    for (int fd : kept_) {
      pollfd p{fd, POLLIN, 0};
      char byte;
      if (poll(&p, 1, 0) > 0 && recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) ++closed;
    }
    return {closed, static_cast<int>(kept_.size())};
  }

 private:
  void Run() {
    static constexpr unsigned char kSettingsThenGoaway[] = {
        0, 0, 0, 0x04, 0, 0, 0, 0, 0,                         // SETTINGS, empty
        0, 0, 8, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0  // GOAWAY(0, NO_ERROR)
    };
    while (true) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      ++accepted_;
      // The client's preface first (nothing of it left unread, so the
      // close below is a FIN, not a reset), then SETTINGS, GOAWAY and the
      // close together: the client reads all three in one go.
      pollfd p{fd, POLLIN, 0};
      char buffer[4096];
      if (poll(&p, 1, 2000) > 0) (void)!read(fd, buffer, sizeof buffer);
      (void)!write(fd, kSettingsThenGoaway, sizeof kSettingsThenGoaway);
      if (after_ == AfterGoaway::kClose) {
        close(fd);
      } else {
        std::lock_guard lock(mu_);
        kept_.push_back(fd);
      }
    }
  }

  const AfterGoaway after_;
  std::mutex mu_;
  std::vector<int> kept_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// A36 drains a connection in its handshake too. The attempt succeeded (the
// server's SETTINGS came): the subchannel goes IDLE, never READY and never
// TRANSIENT_FAILURE, and is asked again without a backoff. Before, each
// such attempt was a failure: TRANSIENT_FAILURE for a whole backoff (1 s by
// default), and every call of a round_robin channel to that server failed
// meanwhile.
TEST_F(SubchannelTest, AConnectionDrainedAsItIsMadeIsLostNotFailed) {
  DrainingAtOnceServer server;
  SubchannelOptions options = lb_testing::FastSubchannelOptions();
  options.initial_backoff = std::chrono::seconds(30);  // a failure would stall the test
  options.max_backoff = std::chrono::seconds(30);
  auto pool = SubchannelPool::Create(*loop_, options);
  loop_->BlockOn([&]() -> Task<void> {
    SubchannelRef s = pool->Get(server.address());
    std::vector<ConnectivityState> seen;
    s->AddWatcher([&](ConnectivityState st, const Status&) {
      seen.push_back(st);
      if (st == ConnectivityState::kIdle) s->RequestConnection();  // as round_robin does
    });
    s->RequestConnection();
    const bool retried = co_await lb_testing::WaitUntil(
        *loop_, [&] { return s->connection_attempts() >= 3; }, std::chrono::milliseconds(5000));
    EXPECT_TRUE(retried) << s->connection_attempts() << " attempts";
    for (ConnectivityState st : seen) {
      EXPECT_NE(st, ConnectivityState::kReady);
      EXPECT_NE(st, ConnectivityState::kTransientFailure);
    }
  }());
  loop_->BlockOn(pool->Shutdown());
  // The third attempt began after the first two were drained; the server
  // may not have counted the third yet.
  EXPECT_GE(server.accepted(), 2);
}

// A server that drains each connection but never closes one cannot make
// the client pile connections up: a drained connection with no calls is
// closed by the client once its GOAWAY is read (nghttp2 wants nothing more
// of it), so at most the newest one is open.
TEST_F(SubchannelTest, ADrainedConnectionWithNoCallsIsClosedByTheClient) {
  DrainingAtOnceServer server(DrainingAtOnceServer::AfterGoaway::kKeepOpen);
  auto pool = SubchannelPool::Create(*loop_, lb_testing::FastSubchannelOptions());
  loop_->BlockOn([&]() -> Task<void> {
    SubchannelRef s = pool->Get(server.address());
    s->AddWatcher([&](ConnectivityState st, const Status&) {
      if (st == ConnectivityState::kIdle) s->RequestConnection();
    });
    s->RequestConnection();
    const bool retried = co_await lb_testing::WaitUntil(
        *loop_, [&] { return s->connection_attempts() >= 6; }, std::chrono::milliseconds(5000));
    EXPECT_TRUE(retried) << s->connection_attempts() << " attempts";
    const bool closed = co_await lb_testing::WaitUntil(
        *loop_,
        [&] {
          auto [closed, kept] = server.KeptClosedByClient();
          return kept >= 5 && closed >= kept - 1;
        },
        std::chrono::milliseconds(5000));
    auto [closed_count, kept] = server.KeptClosedByClient();
    EXPECT_TRUE(closed) << closed_count << " of " << kept << " closed by the client";
  }());
  loop_->BlockOn(pool->Shutdown());
}

TEST_F(SubchannelTest, ConnectTimeoutIsAtLeastTheMinimum) {
  lb_testing::Blackhole blackhole;
  SubchannelOptions options = lb_testing::FastSubchannelOptions();
  options.min_connect_timeout = std::chrono::milliseconds(300);
  auto pool = SubchannelPool::Create(*loop_, options);
  loop_->BlockOn([&]() -> Task<void> {
    SubchannelRef s = pool->Get(blackhole.address());
    s->RequestConnection();
    const bool connecting = co_await WaitForState(*loop_, s.get(), ConnectivityState::kConnecting);
    EXPECT_TRUE(connecting);
    (void)co_await SleepFor(*loop_, std::chrono::milliseconds(150));
    EXPECT_EQ(s->state(), ConnectivityState::kConnecting);  // still within 300 ms
    const bool failed =
        co_await WaitForState(*loop_, s.get(), ConnectivityState::kTransientFailure);
    EXPECT_TRUE(failed);
    EXPECT_EQ(s->last_failure().code(), StatusCode::kDeadlineExceeded)
        << s->last_failure().ToString();
    s = SubchannelRef();
    co_await pool->Shutdown();
  }());
}

TEST_F(SubchannelTest, ConnectionRequestFromAnotherThread) {
  Backend backend(*loop_);
  ASSERT_TRUE(backend.Start().ok());
  loop_->BlockOn([&]() -> Task<void> {
    SubchannelRef s = pool_->Get(backend.address());
    Subchannel* raw = s.get();
    // Several threads ask at once; one connection attempt results.
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([raw] {
        for (int j = 0; j < 100; ++j) raw->RequestConnectionFromAnyThread();
      });
    }
    for (auto& t : threads) t.join();
    const bool ready = co_await WaitForState(*loop_, raw, ConnectivityState::kReady);
    EXPECT_TRUE(ready);
    EXPECT_EQ(raw->connection_attempts(), 1u);
    co_await backend.Stop();
  }());
}

}  // namespace
}  // namespace uxds
