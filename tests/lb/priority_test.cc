// The priority policy (A56, A42's failover-timer change). Its children here
// are scripted policies that report what the test says, so every rule of
// choosing a priority can be driven exactly; the timers are real (short).
#include "lb/priority.h"

#include <gtest/gtest.h>

#include "lb/lb_test_util.h"
#include "lb/priority_names.h"

namespace uxds {
namespace {

using State = ConnectivityState;

// A child policy that reports whatever the test tells it to.
class ScriptedChild final : public LbPolicy {
 public:
  explicit ScriptedChild(Reporter reporter) : reporter_(std::move(reporter)) {}
  void Update(const LocalityList&) override {
    ++updates;
    Report(initial_state);
  }
  void Report(State state) {
    picker = std::make_shared<lb_testing::TaggedPicker>(tag);
    reporter_(state,
              state == State::kTransientFailure ? UnavailableError("child failed") : Status(),
              picker);
  }
  State initial_state = State::kConnecting;
  int tag = 0;
  int updates = 0;
  std::shared_ptr<const Picker> picker;

 private:
  Reporter reporter_;
};

class PriorityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    options_.priority_failover_timeout = std::chrono::milliseconds(100);
    options_.child_retention_interval = std::chrono::milliseconds(200);
    policy_ = std::make_unique<PriorityPolicy>(
        *loop_, options_,
        [this](LbPolicy::Reporter r) -> std::unique_ptr<LbPolicy> {
          auto child = std::make_unique<ScriptedChild>(std::move(r));
          child->tag = static_cast<int>(children_.size());
          child->initial_state = next_initial_state_;
          children_.push_back(child.get());
          return child;
        },
        log_.reporter());
  }
  void TearDown() override { policy_.reset(); }

  // `n` priorities of one (unused) locality each.
  void Update(size_t n) { policy_->Update(std::vector<LocalityList>(n, LocalityList{})); }
  // Which child the published picker belongs to.
  int CurrentTag() const {
    return static_cast<const lb_testing::TaggedPicker&>(*log_.picker).tag();
  }
  void RunFor(std::chrono::milliseconds d) { (void)loop_->BlockOn(SleepFor(*loop_, d)); }

  std::unique_ptr<Loop> loop_;
  LbPolicyOptions options_;
  lb_testing::ReportLog log_;
  std::vector<ScriptedChild*> children_;
  State next_initial_state_ = State::kConnecting;
  std::unique_ptr<PriorityPolicy> policy_;
};

TEST_F(PriorityTest, StartsWithTheFirstPriorityAndItsFailoverTimer) {
  Update(3);
  ASSERT_EQ(children_.size(), 1u);  // lower priorities are not created yet
  EXPECT_EQ(policy_->current_priority(), 0);
  EXPECT_TRUE(policy_->child_failover_timer_pending(0));
  EXPECT_EQ(log_.state, State::kConnecting);
  EXPECT_EQ(CurrentTag(), 0);
}

TEST_F(PriorityTest, FailoverTimerStartsTheNextPriority) {
  Update(2);
  RunFor(std::chrono::milliseconds(150));
  ASSERT_EQ(children_.size(), 2u);
  EXPECT_EQ(policy_->current_priority(), 1);
  EXPECT_TRUE(policy_->child_failover_timer_pending(1));
  children_[1]->Report(State::kReady);
  EXPECT_EQ(log_.state, State::kReady);
  EXPECT_EQ(CurrentTag(), 1);
}

TEST_F(PriorityTest, TransientFailureFailsOverAtOnce) {
  Update(2);
  children_[0]->Report(State::kTransientFailure);
  ASSERT_EQ(children_.size(), 2u);
  EXPECT_EQ(policy_->current_priority(), 1);
  EXPECT_FALSE(policy_->child_failover_timer_pending(0));  // TF cancels it
}

