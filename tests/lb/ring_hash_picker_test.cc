// Every branch of A42's picker pseudo-code and of A76's random-hash walk,
// with endpoints in real states: READY (a uxds server), IDLE (not asked
// yet), CONNECTING (a listener that never answers), TRANSIENT_FAILURE (a
// refused port).
#include "lb/ring_hash_picker.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "lb/lb_test_util.h"

namespace uxds {
namespace {

using lb_testing::Backend;
using lb_testing::WaitForState;
using State = ConnectivityState;

class RingHashPickerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    SubchannelOptions options = lb_testing::FastSubchannelOptions();
    // Long backoff: a failed endpoint stays failed (and unasked) for the
    // whole test, so the attempts counted are the picker's.
    options.initial_backoff = options.max_backoff = std::chrono::seconds(60);
    pool_ = SubchannelPool::Create(*loop_, options);
    for (int i = 0; i < 4; ++i) {
      backends_.push_back(std::make_unique<Backend>(*loop_));
      ASSERT_TRUE(backends_.back()->Start().ok());
    }
  }
  void TearDown() override {
    loop_->BlockOn([this]() -> Task<void> {
      for (auto& b : backends_) co_await b->Stop();
      co_await pool_->Shutdown();
    }());
    pool_.reset();
  }

  // A subchannel in `state`, made so for real.
  Task<SubchannelRef> Make(State state) {
    SubchannelRef s;
    switch (state) {
      case State::kReady:
        s = pool_->Get(backends_[next_backend_++]->address());
        break;
      case State::kIdle:
        s = pool_->Get(backends_[next_backend_++]->address());
        co_return s;  // not asked to connect
      case State::kConnecting:
        blackholes_.push_back(std::make_unique<lb_testing::Blackhole>());
        s = pool_->Get(blackholes_.back()->address());
        break;
      case State::kTransientFailure:
        s = pool_->Get(lb_testing::RefusedAddress());
        break;
    }
    s->RequestConnection();
    const bool reached = co_await WaitForState(*loop_, s.get(), state);
    EXPECT_TRUE(reached) << ConnectivityStateName(state);
    co_return s;
  }

  // A ring over `weights.size()` endpoints keyed "e0", "e1", ... (A76 keys,
  // so the ring does not depend on the test's ports).
  static std::shared_ptr<const Ring> MakeRing(const std::vector<uint64_t>& weights,
                                              uint64_t size = 64) {
    std::vector<RingEndpoint> endpoints;
    for (size_t i = 0; i < weights.size(); ++i) {
      endpoints.push_back({"e" + std::to_string(i), weights[i]});
    }
    RingSizeConfig sizes;
    sizes.min_ring_size = sizes.max_ring_size = sizes.ring_size_cap = size;
    return std::make_shared<const Ring>(Ring::Build(endpoints, sizes));
  }

  // The distinct endpoints met walking the ring from entry `start`.
  static std::vector<uint32_t> Order(const Ring& ring, size_t start) {
    std::vector<uint32_t> order;
    std::set<uint32_t> seen;
    for (size_t i = 0; i < ring.size(); ++i) {
      const uint32_t e = ring[(start + i) % ring.size()].endpoint;
      if (seen.insert(e).second) order.push_back(e);
    }
    return order;
  }

  // A picker whose endpoints, met in ring order from entry `start`, are in
  // `states`; `placed[k]` is the subchannel met k-th.
  Task<std::unique_ptr<RingHashPicker>> MakePicker(std::shared_ptr<const Ring> ring, size_t start,
                                                   const std::vector<State>& states,
                                                   std::vector<Subchannel*>& placed,
                                                   std::string header = "",
                                                   bool any_connecting = false) {
    const std::vector<uint32_t> order = Order(*ring, start);
    EXPECT_EQ(order.size(), states.size());
    std::vector<SubchannelRef> by_index(order.size());
    placed.clear();
    for (size_t k = 0; k < order.size(); ++k) {
      by_index[order[k]] = co_await Make(states[k]);
      placed.push_back(by_index[order[k]].get());
    }
    co_return std::make_unique<RingHashPicker>(ring, std::move(by_index), std::move(header),
                                               any_connecting, UnavailableError("all failed"));
  }

