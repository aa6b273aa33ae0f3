// What load reporting (LRS, A42) adds to a pick: cluster_impl's pick and
// the call-end hook, without and with the per-locality counters, from 1
// and 2 threads. The child picker returns one endpoint of 20 (localities
// of 4): the bench measures cluster_impl alone, not an endpoint policy.
//
// Each iteration is one pick plus CallFinished(), the pair a channel runs
// per call. With LRS on, that adds a lookup of the endpoint's locality (an
// array slot at the endpoint's index) and two relaxed fetch_adds on the
// thread's own shard; the control thread's report reads are not in the
// loop (they happen once per report interval).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "lb/cluster_impl.h"
#include "xds/lrs/load_stats.h"

namespace uxds {
namespace {

constexpr int kEndpoints = 20;

class RotatingPicker final : public Picker {
 public:
  explicit RotatingPicker(const std::vector<Endpoint>& endpoints) : endpoints_(endpoints) {}
  PickResult Pick(const PickArgs&) const override {
    thread_local size_t next = 0;
    return PickResult::Complete(&endpoints_[next++ % endpoints_.size()]);
  }

 private:
  const std::vector<Endpoint>& endpoints_;
};

struct Setup {
  Setup() {
    for (int i = 0; i < kEndpoints; ++i) {
      endpoints.push_back(
          Endpoint{"10.0." + std::to_string(i) + ".1:8443", nullptr, static_cast<uint32_t>(i)});
    }
  }
  std::unique_ptr<ClusterImplPicker> MakePicker(bool lrs) {
    ClusterLoadCounters load;
    if (lrs) {
      load.drops = stats;
      std::vector<std::pair<uint32_t, std::shared_ptr<LocalityLoadStats>>> localities;
      for (int i = 0; i < kEndpoints; ++i) {
        localities.emplace_back(endpoints[i].index, stats->Locality(LocalityName{
                                                        "r", "z" + std::to_string(i / 4), ""}));
      }
      load.localities = std::make_shared<const LocalityTable>(std::move(localities));
    }
    ClusterImplConfig config;
    config.counter = CallCounter::Create();
    config.max_requests = 1u << 30;
    return std::make_unique<ClusterImplPicker>(config, std::make_shared<RotatingPicker>(endpoints),
                                               std::move(load));
  }
  std::vector<Endpoint> endpoints;
  std::shared_ptr<ClusterLoadStats> stats = std::make_shared<ClusterLoadStats>("c", "s");
};

Setup& Shared() {
  static Setup setup;
  return setup;
}

void PickAndFinish(benchmark::State& state, const ClusterImplPicker& picker) {
  for (auto _ : state) {
    PickResult picked = picker.Pick({});
    benchmark::DoNotOptimize(picked.endpoint);
    CallFinished(picked, true);
  }
}

void BM_PickAndFinish_NoLrs(benchmark::State& state) {
  static auto picker = Shared().MakePicker(false);
  PickAndFinish(state, *picker);
}
BENCHMARK(BM_PickAndFinish_NoLrs)->Threads(1)->Threads(2)->UseRealTime();

void BM_PickAndFinish_Lrs(benchmark::State& state) {
  static auto picker = Shared().MakePicker(true);
  PickAndFinish(state, *picker);
}
BENCHMARK(BM_PickAndFinish_Lrs)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
