// Every owner of tasks on the client side survives its own shutdown being
// awaited twice and being destroyed right after: Shutdown() awaited from two
// tasks at once runs one teardown and returns to both, the first caller to
// return may destroy the owner while the other is still queued to resume,
// and a Shutdown() after the end returns at once. Real connections on
// loopback: uxds TestService backends, the fake control plane for xDS and
// LRS. Built to run under ASan, where a read of a freed owner or a
// TaskGroup freed with a live task fails the test.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "channel_fixture.h"
#include "client/xds_dependency_manager.h"
#include "lb/subchannel.h"
#include "support/xds_test_resources.h"
#include "test_service/test_service.h"
#include "uxds/client_channel.h"
#include "uxds/runtime.h"
#include "uxds/xds_resources.h"
#include "xds/client/xds_client_impl.h"
#include "xds/lrs/load_reporting_client.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Awaits `owner`'s Shutdown() from two tasks at once. The first caller to
// return destroys the owner there and then, while the other caller is still
// queued to resume. How many callers returned.
template <typename Owner>
Task<int> ShutDownTwiceAndDestroy(Loop& loop, std::unique_ptr<Owner>& owner) {
  int returned = 0;
  auto caller = [](Owner* raw, std::unique_ptr<Owner>* owner, int* returned) -> Task<void> {
    co_await raw->Shutdown();
    ++*returned;
    owner->reset();
  };
  TaskGroup callers(loop);
  callers.Spawn(caller(owner.get(), &owner, &returned));
  callers.Spawn(caller(owner.get(), &owner, &returned));
  co_await callers.Join();
  co_return returned;
}

// Counts the loop's turns while it lives.
class TurnCounter {
 public:
  explicit TurnCounter(Loop& loop) : tasks_(loop) {
    tasks_.Spawn([](Loop& loop, int* turns) -> Task<void> {
      for (;;) {
        co_await loop.Yield();
        CancelState* cancel = co_await CurrentCancelState();
        if (cancel != nullptr && cancel->cancelled()) co_return;
        ++*turns;
      }
    }(loop, &turns_));
  }
  Task<void> Stop() { co_await tasks_.CancelAndJoin(); }
  int turns() const { return turns_; }

 private:
  int turns_ = 0;
  TaskGroup tasks_;
};

// Shutdown() to its end, then once more: true when the second call
// returned without letting the loop turn.
template <typename Owner>
Task<bool> SecondShutdownReturnsAtOnce(Loop& loop, Owner& owner) {
  co_await owner.Shutdown();
  TurnCounter counter(loop);
  co_await loop.Yield();  // the counter is running
  const int before = counter.turns();
  co_await owner.Shutdown();
  const bool at_once = counter.turns() == before;
  co_await counter.Stop();
  co_return at_once;
}

CallOptions WaitingOptions() {
  CallOptions options;
  options.timeout = seconds(10);
  options.wait_for_ready = true;
  return options;
}

class ClientLifecycleTest : public ChannelFixture {
 protected:
  // Routes every call of xds:///svc to cluster "main" at `addresses`.
  void ServeService(const std::vector<std::string>& addresses) {
    ASSERT_TRUE(cp_->SetResources(
        kLdsType, {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "main"}})}}, "1"));
    ASSERT_TRUE(cp_->SetResources(kCdsType, {{"main", ValidCluster("main", "s-main")}}, "1"));
    ASSERT_TRUE(cp_->SetResources(kEdsType, {{"s-main", EndpointsAt("s-main", addresses)}}, "1"));
  }

  // A channel on the control loop (call there).
  StatusOr<std::unique_ptr<Channel>> MakeChannel(const std::string& target) {
    ChannelOptions options;
    options.xds_client_pool = pool_;
    options.initial_backoff = milliseconds(100);
    options.max_backoff = milliseconds(500);
    return Channel::Create(control_->loop(), target, options);
  }
};

// A streaming call open on `channel`: its subchannel is READY and the
// stream holds it. Null when the call did not start.
Task<std::unique_ptr<ClientStream>> OpenStream(Channel& channel) {
  StatusOr<std::unique_ptr<ClientStream>> stream =
      co_await channel.StartStream(test_service::kFullDuplexCall, WaitingOptions());
  if (!stream.ok()) {
    ADD_FAILURE() << stream.status().ToString();
    co_return nullptr;
  }
  co_return *std::move(stream);
}

