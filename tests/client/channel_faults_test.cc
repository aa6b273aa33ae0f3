// Faults a Channel meets end to end on loopback (#26): a Cluster that asks
// for the largest ring A42 allows, and a backend that resets every
// connection. Each is bounded: by memory, by connection attempts, by the
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

using ChannelFaultsTest = ChannelFixture;

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
        if (connection < 0) return;  // shut down
        accepted_.fetch_add(1);
        linger reset{1, 0};
        ::setsockopt(connection, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        ::close(connection);
      }
    });
  }
  ~ResettingBackend() {
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
};

// A backend that resets every connection never takes a call, and the
// channel does not hammer it: its reconnections follow the backoff (here
// 100 ms doubling to 500 ms, ChannelFixture), while every call goes to the
// cluster's healthy endpoint. Alone in its cluster, it fails calls
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
  // Backoff from 100 ms, at most 500 ms, for each of the two subchannels
  // (one per cluster): fewer than 2 * (seconds / 0.1 + 1) attempts even if
  // every delay were the shortest. A channel that reconnected without
  // backoff would make thousands in that time.
  EXPECT_LE(accepted, 2 * (static_cast<int>(seconds / 0.1) + 2));
}

}  // namespace
}  // namespace uxds::testing
