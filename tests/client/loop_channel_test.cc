// LoopChannel: one Channel called from four loops at once (#25). Each
// call routes, hashes and picks on its own loop's thread against what the
// channel's loop published, and runs on that loop's own connection to the
// endpoint; the config changes underneath every few milliseconds; an
// endpoint that leaves is closed on every loop; Shutdown() of the channel
// with calls running on every loop ends them all.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "channel_fixture.h"
#include "channel_test_resources.h"
#include "grpc/testing/messages.pb.h"
#include "support/loopback_sockets.h"
#include "test_service/test_service.h"
#include "uxds/client_channel.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kLoops = 4;

// What a loop's calls ended with.
struct Outcomes {
  std::mutex mu;
  std::map<std::string, int> by_peer_or_code;  // peer, or the status code's name
  std::vector<std::string> unexpected;         // failures no config allows
  int calls = 0;
  int off_loop = 0;  // calls that resumed on another thread
};

class LoopChannelTest : public ChannelFixture {
 protected:
  void SetUp() override {
    ChannelFixture::SetUp();
    for (int i = 0; i < kLoops; ++i) {
      auto thread = LoopThread::Start();
      ASSERT_TRUE(thread.ok()) << thread.status().ToString();
      callers_.push_back(*std::move(thread));
    }
  }
  void TearDown() override {
    ShutdownHandles();
    ChannelFixture::TearDown();
    callers_.clear();
  }

  void OpenHandles() {
    for (auto& caller : callers_) handles_.push_back(channel_->OnLoop(caller->loop()));
  }
  void ShutdownHandles() {
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (handles_[i] == nullptr) continue;
      std::promise<void> done;
      callers_[i]->RunSync([&] {
        callers_[i]->loop().Spawn([](LoopChannel* h, std::promise<void>* d) -> Task<void> {
          co_await h->Shutdown();
          co_await h->Shutdown();  // twice: the second returns at once
          d->set_value();
        }(handles_[i].get(), &done));
      });
      done.get_future().get();
      callers_[i]->RunSync([&] { handles_[i].reset(); });
    }
    handles_.clear();
  }
  void ShutdownChannel() {
    RunOnControl<bool>([this]() -> Task<bool> {
      co_await channel_->Shutdown();
      co_return true;
    });
  }

  // Starts `count` calls one after another on every loop (or until `stop`);
  // the future is ready once every loop's calls have ended.
  std::vector<std::future<void>> CallOnEveryLoop(const std::string& method, int count,
                                                 CallOptions options, Outcomes& out,
                                                 const std::set<std::string>& allowed_failures,
                                                 std::atomic<bool>* stop = nullptr) {
    std::vector<std::future<void>> ended;
    for (size_t i = 0; i < handles_.size(); ++i) {
      auto done = std::make_shared<std::promise<void>>();
      ended.push_back(done->get_future());
      LoopChannel* handle = handles_[i].get();
      callers_[i]->RunSync([&, handle, done] {
        handle->loop().Spawn([](LoopChannel* h, std::string method, int count, CallOptions options,
                                Outcomes* out, std::set<std::string> allowed,
                                std::atomic<bool>* stop,
                                std::shared_ptr<std::promise<void>> done) -> Task<void> {
          const std::thread::id here = std::this_thread::get_id();
          for (int n = 0; n < count && (stop == nullptr || !stop->load()); ++n) {
            StatusOr<UnaryResponse> reply = co_await h->UnaryCall(method, "", options);
            std::lock_guard lock(out->mu);
            ++out->calls;
            if (std::this_thread::get_id() != here) ++out->off_loop;
            const std::string key =
                reply.ok() ? reply->peer : std::string(StatusCodeName(reply.status().code()));
            ++out->by_peer_or_code[key];
            if (!reply.ok() && !allowed.contains(key)) {
              out->unexpected.push_back(reply.status().ToString());
            }
          }
          done->set_value();
        }(handle, method, count, options, &out, allowed_failures, stop, done));
      });
    }
    return ended;
  }

  // xds:///svc: every call to cluster "main", round robin over `endpoints`.
  void ServeOneCluster(const std::vector<std::string>& endpoints) {
    ASSERT_TRUE(cp_->SetResources(
        kLdsType, {{"svc", ApiListenerWithRoutes("svc", "svc", {{"", "main"}})}}, "1"));
    ASSERT_TRUE(cp_->SetResources(kCdsType, {{"main", ValidCluster("main", "s-main")}}, "1"));
    ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-main", EndpointsAt("s-main", endpoints)}}, "1"));
  }

  // Until calls on the channel's own loop (round robin, or ring_hash with
  // random hashes) have reached both `a` and `b` (endpoints 0 and 1 by
  // default): both READY there, so every loop's picks reach both.
  void WaitUntilBothReady(std::string a = {}, std::string b = {}) {
    if (a.empty()) a = addresses_[0];
    if (b.empty()) b = addresses_[1];
    CallOptions options;
    options.wait_for_ready = true;
    for (int round = 0; round < 100; ++round) {
      std::map<std::string, int> seen = CountCalls(test_service::kEmptyCall, 8, options);
      if (seen[a] > 0 && seen[b] > 0) return;
      std::this_thread::sleep_for(milliseconds(10));
    }
    FAIL() << a << " and " << b << " never both READY";
  }

  // One EmptyCall through loop i's handle, on that loop; waits for its end.
  StatusOr<UnaryResponse> CallOnLoop(size_t i, CallOptions options) {
    StatusOr<UnaryResponse> reply = UnavailableError("not run");
    std::promise<void> done;
    callers_[i]->RunSync([&] {
      callers_[i]->loop().Spawn([](LoopChannel* h, CallOptions options,
                                   StatusOr<UnaryResponse>* out,
                                   std::promise<void>* d) -> Task<void> {
        *out = co_await h->UnaryCall(std::string(test_service::kEmptyCall), "", std::move(options));
        d->set_value();
      }(handles_[i].get(), std::move(options), &reply, &done));
    });
    done.get_future().get();
    return reply;
  }

  // Open connections of loop i's handle, read on its loop.
  size_t ConnectionsOf(size_t i) {
    size_t n = 0;
    callers_[i]->RunSync([&] { n = handles_[i]->connections(); });
    return n;
  }

  std::vector<std::unique_ptr<LoopThread>> callers_;
  std::vector<std::unique_ptr<LoopChannel>> handles_;
};