  // Lets posted connection requests reach the subchannels.
  Task<void> Settle() { (void)co_await SleepFor(*loop_, std::chrono::milliseconds(20)); }

  std::unique_ptr<Loop> loop_;
  std::shared_ptr<SubchannelPool> pool_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<lb_testing::Blackhole>> blackholes_;
  size_t next_backend_ = 0;
};

const Endpoint* Picked(const PickResult& r) {
  return r.kind == PickResult::Kind::kComplete ? r.endpoint : nullptr;
}

TEST_F(RingHashPickerTest, HashFindsTheFirstEntryAtOrAfterIt) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kReady, State::kReady, State::kReady, State::kReady};
    auto picker = co_await MakePicker(ring, 5, states, placed);
    for (size_t i = 0; i < ring->size(); ++i) {
      const Ring::Entry& e = (*ring)[i];
      // The entry's own hash, and one less, both land on it.
      for (uint64_t h : {e.hash, e.hash - 1}) {
        const PickResult r = picker->PickForHash(h);
        CO_ASSERT_TRUE(Picked(r) != nullptr);
        const std::vector<uint32_t> order = Order(*ring, 5);
        const size_t k = std::find(order.begin(), order.end(), e.endpoint) - order.begin();
        EXPECT_EQ(Picked(r)->subchannel, placed[k]);
      }
    }
    // Past the last entry the ring wraps to entry 0.
    const uint64_t past_last = (*ring)[ring->size() - 1].hash + 1;
    if (past_last != 0) {
      const std::vector<uint32_t> order = Order(*ring, 5);
      const size_t k = std::find(order.begin(), order.end(), (*ring)[0].endpoint) - order.begin();
      EXPECT_EQ(Picked(picker->PickForHash(past_last))->subchannel, placed[k]);
    }
  }());
}

TEST_F(RingHashPickerTest, FirstReadyIsPicked) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kReady, State::kTransientFailure, State::kIdle};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    EXPECT_EQ(Picked(picker->PickForHash((*ring)[0].hash))->subchannel, placed[0]);
  }());
}

TEST_F(RingHashPickerTest, FirstIdleQueuesAndConnectsIt) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kIdle, State::kReady, State::kIdle};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    const PickResult r = picker->PickForHash((*ring)[0].hash);
    EXPECT_EQ(r.kind, PickResult::Kind::kQueue);
    co_await Settle();
    EXPECT_EQ(placed[0]->connection_attempts(), 1u);
    EXPECT_EQ(placed[2]->connection_attempts(), 0u);
    const bool ready = co_await WaitForState(*loop_, placed[0], State::kReady);
    EXPECT_TRUE(ready);
    // The same hash now completes on the same endpoint (A42: a queued pick
    // retried with the next picker hashes to the same place).
    EXPECT_EQ(Picked(picker->PickForHash((*ring)[0].hash))->subchannel, placed[0]);
  }());
}

TEST_F(RingHashPickerTest, FirstConnectingQueues) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kConnecting, State::kReady, State::kIdle};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    EXPECT_EQ(picker->PickForHash((*ring)[0].hash).kind, PickResult::Kind::kQueue);
    co_await Settle();
    EXPECT_EQ(placed[2]->connection_attempts(), 0u);
  }());
}

TEST_F(RingHashPickerTest, FirstFailedSecondReadyPicksSecond) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kTransientFailure, State::kReady, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    EXPECT_EQ(Picked(picker->PickForHash((*ring)[0].hash))->subchannel, placed[1]);
  }());
}

