// pick_first (A62, as A37 uses it for a LOGICAL_DNS cluster's priority)
// against real endpoints on loopback: the addresses in order, the next on
// failure, re-resolution asked for when every address has failed or the
// connection in use is lost.
#include "lb/pick_first.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "lb/lb_test_util.h"

namespace uxds {
namespace {

using lb_testing::Backend;
using lb_testing::OneLocality;
using lb_testing::RefusedAddress;
using lb_testing::WaitUntil;
using State = ConnectivityState;

class PickFirstTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    pool_ = SubchannelPool::Create(*loop_, lb_testing::FastSubchannelOptions());
    for (int i = 0; i < 2; ++i) {
      backends_.push_back(std::make_unique<Backend>(*loop_));
      ASSERT_TRUE(backends_.back()->Start().ok());
    }
    policy_ = std::make_unique<PickFirstPolicy>(
        *pool_, [this] { ++reresolutions_; }, log_.reporter());
  }
  void TearDown() override {
    policy_.reset();
    log_.picker.reset();  // its subchannel reference goes before the pool
    loop_->BlockOn([this]() -> Task<void> {
      for (auto& b : backends_) {
        if (b->running()) co_await b->Stop();
      }
      co_await pool_->Shutdown();
    }());
    pool_.reset();
  }

  // Where a pick goes now ("" unless it completes).
  std::string Picked() const {
    if (log_.picker == nullptr) return "";
    PickResult r = log_.picker->Pick(PickArgs{});
    return r.kind == PickResult::Kind::kComplete ? r.endpoint->address : "";
  }
  bool WaitUntilPicked(const std::string& address) {
    return loop_->BlockOn(WaitUntil(*loop_, [&] { return Picked() == address; }));
  }

  std::unique_ptr<Loop> loop_;
  std::shared_ptr<SubchannelPool> pool_;
  std::vector<std::unique_ptr<Backend>> backends_;
  lb_testing::ReportLog log_;
  int reresolutions_ = 0;
  std::unique_ptr<PickFirstPolicy> policy_;
};

// The first address refuses: the second is tried and every pick goes to
// it; the third is never connected to.
TEST_F(PickFirstTest, TriesTheAddressesInOrderAndUsesTheFirstThatConnects) {
  policy_->Update(
      OneLocality({RefusedAddress(), backends_[0]->address(), backends_[1]->address()}));
  EXPECT_EQ(log_.state, State::kConnecting);
  ASSERT_TRUE(WaitUntilPicked(backends_[0]->address_text()));
  EXPECT_EQ(log_.state, State::kReady);
  EXPECT_EQ(pool_->Find(backends_[1]->address_text())->connection_attempts(), 0u);
  EXPECT_EQ(reresolutions_, 0);
}

// A62: every address failed: TRANSIENT_FAILURE, and one re-resolution.
TEST_F(PickFirstTest, AFailedPassReportsTransientFailureAndAsksForReresolution) {
  policy_->Update(OneLocality({RefusedAddress(), RefusedAddress()}));
  ASSERT_TRUE(
      loop_->BlockOn(WaitUntil(*loop_, [&] { return log_.state == State::kTransientFailure; })));
  EXPECT_NE(log_.status.message().find("connections to all addresses failing"), std::string::npos)
      << log_.status.ToString();
  EXPECT_EQ(reresolutions_, 1);
}

// The connection in use closes: re-resolution is asked for, and the pass
// starts again from the first address (here down, so the second is used).
TEST_F(PickFirstTest, ALostConnectionAsksForReresolutionAndConnectsAgain) {
  policy_->Update(OneLocality({backends_[0]->address(), backends_[1]->address()}));
  ASSERT_TRUE(WaitUntilPicked(backends_[0]->address_text()));
  loop_->BlockOn(backends_[0]->Stop());
  ASSERT_TRUE(WaitUntilPicked(backends_[1]->address_text()));
  EXPECT_EQ(reresolutions_, 1);
}

// A new answer that still holds the address in use keeps the connection;
// one without it moves to the new addresses.
TEST_F(PickFirstTest, AnUpdateKeepsTheConnectionInUseWhileItsAddressStays) {
  policy_->Update(OneLocality({backends_[0]->address()}));
  ASSERT_TRUE(WaitUntilPicked(backends_[0]->address_text()));
  policy_->Update(OneLocality({backends_[1]->address(), backends_[0]->address()}));
  EXPECT_EQ(Picked(), backends_[0]->address_text());
  EXPECT_EQ(pool_->Find(backends_[1]->address_text())->connection_attempts(), 0u);
  policy_->Update(OneLocality({backends_[1]->address()}));
  ASSERT_TRUE(WaitUntilPicked(backends_[1]->address_text()));
}

// A62 shuffle_address_list: each policy tries the endpoints of a new list
// in its own random order; the same list again keeps the connection in
// use (no new order).
TEST_F(PickFirstTest, ShuffleAddressListSpreadsPoliciesOverTheEndpoints) {
  std::set<std::string> first_picked;
  for (int i = 0; i < 16 && first_picked.size() < 2; ++i) {
    lb_testing::ReportLog log;
    PickFirstPolicy shuffled(*pool_, nullptr, log.reporter(), /*shuffle_address_list=*/true);
    const LocalityList endpoints = OneLocality({backends_[0]->address(), backends_[1]->address()});
    shuffled.Update(endpoints);
    auto picked = [&] {
      if (log.picker == nullptr) return std::string();
      const PickResult r = log.picker->Pick(PickArgs{});
      return r.kind == PickResult::Kind::kComplete ? r.endpoint->address : std::string();
    };
    ASSERT_TRUE(loop_->BlockOn(WaitUntil(*loop_, [&] { return !picked().empty(); })));
    const std::string first = picked();
    first_picked.insert(first);
    for (int again = 0; again < 8; ++again) {
      shuffled.Update(endpoints);
      EXPECT_EQ(picked(), first);
    }
    log.picker.reset();
  }
  // Both endpoints came first at least once: (1/2)^15 that they would not.
  EXPECT_EQ(first_picked.size(), 2u);
}

}  // namespace
}  // namespace uxds