void WaitAll(std::vector<std::future<void>>& ended) {
  for (auto& f : ended) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready)
        << "a loop's calls hang";
  }
}

// Round robin over two endpoints, every call from every loop READY: each
// loop opens its own connection to each endpoint, and every call resumes
// on the loop that made it.
TEST_F(LoopChannelTest, CallsFromFourLoopsRunOnTheirOwnLoopsAndConnections) {
  ServeOneCluster({addresses_[0], addresses_[1]});
  CreateChannel("xds:///svc");
  WaitUntilBothReady();
  OpenHandles();
  CallOptions options;
  options.timeout = std::chrono::seconds(10);
  options.wait_for_ready = true;
  Outcomes out;
  auto ended = CallOnEveryLoop(test_service::kEmptyCall, 50, options, out, {});
  WaitAll(ended);
  EXPECT_EQ(out.calls, kLoops * 50);
  EXPECT_EQ(out.off_loop, 0);
  EXPECT_TRUE(out.unexpected.empty()) << out.unexpected.front();
  EXPECT_GT(out.by_peer_or_code[addresses_[0]], 0);
  EXPECT_GT(out.by_peer_or_code[addresses_[1]], 0);
  for (size_t i = 0; i < handles_.size(); ++i) EXPECT_EQ(ConnectionsOf(i), 2u) << "loop " << i;
}

