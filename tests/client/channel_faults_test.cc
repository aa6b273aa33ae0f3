// Faults a Channel meets end to end on loopback (#26): a Cluster that asks
// for the largest ring A42 allows, a control plane that turns bad, and a
// backend that resets every connection. Each is bounded: by memory, by connection attempts, by the
// calls' deadlines.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>

#include "channel_fixture.h"
#include "test_service/test_service.h"
#include "uxds/client_channel.h"

namespace uxds::testing {
namespace {

class ChannelFaultsTest : public ChannelFixture {
 protected:
  // Every call succeeds through the channel while it has a config to go by.
  void ExpectCallsSucceed(const char* what) {
    for (int i = 0; i < 20; ++i) {
      auto reply = Call(test_service::kUnaryCall);
      ASSERT_TRUE(reply.ok()) << what << ": " << reply.status().ToString();
    }
  }
};

// This process's resident set, in KiB (VmRSS).
int64_t ResidentKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6));
  }
  return -1;
}

// A42: ring sizes up to 8M are valid, and a client caps them locally
// (ChannelOptions::ring_size_cap, 4096 by default, as gRPC's
// GRPC_ARG_RING_HASH_LB_RING_SIZE_CAP). A Cluster asking for 8M entries
// over three endpoints gets a 4096-entry ring: an 8M ring would take
// hundreds of MiB (16 bytes an entry before any index).
TEST_F(ChannelFaultsTest, AClusterAskingForAn8MRingIsHeldToTheLocalCap) {
  constexpr uint64_t kEightM = 8 * 1024 * 1024;
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "ring", "x-user"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"ring", RingHashCluster("ring", "s-ring", kEightM, kEightM)}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-ring", EndpointsAt("s-ring", addresses_)}}, "1"));
  const int64_t before = ResidentKib();
  CreateChannel("xds:///svc");
  for (int user = 0; user < 30; ++user) {
    CallOptions options;
    options.metadata = {{"x-user", "user-" + std::to_string(user)}};
    options.wait_for_ready = true;  // A42: the first pick of an IDLE endpoint queues
    auto reply = Call(test_service::kEmptyCall, options);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  }
  const int64_t grown_kib = ResidentKib() - before;
  std::cout << "resident set grew by " << grown_kib << " KiB\n";
  // Far above a 4096-entry ring and its pickers, far below an 8M ring.
  EXPECT_LT(grown_kib, 32 * 1024);
}