// A pool with one READY subchannel to `address`, held by `ref`.
Task<std::shared_ptr<SubchannelPool>> PoolWithAReadySubchannel(Loop& loop,
                                                               const std::string& address,
                                                               SubchannelRef* ref) {
  SubchannelOptions options;
  options.initial_backoff = milliseconds(100);
  options.max_backoff = milliseconds(500);
  std::shared_ptr<SubchannelPool> pool = SubchannelPool::Create(loop, options);
  StatusOr<SocketAddress> parsed = SocketAddress::Parse(address);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  *ref = pool->Get(*parsed);
  Event ready(loop);
  const int watch = (*ref)->AddWatcher([&ready](ConnectivityState state, const Status&) {
    if (state == ConnectivityState::kReady) ready.Set();
  });
  Timer give_up(loop);
  give_up.Start(seconds(30), [&ready] { ready.Set(); });
  (*ref)->RequestConnection();
  const Status waited = co_await ready.Wait();  // at once if already READY
  EXPECT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ((*ref)->state(), ConnectivityState::kReady);
  (*ref)->RemoveWatcher(watch);
  co_return pool;
}

// SubchannelPool: Shutdown() awaited twice while the last reference to its
// subchannel is dropped at a given turn (as a stream or picker going away
// does); the first caller to return destroys the pool. The subchannel is
// released while its task is cancelled, joined, or done.
TEST_F(ClientLifecycleTest, ASubchannelPoolShutDownTwiceWhileItsSubchannelIsReleased) {
  for (int turns = 0; turns < 10; ++turns) {
    SCOPED_TRACE("the reference dropped after " + std::to_string(turns) + " turns");
    const int returned = RunOnControl<int>([&]() -> Task<int> {
      Loop& loop = control_->loop();
      SubchannelRef ref;
      std::shared_ptr<SubchannelPool> pool =
          co_await PoolWithAReadySubchannel(loop, addresses_[0], &ref);
      int returned = 0;
      auto caller = [](SubchannelPool* raw, std::shared_ptr<SubchannelPool>* pool,
                       SubchannelRef* ref, int* returned) -> Task<void> {
        co_await raw->Shutdown();
        ++*returned;
        *ref = SubchannelRef();  // a pool outlives the references to its subchannels
        pool->reset();
      };
      auto drop = [](Loop& loop, int turns, SubchannelRef* ref) -> Task<void> {
        for (int i = 0; i < turns; ++i) co_await loop.Yield();
        *ref = SubchannelRef();
      };
      TaskGroup tasks(loop);
      tasks.Spawn(caller(pool.get(), &pool, &ref, &returned));
      tasks.Spawn(caller(pool.get(), &pool, &ref, &returned));
      tasks.Spawn(drop(loop, turns, &ref));
      co_await tasks.Join();
      EXPECT_EQ(pool, nullptr);
      co_return returned;
    });
    EXPECT_EQ(returned, 2);
  }
}

// The stream of a channel being shut down is dropped at a given turn of
// the shutdown: its subchannel is released while the pool cancels, joins
// or has closed it (the stream keeps the pool alive until then).
TEST_F(ClientLifecycleTest, AStreamDroppedAtAnyTurnOfItsChannelsShutdown) {
  for (int turns = 0; turns < 12; ++turns) {
    SCOPED_TRACE("the stream dropped after " + std::to_string(turns) + " turns");
    const bool destroyed = RunOnControl<bool>([&]() -> Task<bool> {
      Loop& loop = control_->loop();
      StatusOr<std::unique_ptr<Channel>> channel = MakeChannel(addresses_[0]);
      if (!channel.ok()) {
        ADD_FAILURE() << channel.status().ToString();
        co_return false;
      }
      std::unique_ptr<ClientStream> stream = co_await OpenStream(**channel);
      auto shutdown = [](std::unique_ptr<Channel>* channel) -> Task<void> {
        co_await (*channel)->Shutdown();
        channel->reset();
      };
      auto drop = [](Loop& loop, int turns, std::unique_ptr<ClientStream>* stream) -> Task<void> {
        for (int i = 0; i < turns; ++i) co_await loop.Yield();
        stream->reset();
      };
      TaskGroup tasks(loop);
      tasks.Spawn(shutdown(&*channel));
      tasks.Spawn(drop(loop, turns, &stream));
      co_await tasks.Join();
      co_return *channel == nullptr&& stream == nullptr;
    });
    EXPECT_TRUE(destroyed);
  }
}

