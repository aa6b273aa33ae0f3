// Watchers (A88): shared subscriptions, late watchers (the resource, then the
// standing error, in that order), identical updates, cancellation, and
// callbacks that are queued, never reentrant.
#include <gtest/gtest.h>

#include <atomic>
#include <concepts>
#include <future>
#include <memory>
#include <string>

#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

class XdsClientWatchersTest : public XdsClientTest {};

// A watch ties the watcher to its resource type at compile time: the typed
// watcher's cast of the resource can then never be wrong.
template <typename Type, typename Watcher>
concept CanWatch = requires(XdsClient& client, const Type& type, std::shared_ptr<Watcher> watcher) {
  client.WatchResource(type, "name", watcher);
};
template <typename Type, typename Watcher>
concept CanWatchUntyped = requires(XdsClient& client, const Type& type,
                                   std::shared_ptr<Watcher> watcher) {
  client.WatchUntypedResource(type, "name", watcher);
};
static_assert(CanWatch<TestClusterType, ClusterWatcher>);
static_assert(CanWatch<TestEndpointsType, EndpointsWatcher>);
static_assert(!CanWatch<TestClusterType, EndpointsWatcher>);
static_assert(!CanWatch<TestEndpointsType, ClusterWatcher>);
// The type-erased type says nothing about the resource's C++ type.
static_assert(!CanWatch<XdsResourceType, ClusterWatcher>);
// A typed watcher cannot be slipped in through the untyped door either.
static_assert(!CanWatchUntyped<TestClusterType, EndpointsWatcher>);
static_assert(!CanWatchUntyped<TestClusterType, ClusterWatcher>);
// Only XdsResourceWatcher<T> and XdsUntypedResourceWatcher derive from the
// interface the client stores.
static_assert(!std::is_default_constructible_v<XdsResourceWatcherInterface>);

TEST_F(XdsClientWatchersTest, WatchersOfOneResourceShareOneSubscription) {
  StartClient();
  auto first = Watch(TestClusterType::Get(), "c1");
  auto second = Watch(TestClusterType::Get(), "c1");
  auto request = WaitForRequest(kClusterTypeUrl, {"c1"});
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->resource_names, std::vector<std::string>{"c1"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1", 1000)});
  EXPECT_TRUE(NextIsCluster(*first, "c1", 1000));
  EXPECT_TRUE(NextIsCluster(*second, "c1", 1000));
  Respond(kClusterTypeUrl, "2", {ClusterAny("c1", 2000)});
  EXPECT_TRUE(NextIsCluster(*first, "c1", 2000));
  EXPECT_TRUE(NextIsCluster(*second, "c1", 2000));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").watchers, 2u);
}

// A88: "the newly started watcher should also see both the valid resource and
// the ambient error, in that order."
TEST_F(XdsClientWatchersTest, ALateWatcherGetsTheResourceThenTheAmbientError) {
  StartClient();
  auto first = WatchAndReceiveCluster("c1");
  Respond(kClusterTypeUrl, "2", {ClusterAny("c1", -1)});
  EXPECT_TRUE(NextIsAmbient(*first, StatusCode::kInvalidArgument, "invalid resource"));
  auto late = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*late, "c1"));
  EXPECT_TRUE(NextIsAmbient(*late, StatusCode::kInvalidArgument, "invalid resource"));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*late));
  EXPECT_TRUE(NoMoreEvents(*first));
}

TEST_F(XdsClientWatchersTest, ALateWatcherGetsTheResourceThenTheServerError) {
  StartClient();
  auto first = WatchAndReceiveCluster("c1");
  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(cp_->DropAllConnections());
  EXPECT_TRUE(NextIsAmbient(*first, StatusCode::kUnavailable, "connection failed"));
  auto late = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*late, "c1"));
  EXPECT_TRUE(NextIsAmbient(*late, StatusCode::kUnavailable, "connection failed"));
}

TEST_F(XdsClientWatchersTest, ALateWatcherOfAResourceInErrorGetsTheError) {
  StartClient();
  auto first = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});
  Respond(kClusterTypeUrl, "1", {}, {{"c1", static_cast<int>(StatusCode::kNotFound), "gone"}});
  EXPECT_TRUE(NextIsError(*first, StatusCode::kNotFound, "gone"));
  auto late = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsError(*late, StatusCode::kNotFound, "gone"));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*late));
}