// Rings of 2^18 entries and more pick a READY endpoint from a pick line;
// every other case (a failed first endpoint, a line that cannot answer)
// takes the same A42 branches as a small ring's pick.
TEST_F(RingHashPickerTest, LargeRingsTakeTheSameBranches) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1}, 1 << 18);
    CO_ASSERT_TRUE(ring->line_kind() == Ring::LineKind::kNarrow);
    std::vector<SubchannelRef> by_index;
    by_index.push_back(co_await Make(State::kTransientFailure));
    by_index.push_back(co_await Make(State::kReady));
    by_index.push_back(co_await Make(State::kReady));
    std::vector<Subchannel*> subchannels;
    for (const SubchannelRef& s : by_index) subchannels.push_back(s.get());
    RingHashPicker picker(ring, std::move(by_index), "", false, UnavailableError("all failed"));
    // A42: the first entry at or after the hash; past a failed endpoint,
    // the next entry of another endpoint (all READY here).
    auto expected = [&](uint64_t hash) {
      size_t i = ring->FindIndexByBinarySearch(hash);
      while ((*ring)[i].endpoint == 0) i = (i + 1) % ring->size();
      return subchannels[(*ring)[i].endpoint];
    };
    std::mt19937_64 random(7);
    size_t mismatches = 0;
    size_t past_failed = 0;
    for (int n = 0; n < 200000; ++n) {
      // Random hashes, and hashes that share their top 40 bits with an
      // entry (the line's key: these picks take the long way).
      const uint64_t entry = (*ring)[random() % ring->size()].hash;
      for (uint64_t h : {static_cast<uint64_t>(random()), entry, entry - 1, entry + 1}) {
        const PickResult r = picker.PickForHash(h);
        if (Picked(r) == nullptr || Picked(r)->subchannel != expected(h)) ++mismatches;
        if ((*ring)[ring->FindIndexByBinarySearch(h)].endpoint == 0) ++past_failed;
      }
    }
    EXPECT_EQ(mismatches, 0u);
    EXPECT_GT(past_failed, 100000u);
  }());
}

TEST_F(RingHashPickerTest, FirstFailedSecondConnectingQueues) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kTransientFailure, State::kConnecting, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    EXPECT_EQ(picker->PickForHash((*ring)[0].hash).kind, PickResult::Kind::kQueue);
  }());
}

TEST_F(RingHashPickerTest, FirstFailedSecondIdleQueuesAndConnectsSecond) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kTransientFailure, State::kIdle, State::kIdle};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    EXPECT_EQ(picker->PickForHash((*ring)[0].hash).kind, PickResult::Kind::kQueue);
    co_await Settle();
    EXPECT_EQ(placed[1]->connection_attempts(), 1u);
    EXPECT_EQ(placed[2]->connection_attempts(), 0u);
  }());
}

TEST_F(RingHashPickerTest, DuplicatesOfTheFirstEndpointAreSkipped) {
  loop_->BlockOn([&]() -> Task<void> {
    // Endpoint 0 owns most of the ring: find two adjacent entries of it.
    auto ring = MakeRing({30, 1, 1});
    size_t start = ring->size();
    for (size_t i = 0; i + 1 < ring->size(); ++i) {
      if ((*ring)[i].endpoint == 0 && (*ring)[i + 1].endpoint == 0) {
        start = i;
        break;
      }
    }
    CO_ASSERT_TRUE(start < ring->size());
    std::vector<Subchannel*> placed;
    // Were the duplicate taken as the "second" endpoint, it would count as
    // failed and the CONNECTING one would not queue the pick.
    const std::vector<State> states{State::kTransientFailure, State::kConnecting, State::kReady};
    auto picker = co_await MakePicker(ring, start, states, placed);
    EXPECT_EQ(picker->PickForHash((*ring)[start].hash).kind, PickResult::Kind::kQueue);
  }());
}

