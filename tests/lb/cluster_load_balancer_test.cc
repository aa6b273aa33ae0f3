// A cluster's whole policy tree (cluster_impl, priority, ring_hash /
// weighted_target / round_robin) against real backends on loopback, picked
// through its PickerSlot as application threads pick.
#include "lb/cluster_load_balancer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "lb/lb_test_util.h"
#include "lb/ring_hash_policy.h"
#include "uxds/ring_hash.h"

namespace uxds {
namespace {

using lb_testing::Backend;
using lb_testing::WaitUntil;
using State = ConnectivityState;
using EndpointPicking = ClusterResource::LbPolicy::EndpointPicking;

// priority -> locality -> addresses; locality weights in `weights`
// (priority -> locality), 1 when absent.
EndpointResource MakeEndpoints(const std::vector<std::vector<std::vector<std::string>>>& layout,
                               const std::vector<std::vector<uint32_t>>& weights = {}) {
  EndpointResource r;
  for (size_t p = 0; p < layout.size(); ++p) {
    EndpointResource::Priority priority;
    for (size_t l = 0; l < layout[p].size(); ++l) {
      EndpointResource::Locality locality;
      locality.name.region = "r";
      locality.name.zone = "z" + std::to_string(p) + "-" + std::to_string(l);
      locality.weight = p < weights.size() && l < weights[p].size() ? weights[p][l] : 1;
      for (const std::string& a : layout[p][l]) {
        EndpointResource::Endpoint e;
        e.addresses = {a};
        locality.endpoints.push_back(e);
      }
      priority.localities.push_back(locality);
    }
    r.priorities.push_back(priority);
  }
  return r;
}

ClusterResource RoundRobinCluster() { return ClusterResource{}; }

ClusterResource RingHashCluster() {
  ClusterResource c;
  c.lb_policy.weighted_locality = false;
  c.lb_policy.endpoint_picking = EndpointPicking::kRingHash;
  return c;
}

ClusterResource LeastRequestCluster(uint32_t choice_count) {
  ClusterResource c;
  c.lb_policy.endpoint_picking = EndpointPicking::kLeastRequest;
  c.lb_policy.choice_count = choice_count;
  return c;
}

class ClusterLoadBalancerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    pool_ = SubchannelPool::Create(*loop_, lb_testing::FastSubchannelOptions());
    options_.priority_failover_timeout = std::chrono::milliseconds(300);
    options_.child_retention_interval = std::chrono::milliseconds(300);
    for (int i = 0; i < 4; ++i) {
      backends_.push_back(std::make_unique<Backend>(*loop_));
      ASSERT_TRUE(backends_.back()->Start().ok());
    }
    lb_ = std::make_unique<ClusterLoadBalancer>(*loop_, pool_, options_);
  }
  void TearDown() override {
    lb_.reset();
    loop_->BlockOn([this]() -> Task<void> {
      for (auto& b : backends_) co_await b->Stop();
      co_await pool_->Shutdown();
    }());
    pool_.reset();
  }

  std::string Addr(size_t i) const { return backends_[i]->address_text(); }

  // One pick from the published picker, as an application thread does it;
  // a call it completes ends at once unless `hold_call`.
  PickResult Pick(std::optional<uint64_t> hash = std::nullopt, bool hold_call = false) {
    PickScope scope(lb_->picker_slot());
    PickArgs args;
    args.hash = hash;
    PickResult r = scope.Pick(args);
    last_address_ = r.kind == PickResult::Kind::kComplete ? r.endpoint->address : "";
    last_status_ = r.kind == PickResult::Kind::kFail ? *r.status : Status();
    if (!hold_call) {
      CallEnded(std::exchange(r.call_counter, nullptr));
      CallEnded(std::exchange(r.endpoint_calls, nullptr));  // least_request's (A48)
    }
    return r;
  }
  // Picks until one completes; the address it went to.
  Task<std::string> PickUntilComplete(std::optional<uint64_t> hash = std::nullopt,
                                      std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const bool done = co_await WaitUntil(
        *loop_, [&] { return Pick(hash).kind == PickResult::Kind::kComplete; }, limit);
    co_return done ? last_address_ : "";
  }
  Task<bool> WaitForLbState(State state) {
    co_return co_await WaitUntil(*loop_, [&] { return lb_->state() == state; });
  }

