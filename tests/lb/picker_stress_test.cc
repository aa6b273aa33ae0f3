// Pickers published while application threads pick: 2 picking threads, the
// control thread publishing 1000 new pickers a second for 10 seconds, over
// subchannels that come and go. Run under ASan (a picker or subchannel
// freed while a scope could still see it is a use after free) and TSan.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "lb/lb_test_util.h"
#include "lb/ring_hash_picker.h"

namespace uxds {
namespace {

using lb_testing::Backend;

TEST(PickerStressTest, TwoPickingThreadsWhileTheControlThreadPublishes1000PickersASecond) {
  auto loop_or = Loop::Create();
  ASSERT_TRUE(loop_or.ok());
  Loop& loop = **loop_or;
  auto pool = SubchannelPool::Create(loop, lb_testing::FastSubchannelOptions());
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<SocketAddress> addresses;
  std::set<std::string> known;
  for (int i = 0; i < 4; ++i) {
    backends.push_back(std::make_unique<Backend>(loop));
    ASSERT_TRUE(backends.back()->Start().ok());
    addresses.push_back(backends.back()->address());
  }
  for (int i = 0; i < 4; ++i) addresses.push_back(lb_testing::RefusedAddress());
  for (const SocketAddress& a : addresses) known.insert(a.ToString());

  PickerSlot slot;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> picks{0};
  std::atomic<uint64_t> completes{0};
  std::atomic<uint64_t> unknown{0};
  auto picking_thread = [&] {
    uint64_t n = 0;
    uint64_t c = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      PickScope scope(slot);
      PickArgs args;
      args.hash = ThreadRandom();
      const PickResult r = scope.Pick(args);
      ++n;
      if (r.kind == PickResult::Kind::kComplete) {
        ++c;
        // Touch what the pick returned while the scope is open.
        if (known.count(r.endpoint->address) == 0) unknown.fetch_add(1);
        (void)r.endpoint->subchannel->state();
      }
    }
    picks.fetch_add(n);
    completes.fetch_add(c);
  };

  constexpr auto kDuration = std::chrono::seconds(10);
  loop.BlockOn([&]() -> Task<void> {
    std::thread t1(picking_thread);
    std::thread t2(picking_thread);
    const auto end = Loop::Clock::now() + kDuration;
    uint64_t published = 0;
    while (Loop::Clock::now() < end) {
      // A new picker over a rotating half of the addresses, so subchannels
      // are dropped (freed once no picker names them) and made again.
      std::vector<RingEndpoint> ring_endpoints;
      std::vector<SubchannelRef> refs;
      for (size_t i = 0; i < 4; ++i) {
        const SocketAddress& a = addresses[(published + i * 3) % addresses.size()];
        ring_endpoints.push_back({a.ToString(), 1 + i});
        refs.push_back(pool->Get(a));
        refs.back()->RequestConnection();
      }
      RingSizeConfig sizes;
      sizes.min_ring_size = 64;
      sizes.max_ring_size = 256;
      auto ring = std::make_shared<const Ring>(Ring::Build(ring_endpoints, sizes));
      slot.Publish(
          new RingHashPicker(ring, std::move(refs), "", false, UnavailableError("all failed")));
      ++published;
      slot.Reclaim();
      (void)co_await SleepFor(loop, std::chrono::milliseconds(1));
    }
    stop = true;
    t1.join();
    t2.join();
    slot.Publish(nullptr);
    while (slot.Reclaim() != 0) (void)co_await SleepFor(loop, std::chrono::milliseconds(1));
    EXPECT_EQ(pool->size(), 0u);  // the last picker's subchannels went with it
    EXPECT_GT(published, 2000u);  // at most 1000 a second, less when the loop is slow
    for (auto& b : backends) co_await b->Stop();
  }());
  EXPECT_EQ(unknown.load(), 0u);
  EXPECT_GT(picks.load(), 10000u);
  EXPECT_GT(completes.load(), 0u);
  std::cout << "picks: " << picks.load() << " (" << completes.load() << " complete)\n";
  loop.BlockOn(pool->Shutdown());
}

}  // namespace
}  // namespace uxds