TEST_F(RingHashPickerTest, TwoFailedThenTheFirstReadyFurtherOn) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kTransientFailure, State::kTransientFailure,
                                    State::kIdle, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    EXPECT_EQ(Picked(picker->PickForHash((*ring)[0].hash))->subchannel, placed[3]);
    co_await Settle();
    // The first endpoint past the failed ones is IDLE: it is asked to connect.
    EXPECT_EQ(placed[2]->connection_attempts(), 1u);
  }());
}

TEST_F(RingHashPickerTest, OnlyTheFirstNonFailedEndpointIsAskedToConnect) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kTransientFailure, State::kTransientFailure,
                                    State::kConnecting, State::kIdle};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    const PickResult r = picker->PickForHash((*ring)[0].hash);
    EXPECT_EQ(r.kind, PickResult::Kind::kFail);
    co_await Settle();
    EXPECT_EQ(placed[3]->connection_attempts(), 0u);
  }());
}

// PickArgs::unreachable: an endpoint in the mask is taken as
// TRANSIENT_FAILURE whatever its subchannel's state, and is not asked to
// connect (its picking loop reconnects it).
TEST_F(RingHashPickerTest, AnUnreachableEndpointIsTakenAsFailed) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kReady, State::kReady, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    uint64_t word = uint64_t{1} << placed[0]->endpoint().index;
    const EndpointMask mask{std::span<const uint64_t>(&word, 1)};
    PickArgs args;
    args.hash = (*ring)[0].hash;
    args.unreachable = &mask;
    EXPECT_EQ(Picked(picker->Pick(args))->subchannel, placed[1]);
    // Without the mask, the same hash picks the first endpoint.
    args.unreachable = nullptr;
    EXPECT_EQ(Picked(picker->Pick(args))->subchannel, placed[0]);
    // Every endpoint unreachable: the pick fails as A42's all-failed case.
    word = ~uint64_t{0};
    args.unreachable = &mask;
    EXPECT_EQ(picker->Pick(args).kind, PickResult::Kind::kFail);
    co_await Settle();
    for (Subchannel* s : placed) EXPECT_EQ(s->connection_attempts(), 1u);
  }());
}

// The same for a request hashed by its request_hash_header (A76), and for
// one without it (a random walk to the first READY endpoint it can reach).
TEST_F(RingHashPickerTest, AHeaderHashedPickGoesAroundAnUnreachableEndpoint) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kReady, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed, "x-key");
    uint64_t word = uint64_t{1} << placed[0]->endpoint().index;
    const EndpointMask mask{std::span<const uint64_t>(&word, 1)};
    PickArgs args;
    args.unreachable = &mask;
    for (int i = 0; i < 20; ++i) {
      const std::vector<std::pair<std::string, std::string>> keyed{{"x-key", std::to_string(i)}};
      args.metadata = keyed;
      EXPECT_EQ(Picked(picker->Pick(args))->subchannel, placed[1]) << i;
      args.metadata = {};
      EXPECT_EQ(Picked(picker->Pick(args))->subchannel, placed[1]) << i;
    }
  }());
}

TEST_F(RingHashPickerTest, AllFailedFailsThePick) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kTransientFailure, State::kTransientFailure,
                                    State::kTransientFailure};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    const PickResult r = picker->PickForHash((*ring)[0].hash);
    CO_ASSERT_TRUE(r.kind == PickResult::Kind::kFail);
    EXPECT_EQ(r.status->code(), StatusCode::kUnavailable);
    EXPECT_FALSE(r.drop);
  }());
}

TEST_F(RingHashPickerTest, WithoutAHashAndWithoutAHeaderThePickFails) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kReady, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed);
    const PickResult r = picker->Pick(PickArgs{});
    CO_ASSERT_TRUE(r.kind == PickResult::Kind::kFail);
    EXPECT_EQ(r.status->code(), StatusCode::kInternal);
  }());
}