// DESIGN.md: identical updates notify nobody.
TEST_F(XdsClientWatchersTest, AnIdenticalResourceNotifiesNobody) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1", "1");
  Respond(kClusterTypeUrl, "2", {ClusterAny("c1")});
  EXPECT_TRUE(NoMoreEvents(*watcher));
  XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.state, XdsCacheState::kAcked);
  EXPECT_EQ(entry.version, "2");
  // A different one does.
  Respond(kClusterTypeUrl, "3", {ClusterAny("c1", 1000, "stats")});
  EXPECT_TRUE(NextIsCluster(*watcher, "c1"));
}

TEST_F(XdsClientWatchersTest, NoCallbackAfterCancelWatch) {
  StartClient();
  auto kept = WatchAndReceiveCluster("c1");
  auto cancelled = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsCluster(*cancelled, "c1"));
  CancelWatch(TestClusterType::Get(), "c1", cancelled.get());
  Respond(kClusterTypeUrl, "2", {ClusterAny("c1", 5000)});
  EXPECT_TRUE(NextIsCluster(*kept, "c1", 5000));
  EXPECT_TRUE(NoMoreEvents(*cancelled));
  // Cancelled before its queued notifications were delivered: none arrive.
  auto short_lived = std::make_shared<ClusterWatcher>();
  loop_->RunSync([&] {
    client_->WatchResource(TestClusterType::Get(), "c1", short_lived);
    client_->CancelWatch(TestClusterType::Get(), "c1", short_lived.get());
  });
  Flush();
  EXPECT_TRUE(NoMoreEvents(*short_lived));
  // So is a watch that failed at once.
  auto invalid = std::make_shared<ClusterWatcher>();
  const std::string bad_name = "xdstp://x/wrong.Type/c";
  loop_->RunSync([&] {
    client_->WatchResource(TestClusterType::Get(), bad_name, invalid);
    client_->CancelWatch(TestClusterType::Get(), bad_name, invalid.get());
  });
  Flush();
  EXPECT_TRUE(NoMoreEvents(*invalid));
}

// CancelWatch() stops the watch it names (type, name and watcher), also
// when the same watcher object holds a watch that failed at once.
TEST_F(XdsClientWatchersTest, CancelWatchStopsOnlyTheNamedWatchOfAWatcher) {
  StartClient();
  auto other = WatchAndReceiveCluster("c2");
  auto shared = std::make_shared<ClusterWatcher>();
  const std::string unknown_authority =
      "xdstp://nowhere.example.com/envoy.config.cluster.v3.Cluster/z";
  loop_->RunSync([&] {
    client_->WatchResource(TestClusterType::Get(), unknown_authority, shared);
    client_->WatchResource(TestClusterType::Get(), "c1", shared);
  });
  EXPECT_TRUE(NextIsError(*shared, StatusCode::kFailedPrecondition, "nowhere.example.com"));
  WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  Respond(kClusterTypeUrl, "2", {ClusterAny("c1"), ClusterAny("c2")});
  EXPECT_TRUE(NextIsCluster(*shared, "c1"));
  // The valid watch goes: c1 is unsubscribed and no longer reported.
  CancelWatch(TestClusterType::Get(), "c1", shared.get());
  WaitForRequest(kClusterTypeUrl, {"c2"});
  Respond(kClusterTypeUrl, "3", {ClusterAny("c2", 5000)});
  EXPECT_TRUE(NextIsCluster(*other, "c2", 5000));
  EXPECT_TRUE(NoMoreEvents(*shared));
}

// A watch that failed at once reports its error and is done: the client
// keeps nothing of it (no watcher reference), cancelled or not.
TEST_F(XdsClientWatchersTest, AFailedWatchIsNotKeptOnceReported) {
  StartClient();
  auto failed = std::make_shared<ClusterWatcher>();
  loop_->RunSync(
      [&] { client_->WatchResource(TestClusterType::Get(), "xdstp://x/wrong.Type/c", failed); });
  EXPECT_TRUE(NextIsError(*failed, StatusCode::kInvalidArgument, ""));
  Flush();
  EXPECT_EQ(failed.use_count(), 1);
  // Cancelling it afterwards is harmless.
  CancelWatch(TestClusterType::Get(), "xdstp://x/wrong.Type/c", failed.get());
}