// An endpoint that leaves the config is closed on every loop that had a
// connection to it; the other stays.
TEST_F(LoopChannelTest, AnEndpointRemovedClosesItsConnectionsOnEveryLoop) {
  ServeOneCluster({addresses_[0], addresses_[1]});
  CreateChannel("xds:///svc");
  WaitUntilBothReady();
  OpenHandles();
  CallOptions options;
  options.timeout = std::chrono::seconds(10);
  options.wait_for_ready = true;
  Outcomes out;
  auto ended = CallOnEveryLoop(test_service::kEmptyCall, 20, options, out, {});
  WaitAll(ended);
  for (size_t i = 0; i < handles_.size(); ++i) ASSERT_EQ(ConnectionsOf(i), 2u) << "loop " << i;
  ASSERT_TRUE(
      cp_->SetResources(kEdsType, {{"s-main", EndpointsAt("s-main", {addresses_[1]})}}, "2"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (size_t i = 0; i < handles_.size(); ++i) {
    while (ConnectionsOf(i) != 1 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    EXPECT_EQ(ConnectionsOf(i), 1u) << "loop " << i;
  }
  Outcomes after;
  auto again = CallOnEveryLoop(test_service::kEmptyCall, 10, options, after, {});
  WaitAll(again);
  EXPECT_EQ(after.by_peer_or_code[addresses_[1]], kLoops * 10);
}

// A loop's connection no call has used for a whole idle period closes
// (between one and two periods after its last call); the channel's own
// connections stay, and the next call on that loop connects again.
TEST_F(LoopChannelTest, ALoopsIdleConnectionsClose) {
  customize_options_ = [](ChannelOptions& options) {
    options.loop_connection_idle_timeout = milliseconds(100);
  };
  ServeOneCluster({addresses_[0]});
  CreateChannel("xds:///svc");
  OpenHandles();
  CallOptions options;
  options.timeout = std::chrono::seconds(10);
  options.wait_for_ready = true;
  // Calls every 20 ms on every loop for 300 ms: busy connections stay.
  for (int round = 0; round < 15; ++round) {
    Outcomes out;
    auto ended = CallOnEveryLoop(test_service::kEmptyCall, 1, options, out, {});
    WaitAll(ended);
    ASSERT_TRUE(out.unexpected.empty()) << out.unexpected.front();
    for (size_t i = 0; i < handles_.size(); ++i) ASSERT_EQ(ConnectionsOf(i), 1u) << "loop " << i;
    std::this_thread::sleep_for(milliseconds(20));
  }
  // Then none: every loop's connection closes within two periods.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (size_t i = 0; i < handles_.size(); ++i) {
    while (ConnectionsOf(i) != 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_EQ(ConnectionsOf(i), 0u) << "loop " << i;
  }
  Outcomes again;
  auto ended = CallOnEveryLoop(test_service::kEmptyCall, 3, options, again, {});
  WaitAll(ended);
  EXPECT_EQ(again.by_peer_or_code[addresses_[0]], kLoops * 3);
}

// Calls from four loops while the routes, the clusters and the endpoints
// change every few milliseconds. Every config sends every call to a
// serving backend, so every call must succeed (waiting for ready through
// each change), and none may hang. Then Shutdown() of the channel with
// calls still running on every loop: each ends, OK or UNAVAILABLE.
TEST_F(LoopChannelTest, CallsFromFourLoopsWhileTheConfigChurns) {
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "svc", {{"", "a"}})}}, "0"));
  ASSERT_TRUE(cp_->SetResources(
      kCdsType, {{"a", ValidCluster("a", "s-a")}, {"b", ValidCluster("b", "s-b")}}, "0"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType,
      {{"s-a", EndpointsAt("s-a", {addresses_[0]})}, {"s-b", EndpointsAt("s-b", {addresses_[1]})}},
      "0"));
  CreateChannel("xds:///svc");
  OpenHandles();
  CallOptions options;
  options.timeout = std::chrono::seconds(20);
  options.wait_for_ready = true;
  Outcomes out;
  std::atomic<bool> stop{false};
  auto ended = CallOnEveryLoop(test_service::kEmptyCall, 1 << 30, options, out, {}, &stop);
  for (int version = 1; version <= 60; ++version) {
    const std::string v = std::to_string(version);
    switch (version % 3) {
      case 0:  // the route moves to the other cluster
        ASSERT_TRUE(cp_->SetResources(
            kLdsType,
            {{"svc", ApiListenerWithRoutes("svc", "svc", {{"", version % 2 == 0 ? "a" : "b"}})}},
            v));
        break;
      case 1:  // each cluster's endpoints move
        ASSERT_TRUE(cp_->SetResources(
            kEdsType,
            {{"s-a", EndpointsAt("s-a", {addresses_[(version / 3) % 2 == 0 ? 2 : 0]})},
             {"s-b", EndpointsAt("s-b", {addresses_[(version / 3) % 2], addresses_[2]})}},
            v));
        break;
      case 2:  // a cluster's service name changes (a new tree)
        ASSERT_TRUE(cp_->SetResources(kCdsType,
                                      {{"a", ValidCluster("a", "s-a")},
                                       {"b", ValidCluster("b", version % 2 == 0 ? "s-b" : "s-a")}},
                                      v));
        break;
    }
    std::this_thread::sleep_for(milliseconds(3));
  }
  std::this_thread::sleep_for(milliseconds(50));
  {
    std::lock_guard lock(out.mu);
    EXPECT_TRUE(out.unexpected.empty()) << out.unexpected.front();
    EXPECT_GT(out.calls, 0);
  }
  // Calls still running on every loop: the channel shuts down under them.
  Outcomes* outcomes = &out;
  {
    std::lock_guard lock(outcomes->mu);
    outcomes->unexpected.clear();
  }
  ShutdownChannel();
  stop = true;
  WaitAll(ended);
  std::lock_guard lock(out.mu);
  EXPECT_EQ(out.off_loop, 0);
  for (const auto& [key, count] : out.by_peer_or_code) {
    std::cout << "  " << key << ": " << count << " calls\n";
  }
  for (const std::string& failure : out.unexpected) {
    // After Shutdown() a call fails UNAVAILABLE ("channel shut down", or its
    // connection closed under it); nothing else.
    EXPECT_NE(failure.find("UNAVAILABLE"), std::string::npos) << failure;
  }
}