TEST_F(RingHashPickerTest, RequestHashHeaderValuesJoinedWithComma) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1, 1}, 256);
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kReady, State::kReady, State::kReady, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed, "x-user");
    const std::pair<std::string, std::string> metadata[] = {
        {"x-other", "zzz"}, {"x-user", "alice"}, {"x-user", "bob"}};
    PickArgs args;
    args.metadata = metadata;
    args.hash = 7;  // ignored: the header decides (A76)
    const PickResult r = picker->Pick(args);
    const PickResult expected = picker->PickForHash(XxHash64("alice,bob"));
    CO_ASSERT_TRUE(Picked(r) != nullptr);
    EXPECT_EQ(Picked(r), Picked(expected));
    // Same header, same endpoint, every time.
    for (int i = 0; i < 100; ++i) EXPECT_EQ(Picked(picker->Pick(args)), Picked(r));
  }());
}

TEST_F(RingHashPickerTest, MissingHeaderWalksFromARandomPointToAReadyEndpoint) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kTransientFailure, State::kReady,
                                    State::kTransientFailure, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed, "x-user");
    std::set<const Subchannel*> picked;
    for (int i = 0; i < 200; ++i) {
      const PickResult r = picker->Pick(PickArgs{});
      CO_ASSERT_TRUE(Picked(r) != nullptr);
      picked.insert(Picked(r)->subchannel);
    }
    // Random starting points reach both READY endpoints and nothing else.
    EXPECT_EQ(picked, (std::set<const Subchannel*>{placed[1], placed[3]}));
  }());
}

// A76: "the header has a non-empty value": an empty value is no key. Were
// it hashed, every such request would land on the one endpoint the empty
// string hashes to; as a missing header, they spread over the READY ones.
TEST_F(RingHashPickerTest, AnEmptyHeaderValueCountsAsMissing) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kReady, State::kReady, State::kReady, State::kReady};
    auto picker = co_await MakePicker(ring, 0, states, placed, "x-user");
    const std::pair<std::string, std::string> metadata[] = {{"x-user", ""}};
    PickArgs args;
    args.metadata = metadata;
    std::set<const Subchannel*> picked;
    for (int i = 0; i < 200; ++i) {
      const PickResult r = picker->Pick(args);
      CO_ASSERT_TRUE(Picked(r) != nullptr);
      picked.insert(Picked(r)->subchannel);
    }
    EXPECT_EQ(picked.size(), 4u);
  }());
}

TEST_F(RingHashPickerTest, MissingHeaderAsksAtMostOneIdleEndpointPerPick) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kIdle, State::kIdle, State::kIdle, State::kIdle};
    auto picker = co_await MakePicker(ring, 0, states, placed, "x-user");
    EXPECT_EQ(picker->Pick(PickArgs{}).kind, PickResult::Kind::kQueue);
    co_await Settle();
    uint64_t attempts = 0;
    for (Subchannel* s : placed) attempts += s->connection_attempts();
    EXPECT_EQ(attempts, 1u);
  }());
}

TEST_F(RingHashPickerTest, MissingHeaderAsksNoneWhileOneIsConnecting) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kIdle, State::kIdle, State::kIdle};
    auto picker = co_await MakePicker(ring, 0, states, placed, "x-user", /*any_connecting=*/true);
    EXPECT_EQ(picker->Pick(PickArgs{}).kind, PickResult::Kind::kQueue);
    co_await Settle();
    for (Subchannel* s : placed) EXPECT_EQ(s->connection_attempts(), 0u);
  }());
}

TEST_F(RingHashPickerTest, MissingHeaderWithEveryEndpointFailedFails) {
  loop_->BlockOn([&]() -> Task<void> {
    auto ring = MakeRing({1, 1});
    std::vector<Subchannel*> placed;
    const std::vector<State> states{State::kTransientFailure, State::kTransientFailure};
    auto picker = co_await MakePicker(ring, 0, states, placed, "x-user");
    EXPECT_EQ(picker->Pick(PickArgs{}).kind, PickResult::Kind::kFail);
  }());
}

}  // namespace
}  // namespace uxds