// A plain host:port channel resolves its target in a task of its own: shut
// down and destroyed in the turn it was made, before that task ran.
TEST_F(ClientLifecycleTest, ADirectChannelDestroyedBeforeItsTargetWasResolved) {
  const bool destroyed = RunOnControl<bool>([&]() -> Task<bool> {
    StatusOr<std::unique_ptr<Channel>> channel = MakeChannel(addresses_[0]);
    if (!channel.ok()) {
      ADD_FAILURE() << channel.status().ToString();
      co_return false;
    }
    co_await (*channel)->Shutdown();
    channel->reset();
    // The loop runs what is queued (and would run the resolution).
    for (int i = 0; i < 5; ++i) co_await control_->loop().Yield();
    co_return true;
  });
  EXPECT_TRUE(destroyed);
}

// The same while a host name is looked up (on the resolver's worker), with
// Shutdown() awaited twice and the channel destroyed by the first caller to
// return.
TEST_F(ClientLifecycleTest, ADirectChannelShutDownTwiceWhileItsNameIsLookedUp) {
  const std::string port = addresses_[0].substr(addresses_[0].rfind(':') + 1);
  const int returned = RunOnControl<int>([&]() -> Task<int> {
    StatusOr<std::unique_ptr<Channel>> channel = MakeChannel("localhost:" + port);
    if (!channel.ok()) {
      ADD_FAILURE() << channel.status().ToString();
      co_return 0;
    }
    const int returned = co_await ShutDownTwiceAndDestroy(control_->loop(), *channel);
    for (int i = 0; i < 5; ++i) co_await control_->loop().Yield();
    co_return returned;
  });
  EXPECT_EQ(returned, 2);
}

// An xDS channel with a READY connection: Shutdown() awaited twice, the
// channel destroyed by the first caller to return.
TEST_F(ClientLifecycleTest, AChannelShutDownTwiceIsDestroyedByTheFirstCallerToReturn) {
  ServeService({addresses_[0], addresses_[1]});
  CreateChannel("xds:///svc");
  StatusOr<UnaryResponse> reply = Call(test_service::kEmptyCall, WaitingOptions());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  const int returned = RunOnControl<int>(
      [&]() -> Task<int> { return ShutDownTwiceAndDestroy(control_->loop(), channel_); });
  EXPECT_EQ(returned, 2);
  EXPECT_EQ(channel_, nullptr);
}

// The same with a stream open on the channel, dropped by the first caller
// to return.
TEST_F(ClientLifecycleTest, AChannelWithAnOpenStreamShutDownTwice) {
  ServeService({addresses_[0]});
  CreateChannel("xds:///svc");
  const int returned = RunOnControl<int>([&]() -> Task<int> {
    std::unique_ptr<ClientStream> stream = co_await OpenStream(*channel_);
    int returned = 0;
    auto caller = [](Channel* raw, std::unique_ptr<Channel>* channel,
                     std::unique_ptr<ClientStream>* stream, int* returned) -> Task<void> {
      co_await raw->Shutdown();
      ++*returned;
      stream->reset();
      channel->reset();
    };
    TaskGroup callers(control_->loop());
    callers.Spawn(caller(channel_.get(), &channel_, &stream, &returned));
    callers.Spawn(caller(channel_.get(), &channel_, &stream, &returned));
    co_await callers.Join();
    co_return returned;
  });
  EXPECT_EQ(returned, 2);
  EXPECT_EQ(channel_, nullptr);
}

// Calls waiting in the channel for its first config (none is served) when
// Shutdown() is awaited twice and the channel destroyed by the first caller
// to return: each fails UNAVAILABLE, and none reads the channel after.
TEST_F(ClientLifecycleTest, AChannelShutDownTwiceWhileCallsWaitInIt) {
  CreateChannel("xds:///svc");
  const std::vector<StatusCode> codes =
      RunOnControl<std::vector<StatusCode>>([&]() -> Task<std::vector<StatusCode>> {
        Loop& loop = control_->loop();
        std::vector<StatusCode> codes;
        auto call = [](Channel* channel, std::vector<StatusCode>* codes) -> Task<void> {
          StatusOr<UnaryResponse> reply =
              co_await channel->UnaryCall(test_service::kEmptyCall, "", WaitingOptions());
          codes->push_back(reply.status().code());
        };
        TaskGroup calls(loop);
        for (int i = 0; i < 3; ++i) calls.Spawn(call(channel_.get(), &codes));
        for (int i = 0; i < 2; ++i) co_await loop.Yield();  // the calls wait
        const int returned = co_await ShutDownTwiceAndDestroy(loop, channel_);
        EXPECT_EQ(returned, 2);
        co_await calls.Join();
        co_return codes;
      });
  EXPECT_EQ(codes, std::vector<StatusCode>(3, StatusCode::kUnavailable));
  EXPECT_EQ(channel_, nullptr);
}