TEST_F(PriorityTest, PicksGoToTheHighestReadyOrIdleChild) {
  Update(3);
  children_[0]->Report(State::kTransientFailure);
  children_[1]->Report(State::kTransientFailure);
  ASSERT_EQ(children_.size(), 3u);
  children_[2]->Report(State::kReady);
  EXPECT_EQ(CurrentTag(), 2);
  // Priority 1 recovers as IDLE: it wins over 2, which is deactivated.
  children_[1]->Report(State::kIdle);
  EXPECT_EQ(policy_->current_priority(), 1);
  EXPECT_EQ(log_.state, State::kIdle);
  EXPECT_TRUE(policy_->child_deactivated(2));
  EXPECT_FALSE(policy_->child_deactivated(0));  // higher priorities stay active
  // Priority 0 recovers: 1 is deactivated too.
  children_[0]->Report(State::kReady);
  EXPECT_EQ(policy_->current_priority(), 0);
  EXPECT_TRUE(policy_->child_deactivated(1));
}

TEST_F(PriorityTest, ConnectingRestartsTheTimerOnlyAfterReadyOrIdle) {
  Update(2);
  // READY, then CONNECTING again (connection lost): the timer restarts.
  children_[0]->Report(State::kReady);
  EXPECT_FALSE(policy_->child_failover_timer_pending(0));
  children_[0]->Report(State::kConnecting);
  EXPECT_TRUE(policy_->child_failover_timer_pending(0));
  // TRANSIENT_FAILURE more recently than READY: CONNECTING does not restart it.
  children_[0]->Report(State::kTransientFailure);
  EXPECT_FALSE(policy_->child_failover_timer_pending(0));
  children_[0]->Report(State::kConnecting);
  EXPECT_FALSE(policy_->child_failover_timer_pending(0));
  // A42: IDLE counts like READY (ring_hash starts IDLE, then connects).
  children_[0]->Report(State::kIdle);
  children_[0]->Report(State::kConnecting);
  EXPECT_TRUE(policy_->child_failover_timer_pending(0));
}

TEST_F(PriorityTest, WithoutReadyChildrenAPendingTimerWinsThenConnectingThenTheLast) {
  Update(3);
  children_[0]->Report(State::kTransientFailure);  // priority 1 created, timer pending
  ASSERT_EQ(children_.size(), 2u);
  EXPECT_EQ(policy_->current_priority(), 1);
  // Priority 1's timer fires: priority 2 is created and chosen (its timer).
  RunFor(std::chrono::milliseconds(150));
  ASSERT_EQ(children_.size(), 3u);
  EXPECT_EQ(policy_->current_priority(), 2);
  // Every child failed: the first CONNECTING one is chosen...
  children_[2]->Report(State::kTransientFailure);
  children_[1]->Report(State::kConnecting);  // after TF: no timer restart
  EXPECT_FALSE(policy_->child_failover_timer_pending(1));
  EXPECT_EQ(policy_->current_priority(), 1);
  // ... and with none connecting, the last.
  children_[1]->Report(State::kTransientFailure);
  EXPECT_EQ(policy_->current_priority(), 2);
  EXPECT_EQ(log_.state, State::kTransientFailure);
}

TEST_F(PriorityTest, DeactivatedChildIsDeletedAfterRetentionUnlessReused) {
  Update(2);
  children_[0]->Report(State::kTransientFailure);
  children_[1]->Report(State::kReady);
  children_[0]->Report(State::kReady);
  EXPECT_TRUE(policy_->child_deactivated(1));
  // Reused within the retention interval: reactivated, not recreated.
  RunFor(std::chrono::milliseconds(100));
  children_[0]->Report(State::kTransientFailure);
  EXPECT_EQ(policy_->current_priority(), 1);
  EXPECT_FALSE(policy_->child_deactivated(1));
  EXPECT_EQ(children_.size(), 2u);
  // Deactivated again and left alone: deleted after the interval.
  children_[0]->Report(State::kReady);
  EXPECT_EQ(policy_->child_count(), 2u);
  RunFor(std::chrono::milliseconds(300));
  EXPECT_EQ(policy_->child_count(), 1u);
}

