// The XdsClient with many watched resources: one CDS response carrying N
// Clusters, from the moment the server writes it to the last watcher
// callback (N watchers, one per Cluster), with the longest stall of the
// control loop meanwhile and the process's peak RSS, and those Clusters'
// decode+validate alone. And one EDS response (a ClusterLoadAssignment of
// 10 000 endpoints): its decode+validate alone, the time from the server's
// write to the watcher and to the ring_hash picker over those endpoints,
// and the picker's build alone (its peak RSS: xds_memory_bench).
//
// The ADS server is in-process, on uxds's own HTTP/2 server on another loop
// thread: it reads the client's CDS request (N names), writes one prebuilt
// DiscoveryResponse and then only reads the ACK. The stall probe is a task
// on the client's loop that sleeps 1 ms at a time and records how late each
// wake-up came: a long synchronous stretch on the loop (decoding, callbacks)
// shows up as one late wake-up.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ads_response_server.h"
#include "lb/cluster_load_balancer.h"
#include "lb/subchannel.h"
#include "process_memory.h"
#include "uxds/runtime.h"
#include "uxds/xds_client.h"
#include "uxds/xds_resources.h"

namespace uxds {
namespace {

using Clock = std::chrono::steady_clock;
using bench::AdsServer;
using bench::CdsResponse;
using bench::ClusterName;
using bench::DiscoveryResponseBytes;
using bench::EndpointsBytes;
using bench::kEdsType;
using bench::ServiceName;

// One xDS server: `server`.
Bootstrap BenchBootstrap(const AdsServer& server) {
  Bootstrap bootstrap;
  XdsServerConfig xds_server;
  xds_server.server_uri = server.target();
  bootstrap.xds_servers.push_back(xds_server);
  bootstrap.node.id = "scale-bench";
  return bootstrap;
}

class CountingWatcher final : public XdsResourceWatcher<ClusterResource> {
 public:
  // With `client`, each callback also looks its entry up for the version,
  // as `uxds watch` does.
  CountingWatcher(std::atomic<int>& count, int target, std::promise<Clock::time_point>& done,
                  const XdsClient* client, std::string name)
      : count_(count), target_(target), done_(done), client_(client), name_(std::move(name)) {}
  void OnResourceChanged(StatusOr<std::shared_ptr<const ClusterResource>> resource) override {
    if (client_ != nullptr) {
      benchmark::DoNotOptimize(client_->Lookup(ClusterResourceType::Get(), name_));
    }
    if (resource.ok() && ++count_ == target_) done_.set_value(Clock::now());
  }
  void OnAmbientError(Status) override {}