// LoadReportingClient with its LRS stream open to the control plane:
// Shutdown() awaited twice, the client destroyed by the first caller to
// return.
TEST_F(ClientLifecycleTest, ALoadReportingClientShutDownTwiceIsDestroyedByTheFirstToReturn) {
  std::unique_ptr<LoadReportingClient> client;
  std::shared_ptr<ClusterLoadStats> stats;
  control_->RunSync([&] {
    XdsNode node;
    node.id = kChannelNodeId;
    LoadReportingOptions options;
    options.min_report_interval = milliseconds(50);
    client = std::make_unique<LoadReportingClient>(control_->loop(), node, options);
    XdsServerConfig server;
    server.server_uri = cp_->target();
    stats = client->AddCluster(server, "main", "s-main");
  });
  ASSERT_TRUE(cp_->WaitForLrsStreamOpened(milliseconds(30000)).has_value());
  const int returned = RunOnControl<int>(
      [&]() -> Task<int> { return ShutDownTwiceAndDestroy(control_->loop(), client); });
  EXPECT_EQ(returned, 2);
  EXPECT_EQ(client, nullptr);
  control_->RunSync([&] { stats.reset(); });
}

// XdsDependencyManager with a LOGICAL_DNS cluster whose name is being
// looked up again: Shutdown() awaited twice, the manager destroyed by the
// first caller to return. The lookup is the manager's task, ended and
// joined by the teardown; the watcher hears nothing once Shutdown() is
// called.
TEST_F(ClientLifecycleTest, AnXdsDependencyManagerShutDownTwiceWhileItLooksUpAName) {
  ASSERT_TRUE(cp_->SetResources(kLdsType,
                                {{"svc", ApiListenerWithRoutes("svc", "*", {{"", "dns"}})}}, "1"));
  ASSERT_TRUE(
      cp_->SetResources(kCdsType, {{"dns", LogicalDnsCluster("dns", "localhost", 8080)}}, "1"));
  struct Outcome {
    bool resolved = false;
    int returned = 0;
    int configs_after_shutdown = 0;
  };
  const Outcome outcome = RunOnControl<Outcome>([&]() -> Task<Outcome> {
    Loop& loop = control_->loop();
    Outcome outcome;
    StatusOr<std::shared_ptr<XdsClient>> client = pool_->Get("xds:///svc");
    if (!client.ok()) {
      ADD_FAILURE() << client.status().ToString();
      co_return outcome;
    }
    Event resolved(loop);
    bool shutting_down = false;
    auto manager = std::make_unique<XdsDependencyManager>(
        **client, "svc", "svc", [&](StatusOr<std::shared_ptr<const XdsConfig>> config) {
          if (shutting_down) ++outcome.configs_after_shutdown;
          if (!config.ok()) return;
          auto it = (*config)->clusters.find("dns");
          if (it == (*config)->clusters.end() || !it->second.ok()) return;
          const auto* endpoints =
              std::get_if<XdsConfig::ClusterConfig::EndpointConfig>(&it->second->children);
          if (endpoints != nullptr && endpoints->endpoints != nullptr) resolved.Set();
        });
    Timer give_up(loop);
    give_up.Start(seconds(30), [&resolved] { resolved.Set(); });
    const Status waited = co_await resolved.Wait();
    EXPECT_TRUE(waited.ok()) << waited.ToString();
    give_up.Cancel();
    outcome.resolved = resolved.is_set() && waited.ok();
    manager->RequestReresolution();  // a lookup the teardown finds running
    shutting_down = true;
    outcome.returned = co_await ShutDownTwiceAndDestroy(loop, manager);
    for (int i = 0; i < 5; ++i) co_await loop.Yield();
    co_return outcome;
  });
  EXPECT_TRUE(outcome.resolved);
  EXPECT_EQ(outcome.returned, 2);
  EXPECT_EQ(outcome.configs_after_shutdown, 0);
}