// A bidirectional stream from each loop: `rounds` requests, each answered
// before the next; the response sizes it read and its status.
Task<std::pair<std::vector<size_t>, Status>> PingPong(LoopChannel& handle, int rounds) {
  CallOptions options;
  options.timeout = std::chrono::seconds(10);
  options.wait_for_ready = true;
  StatusOr<std::unique_ptr<ClientStream>> stream =
      co_await handle.StartStream(test_service::kFullDuplexCall, options);
  if (!stream.ok()) co_return std::make_pair(std::vector<size_t>(), stream.status());
  std::vector<size_t> sizes;
  for (int round = 0; round < rounds; ++round) {
    grpc::testing::StreamingOutputCallRequest request;
    request.add_response_parameters()->set_size(round + 1);
    const std::string bytes = request.SerializeAsString();
    const Status written = co_await (*stream)->Write(bytes);
    if (!written.ok()) break;
    std::optional<std::string> reply = co_await (*stream)->Read();
    if (!reply.has_value()) break;
    grpc::testing::StreamingOutputCallResponse response;
    if (!response.ParseFromString(*reply)) break;
    sizes.push_back(response.payload().body().size());
  }
  const Status done = co_await (*stream)->WritesDone();
  Status status = co_await (*stream)->Finish();
  if (status.ok() && !done.ok()) status = done;
  co_return std::make_pair(std::move(sizes), std::move(status));
}