// A watcher that starts another watch from its callback (as a Cluster
// watcher starts its endpoints watch). Its callbacks never run inside
// another callback or inside WatchResource().
class ChainingWatcher : public XdsResourceWatcher<TestClusterResource> {
 public:
  ChainingWatcher(XdsClient& client, std::shared_ptr<EndpointsWatcher> endpoints)
      : client_(client), endpoints_(std::move(endpoints)) {}

  void OnResourceChanged(StatusOr<std::shared_ptr<const TestClusterResource>> cluster) override {
    EnterCallback();
    if (cluster.ok() && !started_) {
      started_ = true;
      client_.WatchResource(TestEndpointsType::Get(), (*cluster)->name, endpoints_);
    }
    LeaveCallback();
  }
  void OnAmbientError(Status) override {
    EnterCallback();
    LeaveCallback();
  }
  static void EnterCallback() {
    if (in_callback_.exchange(true)) reentered_ = true;
  }
  static void LeaveCallback() { in_callback_ = false; }
  static inline std::atomic<bool> in_callback_{false};
  static inline std::atomic<bool> reentered_{false};

 private:
  XdsClient& client_;
  std::shared_ptr<EndpointsWatcher> endpoints_;
  bool started_ = false;
};

class CheckingEndpointsWatcher : public EndpointsWatcher {
 public:
  void OnResourceChanged(StatusOr<std::shared_ptr<const TestEndpointsResource>> r) override {
    ChainingWatcher::EnterCallback();
    EndpointsWatcher::OnResourceChanged(std::move(r));
    ChainingWatcher::LeaveCallback();
  }
};

TEST_F(XdsClientWatchersTest, AWatcherMayStartWatchesFromItsCallback) {
  StartClient();
  auto endpoints = std::make_shared<CheckingEndpointsWatcher>();
  std::shared_ptr<ChainingWatcher> cluster;
  loop_->RunSync([&] {
    cluster = std::make_shared<ChainingWatcher>(*client_, endpoints);
    client_->WatchResource(TestClusterType::Get(), "c1", cluster);
  });
  WaitForRequest(kClusterTypeUrl, {"c1"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1")});
  WaitForRequest(kEndpointsTypeUrl, {"c1"});
  Respond(kEndpointsTypeUrl, "1", {EndpointsAny("c1")});
  EXPECT_TRUE(NextIsEndpoints(*endpoints, "c1"));
  EXPECT_FALSE(ChainingWatcher::reentered_);
  // The client is shut down before `cluster`, which refers to it, goes.
  ShutdownClient();
}

TEST_F(XdsClientWatchersTest, ShutdownAndDestroyClosesTheStreamInTheBackground) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  loop_->RunSync([&] { XdsClient::ShutdownAndDestroy(std::move(client_)); });
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
}

// A watcher that takes any type and hands the resource back to its type.
class JsonWatcher final : public XdsUntypedResourceWatcher {
 public:
  void OnResourceChanged(StatusOr<XdsResourceData> resource) override {
    std::lock_guard lock(mu_);
    json_ = resource.ok() ? TestClusterType::Get().ResourceToJson(*resource)
                          : resource.status().ToString();
  }
  void OnAmbientError(Status) override {}
  std::string json() {
    std::lock_guard lock(mu_);
    return json_;
  }

 private:
  std::mutex mu_;
  std::string json_;
};

TEST_F(XdsClientWatchersTest, AnUntypedWatcherGetsTheResourceOfItsType) {
  StartClient();
  auto typed = WatchAndReceiveCluster("c1");
  auto untyped = std::make_shared<JsonWatcher>();
  loop_->RunSync([&] { client_->WatchUntypedResource(TestClusterType::Get(), "c1", untyped); });
  Flush();
  EXPECT_EQ(untyped->json(), TestClusterType::Get().ToJson(TestClusterResource{"c1", 1000, ""}));
}

// A name that is not UTF-8 would make the control plane reject the whole
// request (resource_names is a proto3 string), failing every watch on it.
TEST_F(XdsClientWatchersTest, ANameThatIsNotUtf8FailsOnlyItsOwnWatch) {
  StartClient();
  auto bad = Watch(TestClusterType::Get(),
                   "c\xff"
                   "1");
  auto surrogate = Watch(TestClusterType::Get(), "c\xed\xa0\x80");
  auto good = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsError(*bad, StatusCode::kInvalidArgument,
                          "resource name is not valid UTF-8 (byte 0xFF at offset 1)"));
  EXPECT_TRUE(NextIsError(*surrogate, StatusCode::kInvalidArgument,
                          "resource name is not valid UTF-8 (byte 0xED at offset 1)"));
  ASSERT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1"}).has_value());
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1", 1000)});
  EXPECT_TRUE(NextIsCluster(*good, "c1", 1000));
  // Non-ASCII names that are UTF-8 are fine.
  auto accented = Watch(TestClusterType::Get(), "c\xc3\xa9");
  EXPECT_TRUE(WaitForRequest(kClusterTypeUrl, {"c1", "c\xc3\xa9"}).has_value());
  loop_->RunSync([&] {
    client_->CancelWatch(TestClusterType::Get(),
                         "c\xff"
                         "1",
                         bad.get());
    client_->CancelWatch(TestClusterType::Get(), "c\xc3\xa9", accented.get());
  });
}

