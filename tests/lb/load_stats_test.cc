// Load report counting (A42: in cluster_impl's picker): the counts that
// application threads add up are what the control thread reports, however
// the threads interleave with the reports.
#include "xds/lrs/load_stats.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "lb/cluster_impl.h"

namespace uxds {
namespace {

LocalityName Zone(const std::string& zone) { return LocalityName{"r", zone, ""}; }

// Picks always return the endpoint it is given: the child of the
// cluster_impl picker under test (a real Endpoint, no subchannel).
class FixedPicker final : public Picker {
 public:
  explicit FixedPicker(const Endpoint* endpoint) : endpoint_(endpoint) {}
  PickResult Pick(const PickArgs&) const override { return PickResult::Complete(endpoint_); }

 private:
  const Endpoint* endpoint_;
};

TEST(LoadStatsTest, ReportsAddUpToEveryCallOfEveryThread) {
  ClusterLoadStats stats("c", "s");
  std::shared_ptr<LocalityLoadStats> locality = stats.Locality(Zone("z1"));
  std::shared_ptr<ShardedCounter> drops = stats.DropCategory("lb");
  constexpr int kThreads = 4;
  constexpr int kCalls = 20000;
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        locality->CallStarted();
        locality->CallFinished(i % 4 != 0);
        drops->Add();
        stats.uncategorized_drops().Add();
      }
      running.fetch_sub(1);
    });
  }
  // Reports taken while the threads count: their sum must still be exact.
  ClusterLoadReport::Locality sum;
  uint64_t dropped = 0;
  uint64_t total_dropped = 0;
  auto take = [&] {
    ClusterLoadReport report = stats.TakeReport(ClusterLoadStats::Clock::now());
    for (const auto& l : report.localities) {
      sum.issued += l.issued;
      sum.succeeded += l.succeeded;
      sum.failed += l.failed;
      sum.in_progress = l.in_progress;
    }
    dropped += report.dropped_by_category["lb"];
    total_dropped += report.total_dropped;
  };
  while (running.load() > 0) take();
  for (std::thread& t : threads) t.join();
  take();
  EXPECT_EQ(sum.issued, uint64_t{kThreads} * kCalls);
  EXPECT_EQ(sum.succeeded, uint64_t{kThreads} * kCalls * 3 / 4);
  EXPECT_EQ(sum.failed, uint64_t{kThreads} * kCalls / 4);
  EXPECT_EQ(sum.in_progress, 0u);
  EXPECT_EQ(dropped, uint64_t{kThreads} * kCalls);
  EXPECT_EQ(total_dropped, 2 * uint64_t{kThreads} * kCalls);
}

TEST(LoadStatsTest, InProgressCallsAreReportedAndKeepTheLocality) {
  ClusterLoadStats stats("c", "s");
  LocalityLoadStats* raw = stats.Locality(Zone("z1")).get();  // nobody holds it now
  raw->CallStarted();
  raw->CallStarted();
  raw->CallFinished(true);
  ClusterLoadReport first = stats.TakeReport(ClusterLoadStats::Clock::now());
  ASSERT_EQ(first.localities.size(), 1u);
  EXPECT_EQ(first.localities[0].issued, 2u);
  EXPECT_EQ(first.localities[0].succeeded, 1u);
  EXPECT_EQ(first.localities[0].in_progress, 1u);
  EXPECT_FALSE(first.empty());
  EXPECT_TRUE(stats.HasCallsInProgress());
  // A call in progress holds the locality: it is still counted.
  raw->CallFinished(false);
  ClusterLoadReport second = stats.TakeReport(ClusterLoadStats::Clock::now());
  ASSERT_EQ(second.localities.size(), 1u);
  EXPECT_EQ(second.localities[0].issued, 0u);
  EXPECT_EQ(second.localities[0].failed, 1u);
  EXPECT_EQ(second.localities[0].in_progress, 0u);
  // Reported, unheld, idle: forgotten.
  EXPECT_FALSE(stats.HasCallsInProgress());
  EXPECT_TRUE(stats.TakeReport(ClusterLoadStats::Clock::now()).localities.empty());
}

ClusterImplConfig ImplConfig(std::vector<EndpointResource::DropCategory> drops,
                             std::shared_ptr<CallCounter> counter, uint32_t max_requests) {
  ClusterImplConfig config;
  config.drops = std::move(drops);
  config.counter = std::move(counter);
  config.max_requests = max_requests;
  return config;
}

TEST(LoadStatsTest, ClusterImplPickerCountsPicksDropsAndCircuitBreakerDrops) {
  auto stats = std::make_shared<ClusterLoadStats>("c", "s");
  // Endpoints are known by their index; `unlisted` has none in the table
  // (below, between and above the listed ones are all looked at).
  Endpoint a{"10.0.0.1:443", nullptr, 7};
  Endpoint b{"10.0.0.2:443", nullptr, 9};
  ClusterLoadCounters load;
  load.drops = stats;
  load.localities = std::make_shared<const LocalityTable>(
      std::vector<std::pair<uint32_t, std::shared_ptr<LocalityLoadStats>>>{
          {a.index, stats->Locality(Zone("za"))}, {b.index, stats->Locality(Zone("zb"))}});
  auto counter = CallCounter::Create();
  for (uint32_t index : {0u, 6u, 8u, 10u, 1u << 31}) {
    Endpoint unlisted{"10.0.0.3:443", nullptr, index};
    ClusterImplPicker picker(ImplConfig({}, counter, 2), std::make_shared<FixedPicker>(&unlisted),
                             load);
    PickResult picked = picker.Pick({});
    ASSERT_EQ(picked.kind, PickResult::Kind::kComplete);
    EXPECT_EQ(picked.locality_stats, nullptr) << index;
    CallFinished(picked, true);
  }
  ClusterImplPicker to_b(ImplConfig({}, counter, /*max_requests=*/2),
                         std::make_shared<FixedPicker>(&b), load);
  PickResult first = to_b.Pick({});
  ASSERT_EQ(first.kind, PickResult::Kind::kComplete);
  ASSERT_NE(first.locality_stats, nullptr);
  EXPECT_EQ(first.locality_stats->name().zone, "zb");
  PickResult second = to_b.Pick({});
  ASSERT_EQ(second.kind, PickResult::Kind::kComplete);
  // A32: over max_requests, a drop without a category.
  PickResult third = to_b.Pick({});
  EXPECT_TRUE(third.drop);
  CallFinished(first, true);
  CallNotStarted(second);

  std::vector<EndpointResource::DropCategory> drop_all = {{"lb", 1000000}};
  ClusterImplPicker dropping(ImplConfig(drop_all, counter, 2), std::make_shared<FixedPicker>(&a),
                             load);
  EXPECT_TRUE(dropping.Pick({}).drop);

  ClusterLoadReport report = stats->TakeReport(ClusterLoadStats::Clock::now());
  ASSERT_EQ(report.localities.size(), 2u);
  for (const auto& l : report.localities) {
    if (l.name.zone == "zb") {
      EXPECT_EQ(l.issued, 1u);  // the call that never started is not counted
      EXPECT_EQ(l.succeeded, 1u);
      EXPECT_EQ(l.in_progress, 0u);
    } else {
      EXPECT_EQ(l.issued, 0u);
    }
  }
  EXPECT_EQ(report.dropped_by_category["lb"], 1u);
  EXPECT_EQ(report.total_dropped, 2u);
  EXPECT_EQ(counter->Load(), 0);
}

}  // namespace
}  // namespace uxds