 private:
  std::atomic<int>& count_;
  const int target_;
  std::promise<Clock::time_point>& done_;
  const XdsClient* client_;
  const std::string name_;
};

// CPU time of the calling thread, in microseconds.
int64_t ThreadCpuMicros() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000 + now.tv_nsec / 1000;
}

// CPU time of a thread, by its clock (pthread_getcpuclockid), in seconds.
double CpuSeconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Sleeps 1 ms at a time on the loop, recording the worst lateness, and the
// most CPU time the loop thread spent within one such sleep: on a machine
// whose other processes keep the thread off the CPU, lateness mostly
// measures them, while the CPU time is the loop's own longest stretch.
Task<void> StallProbe(Loop& loop, std::atomic<bool>& stop, std::atomic<int64_t>& worst_us,
                      std::atomic<int64_t>& worst_cpu_us) {
  while (!stop.load()) {
    const Clock::time_point before = Clock::now();
    const int64_t cpu_before = ThreadCpuMicros();
    const Status slept = co_await SleepFor(loop, std::chrono::milliseconds(1));
    if (!slept.ok()) co_return;
    const int64_t late = std::chrono::duration_cast<std::chrono::microseconds>(
                             Clock::now() - before - std::chrono::milliseconds(1))
                             .count();
    worst_us.store(std::max(worst_us.load(), late));
    worst_cpu_us.store(std::max(worst_cpu_us.load(), ThreadCpuMicros() - cpu_before));
  }
}

void BM_OneCdsResponse(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool lookups = state.range(1) != 0;
  AdsServer server(CdsResponse(n));
  int64_t worst_stall_us = 0;
  int64_t worst_stall_cpu_us = 0;
  double total_seconds = 0;
  double total_cpu_seconds = 0;
  for (auto _ : state) {
    auto loop = std::move(*LoopThread::Start());
    const Bootstrap bootstrap = BenchBootstrap(server);
    XdsClientOptions options;
    options.max_ads_response_size = 256 << 20;
    std::unique_ptr<XdsClient> client;
    std::atomic<int> count{0};
    std::promise<Clock::time_point> done;
    std::vector<std::shared_ptr<CountingWatcher>> watchers;
    std::atomic<bool> stop_probe{false};
    std::atomic<int64_t> worst_us{0};
    std::atomic<int64_t> worst_cpu_us{0};
    clockid_t loop_cpu_clock{};
    const Clock::time_point previous_write = server.written_at();
    loop->RunSync([&] {
      pthread_getcpuclockid(pthread_self(), &loop_cpu_clock);
      client = std::move(*XdsClient::Create(loop->loop(), bootstrap, options));
      for (int i = 0; i < n; ++i) {
        watchers.push_back(std::make_shared<CountingWatcher>(
            count, n, done, lookups ? client.get() : nullptr, ClusterName(i)));
        client->WatchResource(ClusterResourceType::Get(), ClusterName(i), watchers.back());
      }
      loop->loop().Spawn(StallProbe(loop->loop(), stop_probe, worst_us, worst_cpu_us));
    });
    // The loop thread's CPU time from about the response's first byte (the
    // client has sent its request and idles until then) to the last callback.
    while (server.written_at() == previous_write) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    const double cpu_start = CpuSeconds(loop_cpu_clock);
    const Clock::time_point finished = done.get_future().get();
    total_cpu_seconds += CpuSeconds(loop_cpu_clock) - cpu_start;
    const double seconds = std::chrono::duration<double>(finished - server.written_at()).count();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
    stop_probe.store(true);
    worst_stall_us = std::max(worst_stall_us, worst_us.load());
    worst_stall_cpu_us = std::max(worst_stall_cpu_us, worst_cpu_us.load());
    loop->RunSync([&] { XdsClient::ShutdownAndDestroy(std::move(client)); });
    loop.reset();
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["us_per_cluster"] = total_seconds / state.iterations() / n * 1e6;
  state.counters["cpu_us_per_cluster"] = total_cpu_seconds / state.iterations() / n * 1e6;
  state.counters["worst_stall_ms"] = static_cast<double>(worst_stall_us) / 1000.0;
  state.counters["worst_stall_cpu_ms"] = static_cast<double>(worst_stall_cpu_us) / 1000.0;
  state.counters["peak_rss_MB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}
// Second argument 1: every callback also looks up its cache entry.
BENCHMARK(BM_OneCdsResponse)
    ->ArgNames({"clusters", "lookup"})
    ->Args({1000, 0})
    ->Args({10000, 0})
    ->Args({100000, 0})
    ->Args({10000, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// #9: a control plane that answers every NACK at once with the same
// response. N Clusters, one in ten invalid; the control thread's CPU time
// per re-sent response, once the first one has been handled.
void BM_ResentCdsResponse(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  constexpr int kResends = 200;
  for (auto _ : state) {
    AdsServer server(CdsResponse(n, /*invalid=*/10), kResends);
    auto loop = std::move(*LoopThread::Start());
    const Bootstrap bootstrap = BenchBootstrap(server);
    std::unique_ptr<XdsClient> client;
    std::atomic<int> count{0};
    std::promise<Clock::time_point> done;
    std::vector<std::shared_ptr<CountingWatcher>> watchers;
    clockid_t loop_cpu_clock{};
    loop->RunSync([&] {
      pthread_getcpuclockid(pthread_self(), &loop_cpu_clock);
      client = std::move(*XdsClient::Create(loop->loop(), bootstrap, XdsClientOptions()));
      for (int i = 0; i < n; ++i) {
        watchers.push_back(
            std::make_shared<CountingWatcher>(count, n, done, nullptr, ClusterName(i)));
        client->WatchResource(ClusterResourceType::Get(), ClusterName(i), watchers.back());
      }
    });
    while (server.answers() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double start = CpuSeconds(loop_cpu_clock);
    while (server.answers() < kResends + 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const double seconds = CpuSeconds(loop_cpu_clock) - start;
    state.SetIterationTime(seconds / kResends);
    loop->RunSync([&] { XdsClient::ShutdownAndDestroy(std::move(client)); });
    loop.reset();
  }
}
BENCHMARK(BM_ResentCdsResponse)
    ->ArgNames({"clusters"})
    ->Arg(100)
    ->Arg(1000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(3);

// The EDS benchmarks' ClusterLoadAssignment: one priority, localities of
// 100 endpoints (a zone's worth), every endpoint distinct.
constexpr int kEndpointsPerLocality = 100;

class EndpointWatcher final : public XdsResourceWatcher<EndpointResource> {
 public:
  using Callback = std::function<void(StatusOr<std::shared_ptr<const EndpointResource>>)>;
  explicit EndpointWatcher(Callback callback) : callback_(std::move(callback)) {}
  void OnResourceChanged(StatusOr<std::shared_ptr<const EndpointResource>> resource) override {
    callback_(std::move(resource));
  }
  void OnAmbientError(Status) override {}

 private:
  Callback callback_;
};

// Awaits `pool`'s Shutdown() on `thread`'s loop, from another thread.
void ShutDownPool(LoopThread& thread, SubchannelPool& pool) {
  std::promise<void> done;
  thread.RunSync([&] {
    auto shut = [](SubchannelPool* pool, std::promise<void>* done) -> Task<void> {
      co_await pool->Shutdown();
      done->set_value();
    };
    thread.loop().Spawn(shut(&pool, &done));
  });
  done.get_future().wait();
}

// What a decoder reads of the bootstrap: one xDS server (never dialled).
Bootstrap DecodeBootstrap() {
  Bootstrap bootstrap;
  XdsServerConfig xds_server;
  xds_server.server_uri = "127.0.0.1:1";
  bootstrap.xds_servers.push_back(xds_server);
  return bootstrap;
}

// Decode + validate of one ClusterLoadAssignment through the decoder the
// XdsClient calls for each EDS resource (EndpointResourceType::Decode),
// without the DiscoveryResponse envelope around it. Only the call is timed:
// freeing the result is left out.
void BM_DecodeEndpoints(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string bytes = EndpointsBytes(ServiceName(0), n, kEndpointsPerLocality);
  const Bootstrap bootstrap = DecodeBootstrap();
  const XdsDecodeContext context{bootstrap, bootstrap.xds_servers.front()};
  // The heap as the 100 000-Cluster case left it (some 200 MB of free
  // blocks) made each decode here 1.7 times as long as in a fresh process;
  // trimmed, it takes what it takes in one. The raised thresholds keep the
  // result's memory in the heap between iterations, whatever ran before.
  malloc_trim(0);
  bench::RaiseMallocThresholds();
  double total_seconds = 0;
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    XdsResourceType::DecodeResult decoded = EndpointResourceType::Get().Decode(context, bytes);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!decoded.resource.ok()) {
      state.SkipWithError(decoded.resource.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(decoded);
    state.SetIterationTime(seconds);
    total_seconds += seconds;
  }
  state.counters["us_per_endpoint"] = total_seconds / state.iterations() / n * 1e6;
  state.counters["resource_KB"] = static_cast<double>(bytes.size()) / 1024.0;
}
BENCHMARK(BM_DecodeEndpoints)
    ->ArgNames({"endpoints"})
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Decode + validate alone for the CDS cases: each Cluster of
// BM_OneCdsResponse's response through ClusterResourceType::Decode, the
// decoder the XdsClient calls per resource (the envelope is parsed before
// the clock starts). The results are kept until the clock stops, as the
// cache keeps them, so freeing them is not in the figure.
void BM_DecodeClusters(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  envoy::service::discovery::v3::DiscoveryResponse response;
  if (!response.ParseFromString(CdsResponse(n))) {
    state.SkipWithError("response does not parse");
    return;
  }
  const Bootstrap bootstrap = DecodeBootstrap();
  const XdsDecodeContext context{bootstrap, bootstrap.xds_servers.front()};
  // As in BM_DecodeEndpoints. Without the raised thresholds, the 10 000
  // Clusters' results went back to the kernel after each iteration when
  // this ran alone, and page faults made it 10 times as long as after the
  // other benchmarks.
  malloc_trim(0);
  bench::RaiseMallocThresholds();
  std::vector<XdsResourceType::DecodeResult> decoded;
  decoded.reserve(static_cast<size_t>(n));
  double total_seconds = 0;
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    for (const auto& any : response.resources()) {
      decoded.push_back(ClusterResourceType::Get().Decode(context, any.value()));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
    const bool all_valid =
        std::all_of(decoded.begin(), decoded.end(), [](const auto& d) { return d.resource.ok(); });
    decoded.clear();
    if (!all_valid) {
      state.SkipWithError("a Cluster is invalid");
      break;
    }
  }
  state.counters["us_per_cluster"] = total_seconds / state.iterations() / n * 1e6;
}
BENCHMARK(BM_DecodeClusters)
    ->ArgNames({"clusters"})
    ->Arg(10000)
    ->Arg(100000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The new picker alone: a fresh ClusterLoadBalancer (the LB tree a channel
// keeps per cluster: cluster_impl, priority, ring_hash) given the decoded
// 10 000 endpoints, as a channel does when a cluster's first endpoints
// arrive. Update() reports before it returns, so the picker is published
// when it does. Timed: Update() alone (10 000 subchannels made in a fresh
// pool, the ring built, the picker published); the tree's construction and
// teardown are not. Second argument: the client's local ring size cap
// (LbPolicyOptions; gRPC's default 4096 gives a 4 096-entry ring on which
// 10 000 equal endpoints cannot all appear; 8388608, A42's limit, lets the
// ring take one entry per endpoint).
void BM_EndpointPickerBuild(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string bytes = EndpointsBytes(ServiceName(0), n, kEndpointsPerLocality);
  const Bootstrap bootstrap = DecodeBootstrap();
  auto decoded =
      EndpointResourceType::Get().Decode({bootstrap, bootstrap.xds_servers.front()}, bytes);
  if (!decoded.resource.ok()) {
    state.SkipWithError(decoded.resource.status().ToString().c_str());
    return;
  }
  const auto& endpoints = *static_cast<const EndpointResource*>(decoded.resource->get());
  const ClusterResource cluster = bench::RingHashClusterResource();
  LbPolicyOptions options;
  options.ring_sizes.ring_size_cap = static_cast<uint64_t>(state.range(1));
  // The loop never runs during the timed part: nothing is connected, and
  // each pool's Shutdown() runs it after.
  std::unique_ptr<Loop> loop = std::move(*Loop::Create());
  double total_seconds = 0;
  for (auto _ : state) {
    std::shared_ptr<SubchannelPool> pool = SubchannelPool::Create(*loop);
    auto balancer = std::make_unique<ClusterLoadBalancer>(*loop, pool, options);
    const Clock::time_point start = Clock::now();
    balancer->Update(cluster, endpoints);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (balancer->pickers_published() == 0 || pool->size() != static_cast<size_t>(n)) {
      state.SkipWithError("no picker over every endpoint");
      break;
    }
    state.SetIterationTime(seconds);
    total_seconds += seconds;
    balancer.reset();
    loop->BlockOn(pool->Shutdown());
  }
  state.counters["us_per_endpoint"] = total_seconds / state.iterations() / n * 1e6;
}
BENCHMARK(BM_EndpointPickerBuild)
    ->ArgNames({"endpoints", "ring_cap"})
    ->Args({10000, 4096})
    ->Args({10000, 8388608})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// One EDS response carrying one ClusterLoadAssignment of N endpoints, to one
// watcher whose callback hands it to the cluster's ClusterLoadBalancer (as a
// channel's does, on the control loop; the tree exists already, as it does
// once the Cluster is known). Iteration time: from the server's write of the
// response to the new picker's publication. Counters: ms_to_watcher (write
// to the callback: transfer, decode, validate, cache, notification),
// ms_to_picker (the iteration time) and picker_ms (the Update() inside the
// callback). Its peak RSS is xds_memory_bench's BM_EdsResponseMemory: here
// earlier benchmarks' memory, which the allocator keeps, would hide it.
// The allocator is put in a long-running client's state first
// (RaiseMallocThresholds): on a fresh heap each buffer of the response over
// 128 KB is a new mmap whose page faults (costly on a VM) made
// ms_to_watcher four times as long when this ran alone as after the CDS
// cases (docs/performance.md).
void BM_OneEdsResponse(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  malloc_trim(0);
  bench::RaiseMallocThresholds();
  AdsServer server(
      DiscoveryResponseBytes(kEdsType, {EndpointsBytes(ServiceName(0), n, kEndpointsPerLocality)}));
  const ClusterResource cluster = bench::RingHashClusterResource();
  struct Times {
    Clock::time_point watcher;
    Clock::time_point picker;
    std::string error;
  };
  double to_watcher_ms = 0;
  double to_picker_ms = 0;
  double picker_ms = 0;
  for (auto _ : state) {
    auto loop = std::move(*LoopThread::Start());
    const Bootstrap bootstrap = BenchBootstrap(server);
    XdsClientOptions options;
    options.max_ads_response_size = 256 << 20;
    std::unique_ptr<XdsClient> client;
    std::shared_ptr<SubchannelPool> pool;
    std::unique_ptr<ClusterLoadBalancer> balancer;
    std::shared_ptr<EndpointWatcher> watcher;
    std::promise<Times> done;
    bool delivered = false;  // loop thread
    loop->RunSync([&] {
      client = std::move(*XdsClient::Create(loop->loop(), bootstrap, options));
      pool = SubchannelPool::Create(loop->loop());
      balancer = std::make_unique<ClusterLoadBalancer>(loop->loop(), pool);
      watcher = std::make_shared<EndpointWatcher>(
          [&](StatusOr<std::shared_ptr<const EndpointResource>> resource) {
            // One response is sent; anything after it (none is expected)
            // is not this figure.
            if (delivered) return;
            delivered = true;
            const Clock::time_point at_watcher = Clock::now();
            if (!resource.ok()) {
              done.set_value({at_watcher, at_watcher, resource.status().ToString()});
              return;
            }
            balancer->Update(cluster, **resource);
            const Clock::time_point at_picker = Clock::now();
            done.set_value(
                {at_watcher, at_picker,
                 balancer->pickers_published() > 0 && pool->size() == static_cast<size_t>(n)
                     ? ""
                     : "no picker over every endpoint"});
          });
      client->WatchResource(EndpointResourceType::Get(), ServiceName(0), watcher);
    });
    const Times times = done.get_future().get();
    // The server stamped its write before the response could reach the
    // watcher, so this is this iteration's write.
    const Clock::time_point written = server.written_at();
    if (!times.error.empty()) {
      state.SkipWithError(times.error.c_str());
    } else {
      const double watcher_seconds = std::chrono::duration<double>(times.watcher - written).count();
      const double picker_seconds = std::chrono::duration<double>(times.picker - written).count();
      state.SetIterationTime(picker_seconds);
      to_watcher_ms += watcher_seconds * 1e3;
      to_picker_ms += picker_seconds * 1e3;
      picker_ms += (picker_seconds - watcher_seconds) * 1e3;
    }
    loop->RunSync([&] { balancer.reset(); });
    ShutDownPool(*loop, *pool);
    loop->RunSync([&] {
      pool.reset();
      XdsClient::ShutdownAndDestroy(std::move(client));
    });
    loop.reset();
    if (!times.error.empty()) break;
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["ms_to_watcher"] = to_watcher_ms / iterations;
  state.counters["ms_to_picker"] = to_picker_ms / iterations;
  state.counters["picker_ms"] = picker_ms / iterations;
}
BENCHMARK(BM_OneEdsResponse)
    ->ArgNames({"endpoints"})
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