// A control plane that turns bad after a good config: an invalid Cluster
// (NACKed), a TP3 error for the endpoints, a message that is no
// DiscoveryResponse, a response over the 4 MiB limit, then a hang. A88:
// the client keeps what it has, so every call still succeeds; once the
// control plane is reachable and sane again, its next change reaches the
// channel.
TEST_F(ChannelFaultsTest, AControlPlaneThatTurnsBadLeavesTheCallsWorking) {
  ASSERT_TRUE(
      cp_->SetResources(kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "c"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"c", ValidCluster("c", "s-c")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s-c", EndpointsAt("s-c", {addresses_[0], addresses_[1]})}}, "1"));
  CreateChannel("xds:///svc");
  ExpectCallsSucceed("good config");
  constexpr auto kWait = std::chrono::seconds(10);
  ASSERT_TRUE(cp_->WaitForStreamOpened(kWait));  // the client's first stream

  ScriptedResponse invalid;
  invalid.type_url = kCdsType;
  invalid.version_info = "bad-1";
  invalid.resources = {InvalidCluster("c")};
  const std::string nonce = cp_->SendResponse(invalid);
  ASSERT_FALSE(nonce.empty());
  ASSERT_TRUE(cp_->NextRequestMatching(kWait, [&](const ObservedRequest& r) {
    return r.response_nonce == nonce && r.error_detail.has_value();
  }));
  ExpectCallsSucceed("after a NACKed Cluster");

  ASSERT_TRUE(cp_->SetResources(kEdsType, {}, "2", {{"s-c", 5, "endpoints withdrawn"}}));
  ASSERT_TRUE(cp_->NextRequestMatching(kWait, [](const ObservedRequest& r) {
    return r.type_url == kEdsType && r.version_info == "2";
  }));
  ExpectCallsSucceed("after a TP3 error for the endpoints");

  // NOTES: a response that cannot be decoded is ignored (no ACK, no NACK).
  ASSERT_TRUE(cp_->SendRawMessage("\xff\xfe not a DiscoveryResponse"));
  ExpectCallsSucceed("after a message that does not parse");

  // Over XdsClientOptions::max_ads_response_size: the stream ends, and the
  // client comes back on a new one.
  ASSERT_TRUE(cp_->SendRawMessage(std::string(5 << 20, 'x')));
  ASSERT_TRUE(cp_->WaitForStreamClosed(kWait));
  ExpectCallsSucceed("after a response over the size limit");

  ASSERT_TRUE(cp_->WaitForStreamOpened(kWait));
  ASSERT_TRUE(cp_->FreezeConnections());
  ExpectCallsSucceed("while the control plane hangs");

  // Sane again: the next endpoints reach the channel on a new connection.
  ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-c", EndpointsAt("s-c", {addresses_[2]})}}, "3"));
  ASSERT_TRUE(cp_->DropAllConnections());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string peer;
  while (std::chrono::steady_clock::now() < deadline) {
    auto reply = Call(test_service::kUnaryCall);
    ASSERT_TRUE(reply.ok()) << "after the control plane came back: " << reply.status().ToString();
    peer = reply->peer;
    if (peer == addresses_[2]) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(peer, addresses_[2]);
  // Anything the client sent broke no ADS rule (the fake control plane
  // checks every request); the NACK and the raw messages were on purpose.
}

// A TCP listener on loopback that accepts every connection and resets it
// at once (SO_LINGER 0), counting them.
class ResettingBackend {
 public:
  ResettingBackend() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "resetting backend: " << strerror(errno);
      return;
    }
    address_ = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    thread_ = std::thread([this] {
      while (true) {
        const int connection = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (stopping_.load()) {
          if (connection >= 0) ::close(connection);
          return;
        }
        if (connection < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          ADD_FAILURE() << "resetting backend: accept: " << strerror(errno);
          return;
        }
        accepted_.fetch_add(1);
        linger reset{1, 0};
        ::setsockopt(connection, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        ::close(connection);
      }
    });
  }
  ~ResettingBackend() {
    stopping_.store(true);
    ::shutdown(fd_, SHUT_RDWR);  // wakes the accept
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  const std::string& address() const { return address_; }
  int accepted() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  std::string address_;
  std::thread thread_;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stopping_{false};
};

// A backend that resets every connection never takes a call, and the
// channel does not hammer it: both clusters name it, so one subchannel
// reconnects to it, with backoff (ChannelFixture: 100 ms, times 1.6 with
// +-20 % jitter, at most 500 ms), while every call of the mixed cluster
// goes to its healthy endpoint. Alone in its cluster, it fails calls
// UNAVAILABLE with the connection's error, naming the backend, each at
// once.
TEST_F(ChannelFaultsTest, ABackendThatResetsEveryConnectionTakesNoCallAndIsNotHammered) {
  ResettingBackend resetting;
  ASSERT_FALSE(resetting.address().empty());
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*",
                                                               {{"/grpc.testing.TestService/"
                                                                 "EmptyCall",
                                                                 "alone"},
                                                                {"", "mixed"}})}},
                                "1"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType,
      {{"mixed", ValidCluster("mixed", "s-mixed")}, {"alone", ValidCluster("alone", "s-alone")}},
      "1"));
  ASSERT_TRUE(
      cp_->SetResources(kEdsType,
                        {{"s-mixed", EndpointsAt("s-mixed", {resetting.address(), addresses_[0]})},
                         {"s-alone", EndpointsAt("s-alone", {resetting.address()})}},
                        "1"));
  CreateChannel("xds:///svc");
  const auto start = std::chrono::steady_clock::now();
  CallOptions wait;
  wait.wait_for_ready = true;
  std::map<std::string, int> counts = CountCalls(test_service::kUnaryCall, 500, wait);
  EXPECT_EQ(counts, (std::map<std::string, int>{{addresses_[0], 500}}));

  // The cluster with only the resetting backend, called for 2 s without
  // pause: every call fails at once, saying why.
  int failed_calls = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) {
    auto reply = Call(test_service::kEmptyCall);
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable) << reply.status().ToString();
    ++failed_calls;
  }
  std::cout << failed_calls << " calls to the resetting backend failed\n";
  auto reply = Call(test_service::kEmptyCall);
  ASSERT_FALSE(reply.ok());
  std::cout << "a call to the resetting backend: " << reply.status().ToString() << "\n";
  // The last connection error names the backend, though the reset peer can
  // no longer be asked its address.
  EXPECT_NE(reply.status().message().find(resetting.address()), std::string::npos)
      << reply.status().ToString();

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int accepted = resetting.accepted();
  std::cout << accepted << " connections reset in " << seconds << " s\n";
  EXPECT_GT(accepted, 0);
  // The backoff's attempts in 2 s: 8 at most with the shortest jitter
  // (0, 80, 208, 413, 740, 1140, 1540, 1940 ms); then one per 400 ms at
  // least apart. A backoff that never grew (every 100 ms) would make 20,
  // no backoff thousands.
  EXPECT_LE(accepted, static_cast<int>(seconds / 0.4) + 6);
}

}  // namespace
}  // namespace uxds::testing