// Destroying a client without Shutdown() is safe: no callback after the
// destructor, and the shutdown finishes on the loop.
TEST_F(XdsClientWatchersTest, DestroyingTheClientWithoutShutdownStopsEveryCallback) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  // A response whose notification is queued when the client goes.
  ASSERT_TRUE(Respond(kClusterTypeUrl, "2", {ClusterAny("c1", 2000)}).has_value());
  loop_->RunSync([&] { client_.reset(); });
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
  Flush();
  // Either the update was delivered before the destructor, or never.
  for (const ClusterWatcher::Event& event : watcher->TakePending()) {
    EXPECT_EQ(event.kind, ClusterWatcher::Event::Kind::kResource);
  }
}

TEST_F(XdsClientWatchersTest, DestroyingTheClientWhileItShutsDownIsSafe) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  loop_->RunSync([&] {
    auto shutdown = [](XdsClient* client) -> Task<void> { co_await client->Shutdown(); };
    loop_->loop().Spawn(shutdown(client_.get()));
  });
  // The spawned Shutdown() has started (and maybe finished) by now.
  loop_->RunSync([] {});
  loop_->RunSync([&] { client_.reset(); });
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
}

// A task waiting on Shutdown(), and the client destroyed one turn later,
// while the teardown still runs: the client then finishes its shutdown in a
// task of its own, which frees it; the waiter, woken in the same turn,
// must return without reading the freed client (under ASan).
TEST_F(XdsClientWatchersTest, AShutdownWaiterSurvivesTheClientDestroyedATurnLater) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  std::promise<void> waiter_returned;
  loop_->RunSync([&] {
    auto wait = [](XdsClient* client, std::promise<void>* returned) -> Task<void> {
      co_await client->Shutdown();
      returned->set_value();
    };
    loop_->loop().Spawn(wait(client_.get(), &waiter_returned));
    auto destroy = [](Loop& loop, std::unique_ptr<XdsClient>& client) -> Task<void> {
      co_await loop.Yield();
      client.reset();
    };
    loop_->loop().Spawn(destroy(loop_->loop(), client_));
  });
  EXPECT_EQ(waiter_returned.get_future().wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
}

// ShutdownAndDestroy() beside another task waiting on Shutdown(): the
// first waiter to resume frees the client, and the other waiters, already
// on their way back, must still return from Shutdown() safely (under
// ASan: no use of the freed client).
TEST_F(XdsClientWatchersTest, AClientFreedWhenItsShutdownEndsLetsTheOtherWaitersReturn) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  std::promise<void> other_returned;
  loop_->RunSync([&] {
    XdsClient* client = client_.get();
    // Spawned first, so it joins the shutdown first and resumes first.
    XdsClient::ShutdownAndDestroy(std::move(client_));
    auto wait = [](XdsClient* client, std::promise<void>* returned) -> Task<void> {
      co_await client->Shutdown();
      returned->set_value();
    };
    loop_->loop().Spawn(wait(client, &other_returned));
  });
  EXPECT_EQ(other_returned.get_future().wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
}

}  // namespace
}  // namespace uxds::testing
