// What the control loop pays per cluster when a config arrives whose
// Cluster and endpoints are the ones the cluster already has: one
// ClusterLoadBalancer::Update() with the same resources, as the channel
// did for every cluster on every config. Each such update makes the tree
// report once: the report builds a cluster_impl picker (with LRS, the table
// of each endpoint's locality), publishes it and reclaims the one it
// replaces.
//
// Arguments: endpoints (10 per locality), LRS on/off, picking threads that
// spin on the slot meanwhile (an application's threads: what a membarrier
// has to interrupt). Runs on the calling thread's loop, which does not run
// during the timed loop (no connection is ever made: the addresses are
// TEST-NET-1's, and the pool is shut down after).
#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lb/cluster_impl.h"
#include "lb/cluster_load_balancer.h"
#include "lb/subchannel.h"
#include "uxds/channel.h"
#include "uxds/loop.h"
#include "xds/lrs/load_stats.h"

namespace uxds {
namespace {

EndpointResource Endpoints(int count) {
  EndpointResource r;
  EndpointResource::Priority& priority = r.priorities.emplace_back();
  for (int i = 0; i < count; ++i) {
    if (i % 10 == 0) {
      EndpointResource::Locality& l = priority.localities.emplace_back();
      l.name = LocalityName{"r", "z" + std::to_string(i / 10), ""};
      l.weight = 1;
    }
    EndpointResource::Endpoint e;
    e.addresses = {"192.0.2." + std::to_string(1 + i % 250) + ":" + std::to_string(1000 + i / 250)};
    priority.localities.back().endpoints.push_back(std::move(e));
  }
  return r;
}

void BM_ClusterUpdateUnchanged(benchmark::State& state) {
  const int endpoint_count = static_cast<int>(state.range(0));
  const bool lrs = state.range(1) != 0;
  const int pickers = static_cast<int>(state.range(2));
  std::unique_ptr<Loop> loop = std::move(*Loop::Create());
  std::shared_ptr<SubchannelPool> pool = SubchannelPool::Create(*loop);
  auto lb = std::make_unique<ClusterLoadBalancer>(*loop, pool);
  uint64_t reports = 0;
  lb->SetStateObserver([&reports](ConnectivityState, const Status&) { ++reports; });
  const ClusterResource cluster;
  const EndpointResource endpoints = Endpoints(endpoint_count);
  auto config = std::make_shared<ClusterImplConfig>();
  config->counter = CallCounter::Create();
  if (lrs) config->load = std::make_shared<ClusterLoadStats>("c", "s");
  lb->Update(cluster, endpoints, config);

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < pickers; ++i) {
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        PickScope scope(lb->picker_slot());
        PickResult r = scope.Pick(PickArgs{});
        benchmark::DoNotOptimize(r.kind);
      }
    });
  }
  const uint64_t reports_before = reports;
  for (auto _ : state) lb->Update(cluster, endpoints, config);
  state.counters["reports_per_update"] =
      static_cast<double>(reports - reports_before) / static_cast<double>(state.iterations());
  stop = true;
  for (auto& t : threads) t.join();
  lb.reset();
  loop->BlockOn(pool->Shutdown());
}
BENCHMARK(BM_ClusterUpdateUnchanged)
    ->ArgNames({"endpoints", "lrs", "pickers"})
    ->Args({10, 0, 0})
    ->Args({10, 0, 1})
    ->Args({1000, 0, 0})
    ->Args({1000, 1, 0})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