// Streams from every loop run on that loop's connections; a stream still
// open when its handle shuts down ends UNAVAILABLE, and may be destroyed
// after the handle is gone.
TEST_F(LoopChannelTest, StreamsFromEveryLoopAndOneThatOutlivesItsHandle) {
  ServeOneCluster({addresses_[0]});
  CreateChannel("xds:///svc");
  OpenHandles();
  for (size_t i = 0; i < handles_.size(); ++i) {
    std::promise<std::pair<std::vector<size_t>, Status>> result;
    callers_[i]->RunSync([&] {
      callers_[i]->loop().Spawn([](LoopChannel* h, auto* out) -> Task<void> {
        out->set_value(co_await PingPong(*h, 3));
      }(handles_[i].get(), &result));
    });
    auto [sizes, status] = result.get_future().get();
    EXPECT_TRUE(status.ok()) << "loop " << i << ": " << status.ToString();
    EXPECT_EQ(sizes, (std::vector<size_t>{1, 2, 3})) << "loop " << i;
    EXPECT_EQ(ConnectionsOf(i), 1u) << "loop " << i;
  }
  // Loop 0: a stream left open across its handle's Shutdown().
  std::unique_ptr<ClientStream> open;
  {
    std::promise<Status> started;
    callers_[0]->RunSync([&] {
      callers_[0]->loop().Spawn([](LoopChannel* h, std::unique_ptr<ClientStream>* out,
                                   std::promise<Status>* started) -> Task<void> {
        CallOptions options;
        options.timeout = std::chrono::seconds(30);
        StatusOr<std::unique_ptr<ClientStream>> stream =
            co_await h->StartStream(test_service::kFullDuplexCall, options);
        if (stream.ok()) *out = *std::move(stream);
        started->set_value(stream.status());
      }(handles_[0].get(), &open, &started));
    });
    const Status status = started.get_future().get();
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
  ShutdownHandles();  // shuts down and destroys every handle
  std::promise<Status> finished;
  callers_[0]->RunSync([&] {
    callers_[0]->loop().Spawn([](ClientStream* stream, std::promise<Status>* out) -> Task<void> {
      out->set_value(co_await stream->Finish());
    }(open.get(), &finished));
  });
  const Status status = finished.get_future().get();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  callers_[0]->RunSync([&] { open.reset(); });  // after its handle is gone
}

// A call started while the handle's Shutdown() runs fails at once, and the
// handle destroyed as soon as Shutdown() returns leaves nothing behind
// (a call queued before it, one started during it).
TEST_F(LoopChannelTest, ACallStartedDuringShutdownNeverOutlivesTheHandle) {
  CreateChannel("xds:///nothing-served");
  OpenHandles();
  struct Results {
    Status queued, during;
    bool destroyed = false;
  } results;
  std::promise<void> done;
  callers_[0]->RunSync([&] {
    Loop& loop = callers_[0]->loop();
    auto call = [](LoopChannel* h, Status* out) -> Task<void> {
      CallOptions options;
      options.timeout = std::chrono::seconds(30);
      options.wait_for_ready = true;
      StatusOr<UnaryResponse> reply = co_await h->UnaryCall(test_service::kEmptyCall, "", options);
      *out = reply.status();
    };
    loop.Spawn(call(handles_[0].get(), &results.queued));
    loop.Spawn([](std::unique_ptr<LoopChannel>* handle, Results* r, std::promise<void>* d,
                  Task<void> during) -> Task<void> {
      TaskGroup calls(handle->get()->loop());
      calls.Spawn(std::move(during));
      co_await handle->get()->Shutdown();
      handle->reset();  // at once, with the call above maybe still running
      r->destroyed = true;
      co_await calls.Join();
      d->set_value();
    }(&handles_[0], &results, &done, call(handles_[0].get(), &results.during)));
  });
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_TRUE(results.destroyed);
  EXPECT_EQ(results.queued.code(), StatusCode::kUnavailable) << results.queued.ToString();
  EXPECT_EQ(results.during.code(), StatusCode::kUnavailable) << results.during.ToString();
}

// gRPC's connection backoff with every delay at its shortest (jitter 0.2):
// the most connect attempts one loop can make in `elapsed`.
int MostAttemptsIn(std::chrono::steady_clock::duration elapsed, milliseconds initial) {
  double delay_ms = static_cast<double>(initial.count());
  double at_ms = 0;
  int attempts = 1;
  const double elapsed_ms = std::chrono::duration<double, std::milli>(elapsed).count();
  while ((at_ms += 0.8 * delay_ms) <= elapsed_ms) {
    ++attempts;
    delay_ms *= 1.6;
  }
  return attempts;
}

// An endpoint the channel's loop reaches (READY there) and the other loops
// cannot (their connections are closed as they are made): their calls go
// to the other endpoint, none fails, and each loop keeps retrying the one
// it cannot reach with exponential backoff, though no call asks it to.
TEST_F(LoopChannelTest, ALoopGoesAroundAnEndpointOnlyItCannotReach) {
  constexpr milliseconds kInitialBackoff{50};
  customize_options_ = [&](ChannelOptions& options) { options.initial_backoff = kInitialBackoff; };
  FirstConnectionProxy only_first(servers_[1]->port());
  ServeOneCluster({addresses_[0], only_first.target()});
  CreateChannel("xds:///svc");
  WaitUntilBothReady(addresses_[0], only_first.target());
  ASSERT_EQ(only_first.turned_away(), 0);
  OpenHandles();
  const auto first_attempts = std::chrono::steady_clock::now();
  CallOptions options;
  options.timeout = std::chrono::seconds(10);  // not wait_for_ready: a failed pick fails
  Outcomes out;
  auto ended = CallOnEveryLoop(test_service::kEmptyCall, 50, options, out, {});
  WaitAll(ended);
  EXPECT_TRUE(out.unexpected.empty()) << out.unexpected.front();
  EXPECT_EQ(out.by_peer_or_code[addresses_[0]], kLoops * 50);
  EXPECT_GE(only_first.turned_away(), kLoops);  // every loop tried it
  // Retries go on without calls, further and further apart.
  std::this_thread::sleep_for(milliseconds(1500));
  const int turned_away = only_first.turned_away();
  const auto elapsed = std::chrono::steady_clock::now() - first_attempts;
  EXPECT_GE(turned_away, kLoops * 3);
  // With slack: the delays are whole milliseconds, timers may end a little
  // early, and the count and the clock are not read at one instant. A
  // fixed delay would allow several times as many.
  EXPECT_LE(turned_away, kLoops * (MostAttemptsIn(elapsed + milliseconds(50), kInitialBackoff) + 1))
      << "over " << std::chrono::duration_cast<milliseconds>(elapsed).count() << " ms";
}

// The same for ring_hash (A42): a pick whose hash lands on the endpoint its
// loop cannot reach walks the ring to the next READY endpoint.
TEST_F(LoopChannelTest, ARingHashPickGoesAroundAnEndpointItsLoopCannotReach) {
  FirstConnectionProxy only_first(servers_[1]->port());
  // Calls carry no x-user header: each has a random hash (A42).
  ASSERT_TRUE(cp_->SetResources(
      kLdsType, {{"svc", ApiListenerWithRoutes("svc", "svc", {{"", "main", "x-user"}})}}, "1"));
  ASSERT_TRUE(cp_->SetResources(kCdsType, {{"main", RingHashCluster("main", "s-main")}}, "1"));
  ASSERT_TRUE(cp_->SetResources(
      kEdsType, {{"s-main", EndpointsAt("s-main", {addresses_[0], only_first.target()})}}, "1"));
  CreateChannel("xds:///svc");
  WaitUntilBothReady(addresses_[0], only_first.target());
  OpenHandles();
  CallOptions options;
  options.timeout = std::chrono::seconds(10);
  Outcomes out;
  auto ended = CallOnEveryLoop(test_service::kEmptyCall, 50, options, out, {});
  WaitAll(ended);
  EXPECT_TRUE(out.unexpected.empty()) << out.unexpected.front();
  EXPECT_EQ(out.by_peer_or_code[addresses_[0]], kLoops * 50);
  EXPECT_GE(only_first.turned_away(), 1);
}

// A call from another loop that waited for a config names what the channel
// waits for at its deadline: here the RouteConfiguration the Listener that
// came names.
TEST_F(LoopChannelTest, ALoopsCallWaitingForConfigNamesWhatIsStillMissing) {
  ASSERT_TRUE(cp_->SetResources(kLdsType, {{"svc", ApiListener("svc", "routes-never-sent")}}, "1"));
  CreateChannel("xds:///svc");
  OpenHandles();
  // Until the channel has the Listener (its own calls say what they wait for).
  for (int round = 0; round < 200; ++round) {
    auto reply = Call(test_service::kEmptyCall,
                      {.metadata = {}, .timeout = milliseconds(20), .wait_for_ready = false});
    if (reply.status().message().find("RDS resource") != std::string::npos) break;
  }
  const StatusOr<UnaryResponse> reply =
      CallOnLoop(0, {.metadata = {}, .timeout = milliseconds(200)});
  ASSERT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("RDS resource routes-never-sent"), std::string::npos)
      << reply.status().ToString();
}