// XdsClient (whose Shutdown() already follows the rule) with its ADS stream
// and an LRS stream open: Shutdown() awaited twice, the client destroyed by
// the first caller to return.
TEST_F(ClientLifecycleTest, AnXdsClientShutDownTwiceIsDestroyedByTheFirstToReturn) {
  struct Watcher : XdsResourceWatcher<ListenerResource> {
    void OnResourceChanged(StatusOr<std::shared_ptr<const ListenerResource>>) override {}
    void OnAmbientError(Status) override {}
  };
  auto watcher = std::make_shared<Watcher>();
  std::unique_ptr<XdsClient> client;
  std::shared_ptr<ClusterLoadStats> stats;
  control_->RunSync([&] {
    Bootstrap bootstrap;
    XdsServerConfig server;
    server.server_uri = cp_->target();
    bootstrap.xds_servers.push_back(server);
    bootstrap.node.id = kChannelNodeId;
    client = *XdsClient::Create(control_->loop(), bootstrap);
    client->WatchResource(ListenerResourceType::Get(), "svc", watcher);
    LoadReportingClient* lrs = xds_internal::ImplOf(*client).load_reporting({});
    ASSERT_NE(lrs, nullptr);
    stats = lrs->AddCluster(server, "main", "s-main");
  });
  ASSERT_TRUE(cp_->WaitForStreamOpened(milliseconds(30000)).has_value());
  ASSERT_TRUE(cp_->WaitForLrsStreamOpened(milliseconds(30000)).has_value());
  const int returned = RunOnControl<int>(
      [&]() -> Task<int> { return ShutDownTwiceAndDestroy(control_->loop(), client); });
  EXPECT_EQ(returned, 2);
  EXPECT_EQ(client, nullptr);
  control_->RunSync([&] { stats.reset(); });
}

// After a completed Shutdown(), another returns at once (without the loop
// turning), for each owner.
TEST_F(ClientLifecycleTest, ASecondShutdownAfterTheFirstReturnsAtOnce) {
  ServeService({addresses_[0]});
  CreateChannel("xds:///svc");
  StatusOr<UnaryResponse> reply = Call(test_service::kEmptyCall, WaitingOptions());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(RunOnControl<bool>(
      [&]() -> Task<bool> { return SecondShutdownReturnsAtOnce(control_->loop(), *channel_); }));
  control_->RunSync([&] { channel_.reset(); });

  EXPECT_TRUE(RunOnControl<bool>([&]() -> Task<bool> {
    SubchannelRef ref;
    std::shared_ptr<SubchannelPool> pool =
        co_await PoolWithAReadySubchannel(control_->loop(), addresses_[0], &ref);
    const bool at_once = co_await SecondShutdownReturnsAtOnce(control_->loop(), *pool);
    ref = SubchannelRef();
    co_return at_once;
  }));

  std::unique_ptr<LoadReportingClient> client;
  std::shared_ptr<ClusterLoadStats> stats;
  control_->RunSync([&] {
    client = std::make_unique<LoadReportingClient>(control_->loop(), XdsNode{});
    XdsServerConfig server;
    server.server_uri = cp_->target();
    stats = client->AddCluster(server, "main", "s-main");
  });
  ASSERT_TRUE(cp_->WaitForLrsStreamOpened(milliseconds(30000)).has_value());
  EXPECT_TRUE(RunOnControl<bool>(
      [&]() -> Task<bool> { return SecondShutdownReturnsAtOnce(control_->loop(), *client); }));
  control_->RunSync([&] {
    client.reset();
    stats.reset();
  });

  EXPECT_TRUE(RunOnControl<bool>([&]() -> Task<bool> {
    StatusOr<std::shared_ptr<XdsClient>> xds_client = pool_->Get("xds:///svc");
    if (!xds_client.ok()) {
      ADD_FAILURE() << xds_client.status().ToString();
      co_return false;
    }
    XdsDependencyManager manager(**xds_client, "svc", "svc",
                                 [](StatusOr<std::shared_ptr<const XdsConfig>>) {});
    const bool manager_at_once = co_await SecondShutdownReturnsAtOnce(control_->loop(), manager);
    const bool client_at_once =
        co_await SecondShutdownReturnsAtOnce(control_->loop(), **xds_client);
    co_return manager_at_once&& client_at_once;
  }));
}

}  // namespace
}  // namespace uxds::testing