  std::unique_ptr<Loop> loop_;
  std::shared_ptr<SubchannelPool> pool_;
  LbPolicyOptions options_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<ClusterLoadBalancer> lb_;
  std::string last_address_;
  Status last_status_;
};

TEST_F(ClusterLoadBalancerTest, NothingPublishedQueues) {
  PickScope scope(lb_->picker_slot());
  EXPECT_EQ(scope.Pick(PickArgs{}).kind, PickResult::Kind::kQueue);
}

TEST_F(ClusterLoadBalancerTest, RoundRobinSpreadsPicksEvenlyOverReadyEndpoints) {
  lb_->Update(RoundRobinCluster(), MakeEndpoints({{{Addr(0), Addr(1), Addr(2)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    const bool ready = co_await WaitUntil(*loop_, [&] {
      return lb_->state() == State::kReady && pool_->size() == 3 &&
             Pick().kind == PickResult::Kind::kComplete;
    });
    CO_ASSERT_TRUE(ready);
    // Let all three connect, then count: one thread walks them in turn.
    (void)co_await SleepFor(*loop_, std::chrono::milliseconds(100));
    std::map<std::string, int> counts;
    for (int i = 0; i < 3000; ++i) {
      Pick();
      ++counts[last_address_];
    }
    EXPECT_EQ(counts,
              (std::map<std::string, int>{{Addr(0), 1000}, {Addr(1), 1000}, {Addr(2), 1000}}));
  }());
}

// A48 through the whole tree (weighted_target over least_request, as the
// legacy LEAST_REQUEST asks): calls held on one endpoint send the next
// picks elsewhere; the count survives an update that keeps the endpoint,
// and the tree's picks count the call on the endpoint until it ends.
TEST_F(ClusterLoadBalancerTest, LeastRequestAvoidsAnEndpointWithCallsInFlight) {
  lb_->Update(LeastRequestCluster(10), MakeEndpoints({{{Addr(0), Addr(1), Addr(2)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    const bool ready = co_await WaitUntil(*loop_, [&] {
      if (lb_->state() != State::kReady || pool_->size() != 3) return false;
      for (size_t i = 0; i < 3; ++i) {
        const Subchannel* s = pool_->Find(Addr(i));
        if (s == nullptr || s->state() != State::kReady) return false;
      }
      return true;
    });
    CO_ASSERT_TRUE(ready);
    // Two calls held on whatever endpoints the first picks chose: with ten
    // draws, they go to two different endpoints, and the third takes
    // (nearly) everything else.
    std::vector<PickResult> held;
    std::set<std::string> busy;
    while (busy.size() < 2) {
      held.push_back(Pick(std::nullopt, /*hold_call=*/true));
      CO_ASSERT_TRUE(held.back().kind == PickResult::Kind::kComplete &&
                     held.back().endpoint_calls != nullptr);
      busy.insert(last_address_);
    }
    auto count_picks = [&] {
      std::map<std::string, int> counts;
      for (int i = 0; i < 1000; ++i) {
        const PickResult r = Pick(std::nullopt, /*hold_call=*/true);
        ++counts[last_address_];
        CallFinished(r, true);
      }
      return counts;
    };
    std::map<std::string, int> counts = count_picks();
    std::string idle;
    for (size_t i = 0; i < 3; ++i) {
      if (!busy.contains(Addr(i))) idle = Addr(i);
    }
    // A pick goes to a busy endpoint only when all ten draws are busy ones:
    // (2/3)^10, about 17 of 1000 (round_robin: 667).
    EXPECT_GT(counts[idle], 900) << ::testing::PrintToString(counts);
    // An update that keeps the endpoints keeps their counts.
    lb_->Update(LeastRequestCluster(10), MakeEndpoints({{{Addr(0), Addr(1), Addr(2), Addr(3)}}}));
    counts = count_picks();
    EXPECT_EQ(counts[Addr(0)] + counts[Addr(1)] + counts[Addr(2)] + counts[Addr(3)], 1000);
    for (const std::string& address : busy) EXPECT_LT(counts[address], 100) << address;
    // Ended, they are picked again.
    for (const PickResult& r : held) CallFinished(r, true);
    counts = count_picks();
    for (const std::string& address : busy) EXPECT_GT(counts[address], 100) << address;
  }());
}

TEST_F(ClusterLoadBalancerTest, WeightedTargetSpreadsPicksByLocalityWeight) {
  // Two localities of one endpoint each, weights 1 and 3.
  lb_->Update(RoundRobinCluster(), MakeEndpoints({{{Addr(0)}, {Addr(1)}}}, {{1, 3}}));
  loop_->BlockOn([&]() -> Task<void> {
    const bool both = co_await WaitUntil(*loop_, [&] {
      size_t ready = 0;
      for (size_t i = 0; i < 2; ++i)
        ready += pool_->Get(backends_[i]->address())->state() == State::kReady;
      return ready == 2 && lb_->state() == State::kReady;
    });
    CO_ASSERT_TRUE(both);
    (void)co_await SleepFor(*loop_, std::chrono::milliseconds(20));
    std::map<std::string, int> counts;
    constexpr int kPicks = 40000;
    for (int i = 0; i < kPicks; ++i) {
      Pick();
      ++counts[last_address_];
    }
    // Expected shares 0.25 / 0.75; 40000 picks put 3 standard deviations
    // at about 0.0065.
    EXPECT_NEAR(counts[Addr(0)] / double{kPicks}, 0.25, 0.015);
    EXPECT_NEAR(counts[Addr(1)] / double{kPicks}, 0.75, 0.015);
  }());
}

TEST_F(ClusterLoadBalancerTest, RingHashSpreadsRandomHashesByEndpointTimesLocalityWeight) {
  // Locality weights 1 and 2, endpoint weights 1 and 1: shares 1/3, 2/3.
  EndpointResource endpoints = MakeEndpoints({{{Addr(0)}, {Addr(1)}}}, {{1, 2}});
  lb_->Update(RingHashCluster(), endpoints);
  loop_->BlockOn([&]() -> Task<void> {
    // Connect both by picking each once (ring_hash connects on picks).
    std::map<std::string, int> counts;
    const bool ready = co_await WaitUntil(*loop_, [&] {
      Pick(ThreadRandom());
      return pool_->size() == 2 && pool_->Get(backends_[0]->address())->state() == State::kReady &&
             pool_->Get(backends_[1]->address())->state() == State::kReady;
    });
    CO_ASSERT_TRUE(ready);
    constexpr int kPicks = 40000;
    for (int i = 0; i < kPicks; ++i) {
      Pick(ThreadRandom());
      ++counts[last_address_];
    }
    // The weights set how many ring entries each endpoint gets (exactly
    // 1:2). How much of the hash space those entries own depends on where
    // the backends' ephemeral ports hash, so the share the picks must
    // follow is the one this ring gives, measured from the ring itself;
    // random hashes add about 0.7 % (3 sigma).
    const std::vector<RingEndpoint> ring_endpoints = {{Addr(0), 1}, {Addr(1), 2}};
    const Ring ring = Ring::Build(ring_endpoints, RingSizeConfig{});
    size_t entries[2] = {0, 0};
    double owned[2] = {0, 0};
    for (size_t i = 0; i < ring.size(); ++i) {
      // Entry i owns the hashes after entry i-1 up to its own (entry 0 also
      // owns the wrap past the last one); unsigned subtraction wraps too.
      const uint64_t previous = ring[(i + ring.size() - 1) % ring.size()].hash;
      ++entries[ring[i].endpoint];
      owned[ring[i].endpoint] += static_cast<double>(ring[i].hash - previous) / 0x1p64;
    }
    EXPECT_EQ(entries[1], 2 * entries[0]);
    EXPECT_NEAR(owned[0] + owned[1], 1.0, 1e-9);
    EXPECT_NEAR(counts[Addr(0)] / double{kPicks}, owned[0], 0.015);
    EXPECT_NEAR(counts[Addr(1)] / double{kPicks}, owned[1], 0.015);
  }());
}

TEST_F(ClusterLoadBalancerTest, RingHashSameHashSameEndpoint) {
  lb_->Update(RingHashCluster(), MakeEndpoints({{{Addr(0), Addr(1), Addr(2), Addr(3)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    for (uint64_t hash : {1ull, 0x8000000000000000ull, 0x1234567890abcdefull}) {
      const std::string first = co_await PickUntilComplete(hash);
      CO_ASSERT_TRUE(!first.empty());
      for (int i = 0; i < 50; ++i) {
        Pick(hash);
        EXPECT_EQ(last_address_, first);
      }
    }
  }());
}

TEST_F(ClusterLoadBalancerTest, RingHashKeepsOneConnectionAttemptGoingWithoutPicks) {
  // A42 (with proposal#475's fix): one endpoint failed and none CONNECTING
  // is CONNECTING by rule 4, and the policy then starts one IDLE endpoint
  // by itself; no pick after the first asks for it.
  const std::string refused = lb_testing::RefusedAddress().ToString();
  lb_->Update(RingHashCluster(), MakeEndpoints({{{refused, Addr(0), Addr(1)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    // The hash of the refused endpoint's first ring entry picks that entry.
    EXPECT_EQ(Pick(XxHash64(refused + "_0")).kind, PickResult::Kind::kQueue);
    CO_ASSERT_TRUE(co_await WaitForLbState(State::kReady));
    const uint64_t first = pool_->Get(backends_[0]->address())->connection_attempts();
    const uint64_t second = pool_->Get(backends_[1]->address())->connection_attempts();
    EXPECT_EQ(first + second, 1u);  // one IDLE endpoint, not every one
  }());
}

TEST_F(ClusterLoadBalancerTest, RingHashRequestHashHeaderFromTheCluster) {
  // A76: the Cluster's ring_hash_experimental config names the header.
  ClusterResource cluster = RingHashCluster();
  cluster.lb_policy.request_hash_header = "x-user";
  lb_->Update(cluster, MakeEndpoints({{{Addr(0), Addr(1), Addr(2), Addr(3)}}}));
  auto pick_for = [&](const std::string& user, uint64_t channel_hash) -> std::string {
    const std::pair<std::string, std::string> metadata[] = {{"x-user", user}};
    PickArgs args;
    args.metadata = metadata;
    args.hash = channel_hash;
    PickScope scope(lb_->picker_slot());
    const PickResult r = scope.Pick(args);
    if (r.kind != PickResult::Kind::kComplete) return "";
    CallEnded(r.call_counter);
    return r.endpoint->address;
  };
  loop_->BlockOn([&]() -> Task<void> {
    // Header values spread over the ring connect every endpoint.
    const bool all_ready = co_await WaitUntil(*loop_, [&] {
      for (int i = 0; i < 64; ++i) pick_for("user-" + std::to_string(i), 0);
      size_t ready = 0;
      for (size_t b = 0; b < 4; ++b) {
        ready += pool_->Get(backends_[b]->address())->state() == State::kReady;
      }
      return ready == 4;
    });
    CO_ASSERT_TRUE(all_ready);
    std::set<std::string> endpoints_seen;
    for (int i = 0; i < 64; ++i) {
      const std::string user = "user-" + std::to_string(i);
      const std::string first = pick_for(user, 1);
      EXPECT_FALSE(first.empty());
      endpoints_seen.insert(first);
      // The header decides; the hash the channel passes does not.
      for (uint64_t h : {2ull, 0xffffffffffffffffull, 0x8000000000000000ull}) {
        EXPECT_EQ(pick_for(user, h), first) << user;
      }
    }
    EXPECT_GT(endpoints_seen.size(), 1u);  // different users, different endpoints
  }());
}

TEST_F(ClusterLoadBalancerTest, RoundRobinFailsOverToTheNextPriorityAndRecovers) {
  lb_->Update(RoundRobinCluster(), MakeEndpoints({{{Addr(0), Addr(1)}}, {{Addr(2)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    const std::string first = co_await PickUntilComplete();
    EXPECT_TRUE(first == Addr(0) || first == Addr(1)) << first;
    EXPECT_EQ(lb_->priority()->current_priority(), 0);
    // Priority 0's servers stop: its endpoints fail, priority 1 takes over.
    co_await backends_[0]->Stop();
    co_await backends_[1]->Stop();
    const bool failed_over = co_await WaitUntil(*loop_, [&] {
      return Pick().kind == PickResult::Kind::kComplete && last_address_ == Addr(2);
    });
    EXPECT_TRUE(failed_over);
    EXPECT_EQ(lb_->priority()->current_priority(), 1);
    // One of them returns: picks go back to priority 0, priority 1 is
    // deactivated and, after the retention interval, deleted.
    EXPECT_TRUE(backends_[0]->Start().ok());
    const bool recovered = co_await WaitUntil(*loop_, [&] {
      return Pick().kind == PickResult::Kind::kComplete && last_address_ == Addr(0);
    });
    EXPECT_TRUE(recovered);
    EXPECT_EQ(lb_->priority()->current_priority(), 0);
    EXPECT_TRUE(lb_->priority()->child_deactivated(1));
    const bool deleted =
        co_await WaitUntil(*loop_, [&] { return lb_->priority()->child_count() == 1; });
    EXPECT_TRUE(deleted);
  }());
}

TEST_F(ClusterLoadBalancerTest, RingHashFailoverTimerMovesOnFromAPriorityStuckConnecting) {
  // Priority 0 never answers (its connection attempt lasts 20 s); the
  // failover timer (300 ms here) lets priority 1 serve.
  lb_testing::Blackhole blackhole;
  lb_->Update(RingHashCluster(), MakeEndpoints({{{blackhole.address().ToString()}}, {{Addr(3)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    EXPECT_EQ(Pick(42).kind, PickResult::Kind::kQueue);  // priority 0, IDLE: connects
    const bool connecting = co_await WaitForLbState(State::kConnecting);
    EXPECT_TRUE(connecting);
    EXPECT_TRUE(lb_->priority()->child_failover_timer_pending(0));  // A42 restart on CONNECTING
    const std::string picked = co_await PickUntilComplete(42);
    EXPECT_EQ(picked, Addr(3));
    EXPECT_EQ(lb_->priority()->current_priority(), 1);
  }());
}

TEST_F(ClusterLoadBalancerTest,
       RingHashReportsFailureAfterTwoEndpointsFailAndRecoversWithoutPicks) {
  const SocketAddress refused1 = lb_testing::RefusedAddress();
  const SocketAddress refused2 = lb_testing::RefusedAddress();
  lb_->Update(RingHashCluster(),
              MakeEndpoints({{{refused1.ToString(), refused2.ToString(), Addr(0)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    EXPECT_EQ(lb_->state(), State::kIdle);  // rule 5: all IDLE
    // Picks that land on the refused endpoints make them fail; after two
    // failures the policy reports TRANSIENT_FAILURE (rule 2) ...
    bool saw_failure = false;
    lb_->SetStateObserver([&](State s, const Status&) {
      if (s == State::kTransientFailure) saw_failure = true;
    });
    auto sub1 = pool_->Get(refused1);
    auto sub2 = pool_->Get(refused2);
    sub1->RequestConnection();
    sub2->RequestConnection();
    // ... and it keeps one attempt going on its own, so the IDLE endpoint
    // is connected without any pick and the policy becomes READY.
    const bool ready = co_await WaitForLbState(State::kReady);
    EXPECT_TRUE(ready);
    EXPECT_TRUE(saw_failure);
    EXPECT_EQ(pool_->Get(backends_[0]->address())->state(), State::kReady);
  }());
}

TEST_F(ClusterLoadBalancerTest, RingHashAggregationRules) {
  using P = RingHashPolicy;
  // ready, connecting, idle, transient_failure
  EXPECT_EQ(P::Aggregate(1, 0, 0, 5), State::kReady);             // 1
  EXPECT_EQ(P::Aggregate(0, 3, 1, 2), State::kTransientFailure);  // 2
  EXPECT_EQ(P::Aggregate(0, 1, 3, 1), State::kConnecting);        // 3
  EXPECT_EQ(P::Aggregate(0, 0, 3, 1), State::kConnecting);        // 4
  EXPECT_EQ(P::Aggregate(0, 0, 3, 0), State::kIdle);              // 5
  EXPECT_EQ(P::Aggregate(0, 0, 0, 1), State::kTransientFailure);  // 6 (one endpoint)
  EXPECT_EQ(P::Aggregate(0, 0, 0, 0), State::kTransientFailure);  // 6 (none)
}

TEST_F(ClusterLoadBalancerTest, DropOverloadsDropTheirShareWithTheCategoryInTheStatus) {
  EndpointResource endpoints = MakeEndpoints({{{Addr(0)}}});
  endpoints.drop_overloads = {{"throttle", 250000}};
  lb_->Update(RoundRobinCluster(), endpoints);
  loop_->BlockOn([&]() -> Task<void> {
    const std::string first = co_await PickUntilComplete();
    CO_ASSERT_TRUE(!first.empty());
    constexpr int kPicks = 40000;
    int dropped = 0;
    for (int i = 0; i < kPicks; ++i) {
      const PickResult r = Pick();
      if (r.kind == PickResult::Kind::kFail) {
        ++dropped;
        EXPECT_TRUE(r.drop);
        EXPECT_EQ(r.status->ToString(), "UNAVAILABLE: EDS-configured drop: throttle");
      }
    }
    EXPECT_NEAR(dropped / double{kPicks}, 0.25, 0.015);
  }());
}

TEST_F(ClusterLoadBalancerTest, CircuitBreakerDropsOverMaxRequests) {
  ClusterResource cluster = RoundRobinCluster();
  cluster.max_concurrent_requests = 2;
  lb_->Update(cluster, MakeEndpoints({{{Addr(0)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    const bool ready = co_await WaitForLbState(State::kReady);
    CO_ASSERT_TRUE(ready);
    const PickResult a = Pick(std::nullopt, /*hold_call=*/true);
    const PickResult b = Pick(std::nullopt, /*hold_call=*/true);
    EXPECT_EQ(a.kind, PickResult::Kind::kComplete);
    EXPECT_EQ(b.kind, PickResult::Kind::kComplete);
    EXPECT_EQ(lb_->calls_in_flight(), 2);
    const PickResult c = Pick(std::nullopt, /*hold_call=*/true);
    CO_ASSERT_TRUE(c.kind == PickResult::Kind::kFail);
    EXPECT_TRUE(c.drop);
    EXPECT_EQ(c.status->ToString(), "UNAVAILABLE: circuit breaker drop");
    CallEnded(a.call_counter);
    EXPECT_EQ(Pick().kind, PickResult::Kind::kComplete);
    CallEnded(b.call_counter);
  }());
}

// Every report publishes a picker and retires one; reclaiming them costs a
// scan of the readers (a membarrier). Reports in one turn share a few
// scans, the retired list stays bounded meanwhile, and the reclaim timer
// frees the rest.
TEST_F(ClusterLoadBalancerTest, ManyReportsInOneTurnShareAFewReaderScans) {
  const EndpointResource endpoints = MakeEndpoints({{{Addr(0), Addr(1)}}});
  lb_->Update(RoundRobinCluster(), endpoints);
  const uint64_t published = lb_->pickers_published();
  const uint64_t scans = PickerSlot::reader_scans();
  constexpr uint64_t kReports = 1000;
  for (uint64_t i = 0; i < kReports; ++i) {
    lb_->Update(RoundRobinCluster(), endpoints);
    ASSERT_LE(lb_->picker_slot().retired(), 64u);
  }
  EXPECT_GE(lb_->pickers_published() - published, kReports);
  EXPECT_LE(PickerSlot::reader_scans() - scans, kReports / 64 + 1);
  loop_->BlockOn([&]() -> Task<void> {
    const bool freed = co_await WaitUntil(
        *loop_, [&] { return lb_->picker_slot().retired() == 0; }, std::chrono::seconds(1));
    EXPECT_TRUE(freed);
  }());
}

// The reclaim timer frees no picker an open scope may still use: every
// picker retired after the scope opened waits for its end.
TEST_F(ClusterLoadBalancerTest, AnOpenScopeKeepsEveryPickerRetiredSinceItOpened) {
  const EndpointResource endpoints = MakeEndpoints({{{Addr(0)}}});
  lb_->Update(RoundRobinCluster(), endpoints);
  loop_->BlockOn([&]() -> Task<void> {
    const bool ready = co_await WaitForLbState(State::kReady);
    CO_ASSERT_TRUE(ready);
    {
      PickScope scope(lb_->picker_slot());
      for (int i = 0; i < 200; ++i) lb_->Update(RoundRobinCluster(), endpoints);
      // The timer fires (and scans) several times meanwhile.
      (void)co_await SleepFor(*loop_, std::chrono::milliseconds(20));
      EXPECT_GE(lb_->picker_slot().retired(), 200u);
      // The picker the scope saw still picks.
      PickResult r = scope.Pick(PickArgs{});
      EXPECT_EQ(r.kind, PickResult::Kind::kComplete);
      CallEnded(r.call_counter);
    }
    const bool freed = co_await WaitUntil(
        *loop_, [&] { return lb_->picker_slot().retired() == 0; }, std::chrono::seconds(1));
    EXPECT_TRUE(freed);
  }());
}

// A42: the endpoint -> locality table is made once for many reports, and
// made again when the pool's subchannels change: the endpoints of a
// priority started later count in their locality.
TEST_F(ClusterLoadBalancerTest, PicksOfAPriorityStartedLaterCountInItsLocality) {
  auto stats = std::make_shared<ClusterLoadStats>("c", "s");
  auto own = std::make_shared<ClusterImplConfig>();
  own->counter = CallCounter::Create();
  own->load = stats;
  lb_->Update(RoundRobinCluster(), MakeEndpoints({{{Addr(0)}}, {{Addr(2)}}}), own);
  auto zone_of_pick = [&]() -> std::string {
    PickScope scope(lb_->picker_slot());
    const PickResult r = scope.Pick(PickArgs{});
    if (r.kind != PickResult::Kind::kComplete) return "";
    std::string zone = r.locality_stats != nullptr ? r.locality_stats->name().zone : "none";
    CallFinished(r, true);
    return r.endpoint->address + " " + zone;
  };
  loop_->BlockOn([&]() -> Task<void> {
    const bool first = co_await WaitUntil(*loop_, [&] { return !zone_of_pick().empty(); });
    CO_ASSERT_TRUE(first);
    EXPECT_EQ(zone_of_pick(), Addr(0) + " z0-0");
    co_await backends_[0]->Stop();
    const bool failed_over =
        co_await WaitUntil(*loop_, [&] { return zone_of_pick().starts_with(Addr(2)); });
    CO_ASSERT_TRUE(failed_over);
    EXPECT_EQ(zone_of_pick(), Addr(2) + " z1-0");
  }());
}

TEST_F(ClusterLoadBalancerTest, NoEndpointsFailsPicksWithUnavailable) {
  lb_->Update(RoundRobinCluster(), EndpointResource{});
  EXPECT_EQ(lb_->state(), State::kTransientFailure);
  const PickResult r = Pick();
  ASSERT_EQ(r.kind, PickResult::Kind::kFail);
  EXPECT_EQ(r.status->code(), StatusCode::kUnavailable);
}

TEST_F(ClusterLoadBalancerTest, UnhealthyEndpointsTakeNoTraffic) {
  EndpointResource endpoints = MakeEndpoints({{{Addr(0), Addr(1)}}});
  endpoints.priorities[0].localities[0].endpoints[1].health_status =
      EndpointResource::HealthStatus::kUnhealthy;
  lb_->Update(RoundRobinCluster(), endpoints);
  loop_->BlockOn([&]() -> Task<void> {
    const std::string first = co_await PickUntilComplete();
    EXPECT_EQ(first, Addr(0));
    for (int i = 0; i < 20; ++i) {
      Pick();
      EXPECT_EQ(last_address_, Addr(0));
    }
    EXPECT_EQ(pool_->size(), 1u);
  }());
}

TEST_F(ClusterLoadBalancerTest, EndpointUpdatesKeepConnectionsToKeptAddresses) {
  lb_->Update(RoundRobinCluster(), MakeEndpoints({{{Addr(0), Addr(1)}}}));
  loop_->BlockOn([&]() -> Task<void> {
    const bool ready = co_await WaitUntil(*loop_, [&] {
      return pool_->size() == 2 && pool_->Get(backends_[0]->address())->state() == State::kReady;
    });
    CO_ASSERT_TRUE(ready);
    const uint64_t attempts = pool_->Get(backends_[0]->address())->connection_attempts();
    lb_->Update(RoundRobinCluster(), MakeEndpoints({{{Addr(0), Addr(2)}}}));
    EXPECT_EQ(pool_->Get(backends_[0]->address())->state(), State::kReady);
    EXPECT_EQ(pool_->Get(backends_[0]->address())->connection_attempts(), attempts);
    // Addr(1) is released once the pickers naming it are reclaimed.
    const bool released = co_await WaitUntil(
        *loop_, [&] { return Pick().kind == PickResult::Kind::kComplete && pool_->size() == 2; });
    EXPECT_TRUE(released);
  }());
}

// A37: a priority marked pick_first (a LOGICAL_DNS cluster's) uses
// pick_first whatever the cluster's LB policy: here RING_HASH, which would
// fail a pick without a hash; pick_first skips the refused first address
// and sends every pick to the second.
TEST_F(ClusterLoadBalancerTest, APickFirstPriorityIgnoresTheClustersLbPolicy) {
  const std::string refused = lb_testing::RefusedAddress().ToString();
  auto own = std::make_shared<ClusterImplConfig>();
  own->counter = CallCounter::Create();
  own->max_requests = 1024;
  lb_->Update(RingHashCluster(), MakeEndpoints({{{refused, Addr(0), Addr(1)}}}), own, {},
              {PriorityChildConfig{"dns[child0]", /*pick_first=*/true}});
  loop_->BlockOn([&]() -> Task<void> {
    const std::string first = co_await PickUntilComplete();
    EXPECT_EQ(first, Addr(0));
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(Pick().kind, PickResult::Kind::kComplete);
      EXPECT_EQ(last_address_, Addr(0));
    }
  }());
  EXPECT_EQ(pool_->Find(Addr(1))->connection_attempts(), 0u);  // never needed
  EXPECT_TRUE(lb_->priority()->has_child("dns[child0]"));
}

}  // namespace
}  // namespace uxds
