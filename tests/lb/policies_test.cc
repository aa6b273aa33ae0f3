// The endpoint-picking policies' own rules: round_robin pickers keep their
// own positions (A27), least_request's pickers go to the endpoint with the
// fewest calls of those they draw (A48), and a weighted_target whose children all wait for a
// pick leaves IDLE on the first pick (gRPC's queueing picker).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "lb/least_request_picker.h"
#include "lb/ring_hash_policy.h"
#include "lb/round_robin.h"
#include "lb/weighted_target.h"
#include "lb_test_util.h"

namespace uxds {
namespace {

using lb_testing::Backend;

class PoliciesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    pool_ = SubchannelPool::Create(*loop_, lb_testing::FastSubchannelOptions());
  }
  void TearDown() override {
    loop_->BlockOn([this]() -> Task<void> {
      for (auto& b : backends_) co_await b->Stop();
      co_await pool_->Shutdown();
    }());
    pool_.reset();
  }

  // `n` subchannels to ports nothing needs to listen on: a picker picks
  // from the list it is given, whatever the endpoints' states.
  std::vector<SubchannelRef> Subchannels(int n, uint16_t first_port) {
    std::vector<SubchannelRef> refs;
    for (int i = 0; i < n; ++i) {
      refs.push_back(pool_->Get(SocketAddress::Loopback4(static_cast<uint16_t>(first_port + i))));
    }
    return refs;
  }

  std::unique_ptr<Loop> loop_;
  std::shared_ptr<SubchannelPool> pool_;
  std::vector<std::unique_ptr<Backend>> backends_;
};

// A thread that alternates between two clusters walks each one's list in
// turn: every endpoint of each gets the same share.
TEST_F(PoliciesTest, RoundRobinPickersKeepTheirOwnPositions) {
  RoundRobinPicker a(Subchannels(4, 1001));
  RoundRobinPicker b(Subchannels(4, 2001));
  std::map<const Endpoint*, int> counts;
  for (int i = 0; i < 2000; ++i) {
    ++counts[a.Pick(PickArgs{}).endpoint];
    ++counts[b.Pick(PickArgs{}).endpoint];
  }
  ASSERT_EQ(counts.size(), 8u);
  for (const auto& [endpoint, count] : counts) {
    EXPECT_EQ(count, 500) << endpoint->subchannel->address();
  }
}

// Each picker starts at a random point: pickers of the same list made one
// after the other do not all send their first pick to one endpoint.
TEST_F(PoliciesTest, RoundRobinPickersStartAtRandomPoints) {
  std::vector<SubchannelRef> refs = Subchannels(8, 3001);
  std::map<const Endpoint*, int> first_picks;
  for (int i = 0; i < 64; ++i) {
    RoundRobinPicker picker(refs);
    ++first_picks[picker.Pick(PickArgs{}).endpoint];
  }
  // 64 uniform draws over 8 endpoints all landing on one: (1/8)^63.
  EXPECT_GT(first_picks.size(), 1u);
}

// PickArgs::unreachable: round_robin passes over the endpoints in the mask,
// keeping the others' turns; with all of them in it, it still returns one
// (the caller fails that pick).
TEST_F(PoliciesTest, RoundRobinPassesOverUnreachableEndpoints) {
  std::vector<SubchannelRef> refs = Subchannels(4, 4001);
  RoundRobinPicker picker(refs);
  for (const SubchannelRef& ref : refs) ASSERT_LT(ref->endpoint().index, 64u);
  uint64_t word =
      (uint64_t{1} << refs[1]->endpoint().index) | (uint64_t{1} << refs[2]->endpoint().index);
  const EndpointMask mask{std::span<const uint64_t>(&word, 1)};
  PickArgs args;
  args.unreachable = &mask;
  std::map<const Endpoint*, int> counts;
  for (int i = 0; i < 1000; ++i) ++counts[picker.Pick(args).endpoint];
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[&refs[0]->endpoint()], 500);
  EXPECT_EQ(counts[&refs[3]->endpoint()], 500);
  word = ~uint64_t{0};
  const PickResult all = picker.Pick(args);
  EXPECT_EQ(all.kind, PickResult::Kind::kComplete);
  EXPECT_NE(all.endpoint, nullptr);
}