// A wait-for-ready call from another loop to a cluster whose endpoint
// refuses connections ends at its deadline with the cluster's last error.
TEST_F(LoopChannelTest, ALoopsWaitForReadyDeadlineCarriesTheClustersLastError) {
  const std::string refused = RefusedAddress().ToString();
  ServeOneCluster({refused});
  CreateChannel("xds:///svc");
  OpenHandles();
  const StatusOr<UnaryResponse> reply =
      CallOnLoop(0, {.metadata = {}, .timeout = milliseconds(1500), .wait_for_ready = true});
  ASSERT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded) << reply.status().ToString();
  EXPECT_NE(reply.status().message().find("last error"), std::string::npos)
      << reply.status().ToString();
  EXPECT_NE(reply.status().message().find(refused), std::string::npos) << reply.status().ToString();
}

// Calls queued on every loop (no config yet) end at once when the channel
// shuts down, not at their deadline; later calls fail at once.
TEST_F(LoopChannelTest, ShutdownEndsTheCallsQueuedOnEveryLoop) {
  CreateChannel("xds:///nothing-served");
  OpenHandles();
  CallOptions options;
  options.timeout = std::chrono::seconds(60);
  options.wait_for_ready = true;
  Outcomes out;
  auto ended = CallOnEveryLoop(test_service::kEmptyCall, 1, options, out, {"UNAVAILABLE"});
  std::this_thread::sleep_for(milliseconds(100));
  const auto started = std::chrono::steady_clock::now();
  ShutdownChannel();
  for (auto& f : ended) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  std::lock_guard lock(out.mu);
  EXPECT_EQ(out.by_peer_or_code["UNAVAILABLE"], kLoops);
}

}  // namespace
}  // namespace uxds::testing