TEST_F(PriorityTest, UpdatesReachExistingChildrenAndFewerPrioritiesDeactivate) {
  Update(2);
  children_[0]->Report(State::kTransientFailure);
  ASSERT_EQ(children_.size(), 2u);
  Update(1);
  EXPECT_EQ(children_[0]->updates, 2);
  EXPECT_TRUE(policy_->child_deactivated(1));
  EXPECT_EQ(policy_->current_priority(), 0);
}

TEST_F(PriorityTest, NoPrioritiesFailsPicks) {
  Update(0);
  EXPECT_EQ(log_.state, State::kTransientFailure);
  EXPECT_EQ(log_.picker->Pick(PickArgs{}).kind, PickResult::Kind::kFail);
}

// A37: children are known by name. An aggregate cluster's first leaf loses
// its priority (its EDS resource failed): the second leaf's priority moves
// to position 0 but keeps its own child, READY, with no new failover timer;
// the first leaf's child is kept deactivated, not handed the second leaf's
// endpoints.
TEST_F(PriorityTest, APriorityThatMovesKeepsItsNamedChild) {
  const std::vector<PriorityChildConfig> both = {{"a[child0]", false}, {"b[child0]", false}};
  policy_->Update(std::vector<LocalityList>(2, LocalityList{}), both);
  children_[0]->Report(State::kTransientFailure);
  ASSERT_EQ(children_.size(), 2u);
  children_[1]->Report(State::kReady);
  EXPECT_EQ(CurrentTag(), 1);
  const int b_updates = children_[1]->updates;

  children_[1]->initial_state = State::kReady;
  policy_->Update(std::vector<LocalityList>(1, LocalityList{}), {{"b[child0]", false}});
  EXPECT_EQ(children_.size(), 2u);  // no child made
  EXPECT_EQ(policy_->current_priority(), 0);
  EXPECT_EQ(log_.state, State::kReady);
  EXPECT_EQ(CurrentTag(), 1);  // b's own child
  EXPECT_EQ(children_[1]->updates, b_updates + 1);
  EXPECT_FALSE(policy_->child_failover_timer_pending("b[child0]"));
  EXPECT_TRUE(policy_->child_deactivated("a[child0]"));

  // a comes back: its child is reactivated in front of b's.
  children_[0]->initial_state = State::kReady;
  policy_->Update(std::vector<LocalityList>(2, LocalityList{}), both);
  EXPECT_EQ(children_.size(), 2u);
  EXPECT_FALSE(policy_->child_deactivated("a[child0]"));
  EXPECT_EQ(CurrentTag(), 0);
}

// A37: a priority keeps the name an earlier update gave one of its
// localities; a new locality set gets a new name.
TEST(PriorityNamesTest, APriorityKeepsTheNameOfItsLocalities) {
  auto priority = [](std::vector<std::string> zones) {
    EndpointResource::Priority p;
    for (std::string& zone : zones) {
      EndpointResource::Locality l;
      l.name.zone = std::move(zone);
      p.localities.push_back(std::move(l));
    }
    return p;
  };
  PriorityNames names("c");
  EndpointResource first;
  first.priorities = {priority({"z1"}), priority({"z2", "z3"})};
  EXPECT_EQ(names.Assign(first), (std::vector<std::string>{"c[child0]", "c[child1]"}));
  // z1's priority is gone and z3 is now alone in priority 0: it keeps
  // child1; the new z4 gets a new name.
  EndpointResource second;
  second.priorities = {priority({"z3"}), priority({"z4"})};
  EXPECT_EQ(names.Assign(second), (std::vector<std::string>{"c[child1]", "c[child2]"}));
  // Two priorities naming the same earlier name: the first keeps it.
  EndpointResource third;
  third.priorities = {priority({"z3"}), priority({"z3b", "z3"})};
  EXPECT_EQ(names.Assign(third), (std::vector<std::string>{"c[child1]", "c[child3]"}));
}

}  // namespace
}  // namespace uxds