// PickArgs::unreachable through weighted_target: a locality whose READY
// endpoints are all unreachable for the picking thread gives way to another
// locality, whatever the weights; with every locality so, a pick still
// returns an endpoint (the caller fails it).
TEST_F(PoliciesTest, WeightedTargetGoesAroundALocalityWithNothingReachable) {
  std::vector<SubchannelRef> a = Subchannels(2, 5001);
  std::vector<SubchannelRef> b = Subchannels(2, 6001);
  for (const SubchannelRef& ref : a) ASSERT_LT(ref->endpoint().index, 64u);
  for (const SubchannelRef& ref : b) ASSERT_LT(ref->endpoint().index, 64u);
  std::vector<WeightedPicker::Entry> entries;
  entries.push_back({99, std::make_shared<RoundRobinPicker>(a)});
  entries.push_back({100, std::make_shared<RoundRobinPicker>(b)});
  const WeightedPicker picker(std::move(entries));
  uint64_t word = (uint64_t{1} << a[0]->endpoint().index) | (uint64_t{1} << a[1]->endpoint().index);
  const EndpointMask mask{std::span<const uint64_t>(&word, 1)};
  PickArgs args;
  args.unreachable = &mask;
  std::map<const Endpoint*, int> counts;
  for (int i = 0; i < 200; ++i) ++counts[picker.Pick(args).endpoint];
  EXPECT_EQ(counts[&b[0]->endpoint()] + counts[&b[1]->endpoint()], 200);
  word = ~uint64_t{0};
  const PickResult all = picker.Pick(args);
  EXPECT_EQ(all.kind, PickResult::Kind::kComplete);
}

// A48's endpoints with their outstanding-call counters.
std::vector<LeastRequestPicker::Entry> WithCounters(const std::vector<SubchannelRef>& refs) {
  std::vector<LeastRequestPicker::Entry> entries;
  for (const SubchannelRef& ref : refs) entries.push_back({ref, CallCounter::Create()});
  return entries;
}

// A48: the calls of the first endpoint never end, the others' end at once.
// Drawing two, a pick goes to the first only when both draws are it (1/9
// of the picks: about 333 of 3000, where a random or round_robin pick
// gives it 1000); drawing ten, only when all ten are (3^-10).
TEST_F(PoliciesTest, LeastRequestSendsPicksAwayFromAnEndpointWithCallsOutstanding) {
  for (const uint32_t choice_count : {2u, 10u}) {
    std::vector<LeastRequestPicker::Entry> entries = WithCounters(Subchannels(3, 7001));
    const Endpoint* slow = &entries[0].subchannel->endpoint();
    LeastRequestPicker picker(entries, choice_count);
    std::vector<PickResult> held;
    std::map<const Endpoint*, int> counts;
    for (int i = 0; i < 3000; ++i) {
      const PickResult picked = picker.Pick(PickArgs{});
      ASSERT_EQ(picked.kind, PickResult::Kind::kComplete);
      ASSERT_NE(picked.endpoint_calls, nullptr);
      ++counts[picked.endpoint];
      if (picked.endpoint == slow) {
        held.push_back(picked);
      } else {
        CallFinished(picked, true);
      }
    }
    EXPECT_EQ(entries[0].outstanding->Load(), counts[slow]);
    EXPECT_EQ(entries[1].outstanding->Load(), 0);
    EXPECT_EQ(entries[2].outstanding->Load(), 0);
    if (choice_count == 2) {
      EXPECT_LT(counts[slow], 500) << "choice_count 2";
    } else {
      EXPECT_LE(counts[slow], 3) << "choice_count 10";
    }
    // Once its calls end, the endpoint is drawn as any other.
    for (const PickResult& picked : held) CallFinished(picked, true);
    EXPECT_EQ(entries[0].outstanding->Load(), 0);
    counts.clear();
    for (int i = 0; i < 3000; ++i) {
      const PickResult picked = picker.Pick(PickArgs{});
      ++counts[picked.endpoint];
      CallNotStarted(picked);
    }
    EXPECT_GT(counts[slow], 700) << choice_count;
    EXPECT_EQ(entries[0].outstanding->Load(), 0);
  }
}

