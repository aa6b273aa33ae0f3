// The XdsClient with many watched resources: one CDS response carrying N
// Clusters, from the moment the server writes it to the last watcher
// callback (N watchers, one per Cluster), with the longest stall of the
// control loop meanwhile and the process's peak RSS.
//
// The ADS server is in-process, on uxds's own HTTP/2 server on another loop
// thread: it reads the client's CDS request (N names), writes one prebuilt
// DiscoveryResponse and then only reads the ACK. The stall probe is a task
// on the client's loop that sleeps 1 ms at a time and records how late each
// wake-up came: a long synchronous stretch on the loop (decoding, callbacks)
// shows up as one late wake-up.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "ads_response_server.h"
#include "uxds/runtime.h"
#include "uxds/xds_client.h"
#include "uxds/xds_resources.h"

namespace uxds {
namespace {

using Clock = std::chrono::steady_clock;
using bench::AdsServer;
using bench::CdsResponse;
using bench::ClusterName;

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

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