// PickArgs::unreachable: least_request draws only among the endpoints the
// picking thread can reach; with none, it still returns one (the caller
// fails that pick), counted like any other.
TEST_F(PoliciesTest, LeastRequestPassesOverUnreachableEndpoints) {
  std::vector<LeastRequestPicker::Entry> entries = WithCounters(Subchannels(4, 7101));
  for (const auto& e : entries) ASSERT_LT(e.subchannel->endpoint().index, 64u);
  uint64_t word = (uint64_t{1} << entries[1].subchannel->endpoint().index) |
                  (uint64_t{1} << entries[2].subchannel->endpoint().index) |
                  (uint64_t{1} << entries[3].subchannel->endpoint().index);
  const EndpointMask mask{std::span<const uint64_t>(&word, 1)};
  PickArgs args;
  args.unreachable = &mask;
  LeastRequestPicker picker(entries, 2);
  for (int i = 0; i < 200; ++i) {
    const PickResult picked = picker.Pick(args);
    EXPECT_EQ(picked.endpoint, &entries[0].subchannel->endpoint());
    CallFinished(picked, true);
  }
  word = ~uint64_t{0};
  const PickResult all = picker.Pick(args);
  ASSERT_EQ(all.kind, PickResult::Kind::kComplete);
  EXPECT_EQ(all.endpoint_calls->Load(), 1);
  CallNotStarted(all);
  for (const auto& e : entries) EXPECT_EQ(e.outstanding->Load(), 0);
}

// A pick weighted_target puts aside (its locality has nothing the thread
// can reach) is ended there: least_request's count of it does not stay.
TEST_F(PoliciesTest, WeightedTargetEndsThePicksItPutsAside) {
  std::vector<LeastRequestPicker::Entry> a = WithCounters(Subchannels(2, 7201));
  std::vector<LeastRequestPicker::Entry> b = WithCounters(Subchannels(2, 7301));
  for (const auto& e : a) ASSERT_LT(e.subchannel->endpoint().index, 64u);
  std::vector<WeightedPicker::Entry> localities;
  localities.push_back({1, std::make_shared<LeastRequestPicker>(a, 2)});
  localities.push_back({2, std::make_shared<LeastRequestPicker>(b, 2)});
  const WeightedPicker picker(std::move(localities));
  const uint64_t word = (uint64_t{1} << a[0].subchannel->endpoint().index) |
                        (uint64_t{1} << a[1].subchannel->endpoint().index);
  const EndpointMask mask{std::span<const uint64_t>(&word, 1)};
  PickArgs args;
  args.unreachable = &mask;
  for (int i = 0; i < 200; ++i) {
    const PickResult picked = picker.Pick(args);
    ASSERT_TRUE(picked.endpoint == &b[0].subchannel->endpoint() ||
                picked.endpoint == &b[1].subchannel->endpoint());
    CallFinished(picked, true);
  }
  for (const auto& e : a) EXPECT_EQ(e.outstanding->Load(), 0);
  for (const auto& e : b) EXPECT_EQ(e.outstanding->Load(), 0);
}

// wrr_locality over ring_hash: every locality's ring_hash is IDLE until
// picked, so weighted_target reports IDLE; its picker's first pick makes
// the children exit IDLE, and the policy gets READY without any other
// prompt.
TEST_F(PoliciesTest, AnIdleWeightedTargetExitsIdleOnTheFirstPick) {
  for (int i = 0; i < 2; ++i) {
    backends_.push_back(std::make_unique<Backend>(*loop_));
    ASSERT_TRUE(backends_.back()->Start().ok());
  }
  LbPolicyOptions options;
  lb_testing::ReportLog log;
  SubchannelPool& pool = *pool_;
  WeightedTargetPolicy policy(
      *loop_,
      [&pool, &options](LbPolicy::Reporter r) -> std::unique_ptr<LbPolicy> {
        return std::make_unique<RingHashPolicy>(pool, options, std::move(r));
      },
      log.reporter());
  LocalityList localities;
  for (int i = 0; i < 2; ++i) {
    LocalityList one = lb_testing::OneLocality({backends_[i]->address()}, 1,
                                               "{zone=\"z" + std::to_string(i) + "\"}");
    localities.push_back(one.front());
  }
  policy.Update(localities);
  ASSERT_EQ(log.state, ConnectivityState::kIdle);
  PickArgs args;
  args.hash = 42;
  EXPECT_EQ(log.picker->Pick(args).kind, PickResult::Kind::kQueue);
  const bool ready = loop_->BlockOn(lb_testing::WaitUntil(
      *loop_, [&] { return log.state == ConnectivityState::kReady; }, std::chrono::seconds(10)));
  EXPECT_TRUE(ready) << ConnectivityStateName(log.state);
}

}  // namespace
}  // namespace uxds
