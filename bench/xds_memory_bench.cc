// Resident memory of a client holding N Clusters of 10 endpoints: an
// XdsClient watching N Clusters and their N ClusterLoadAssignments (one
// CDS and one EDS response from an ADS server), and how much the process's
// RSS grew from just before the client was created to when every watcher
// had its resource and both responses were ACKed. Second argument 1: each
// cluster also gets the LB tree a channel keeps for it (a
// ClusterLoadBalancer: cluster_impl, priority, ring_hash with its ring and
// picker; 10 subchannels, never connected), fed from the watchers. And the
// peak RSS of xds_scale_bench's EDS case (one ClusterLoadAssignment of
// 10 000 endpoints to a watcher that builds its ring_hash picker), which
// cannot be measured there.
//
// A program of its own, the ADS server in a child process and each
// measurement in a client process of its own, so that the RSS figure is
// this client's alone: in xds_scale_bench it would follow the 100 000-Cluster
// case, whose freed heap the allocator keeps and would hand to this client
// without the RSS growing; an in-process server's responses, buffers and
// loop would count as the client's; and a second measurement in the same
// process reuses pages the first one left resident (malloc_trim does not
// give back the top of a thread's arena).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
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

// What a client watches: `clusters` ClusterLoadAssignments of
// `endpoints_per_cluster` endpoints (all addresses distinct; localities of
// at most 100) and, with `watch_cds`, their RING_HASH Clusters (else each
// cluster's Cluster is a fixed RING_HASH one, as if known already); with
// `balancers`, an LB tree per cluster.
struct Workload {
  int clusters = 0;
  int endpoints_per_cluster = 0;
  bool watch_cds = true;
  bool balancers = false;
  int resource_types() const { return watch_cds ? 2 : 1; }
};

// The ADS server in a forked child, serving `workload`'s resources, each
// type's first request answered with everything. The child reports its
// target and then one byte per ACK on one pipe, and exits when the parent
// closes the other. Forked from the benchmark's process while it has no
// thread of its own, so the child inherits no lock held by a thread it
// does not have.
class ServerProcess {
 public:
  explicit ServerProcess(const Workload& workload) {
    int report[2];
    int stop[2];
    if (pipe2(report, O_CLOEXEC) != 0) return;
    if (pipe2(stop, O_CLOEXEC) != 0) {
      close(report[0]);
      close(report[1]);
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      close(report[0]);
      close(stop[1]);
      Serve(workload, report[1], stop[0]);
    }
    close(report[1]);
    close(stop[0]);
    report_fd_ = report[0];
    stop_fd_ = stop[1];
    if (pid_ < 0) return;
    // The target, newline-terminated, comes first.
    char c;
    while (ReadByte(std::chrono::seconds(30), &c) && c != '\n') target_.push_back(c);
  }
  ~ServerProcess() {
    if (stop_fd_ >= 0) close(stop_fd_);  // EOF: the child stops its server and exits
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    if (report_fd_ >= 0) close(report_fd_);
  }
  bool ok() const { return pid_ > 0 && !target_.empty(); }
  const std::string& target() const { return target_; }

  // Waits for `count` more ACKs (false if they did not come in `timeout`).
  bool WaitForAcks(int count, std::chrono::milliseconds timeout) {
    const Clock::time_point limit = Clock::now() + timeout;
    char c;
    for (int i = 0; i < count; ++i) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(limit - Clock::now());
      if (left.count() <= 0 || !ReadByte(left, &c)) return false;
    }
    return true;
  }

 private:
  [[noreturn]] static void Serve(const Workload& workload, int report_fd, int stop_fd) {
    {
      const int endpoints = workload.endpoints_per_cluster;
      std::vector<std::string> assignments;
      for (int i = 0; i < workload.clusters; ++i) {
        assignments.push_back(bench::EndpointsBytes(bench::ServiceName(i), endpoints,
                                                    std::min(endpoints, 100), i * endpoints));
      }
      std::map<std::string, std::string> responses = {
          {bench::kEdsType, bench::DiscoveryResponseBytes(bench::kEdsType, assignments)}};
      if (workload.watch_cds) {
        responses[bench::kCdsType] = bench::CdsResponse(workload.clusters, 0, /*ring_hash=*/true);
      }
      bench::AdsByTypeServer server(std::move(responses), [report_fd](const std::string&) {
        const char ack = 'A';
        (void)!write(report_fd, &ack, 1);
      });
      const std::string line = server.target() + "\n";
      (void)!write(report_fd, line.data(), line.size());
      char c;
      while (read(stop_fd, &c, 1) > 0) {
      }
    }
    // Not exit(): the parent's atexit handlers and buffered output are not
    // this process's to run or flush.
    _exit(0);
  }

  bool ReadByte(std::chrono::milliseconds timeout, char* c) {
    pollfd p{report_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
    return read(report_fd_, c, 1) == 1;
  }

  pid_t pid_ = -1;
  int report_fd_ = -1;
  int stop_fd_ = -1;
  std::string target_;
};

template <typename T>
class CallbackWatcher final : public XdsResourceWatcher<T> {
 public:
  using Callback = std::function<void(StatusOr<std::shared_ptr<const T>>)>;
  explicit CallbackWatcher(Callback callback) : callback_(std::move(callback)) {}
  void OnResourceChanged(StatusOr<std::shared_ptr<const T>> resource) override {
    callback_(std::move(resource));
  }
  void OnAmbientError(Status) override {}

 private:
  Callback callback_;
};

// What the client holds for one cluster (loop thread only). The resources
// are the XdsClient's own (shared, immutable), so keeping them adds nothing.
struct ClusterState {
  std::shared_ptr<const ClusterResource> cluster;
  std::shared_ptr<const EndpointResource> endpoints;
  std::unique_ptr<ClusterLoadBalancer> balancer;
};

// What one measurement found, sent from the client's process to the
// benchmark's as plain bytes.
struct Figures {
  double rss_before_mb = 0;
  double rss_after_mb = 0;
  double anon_before_mb = 0;  // RssAnon: VmRSS without the program's code and files
  double anon_after_mb = 0;
  double peak_mb = -1;  // VmHWM; -1 if it could not be reset
  double heap_growth_mb = 0;
  double seconds = 0;  // client created to last first callback
  char error[256] = "";
};

// Runs in the client's process: an XdsClient watching `workload` from
// `server`, measured from just before the client is created to when every
// watcher has had its resource and every response is ACKed.
Figures MeasureClient(const Workload& workload, ServerProcess& server) {
  const int n = workload.clusters;
  const bool balancers = workload.balancers;
  const int watches = n * workload.resource_types();
  Figures figures;
  auto loop = std::move(*LoopThread::Start());
  Bootstrap bootstrap;
  XdsServerConfig xds_server;
  xds_server.server_uri = server.target();
  bootstrap.xds_servers.push_back(xds_server);
  bootstrap.node.id = "memory-bench";
  std::unique_ptr<XdsClient> client;
  std::shared_ptr<SubchannelPool> pool;
  std::vector<ClusterState> clusters(n);
  std::vector<std::shared_ptr<XdsResourceWatcherInterface>> watchers;
  int delivered = 0;  // loop thread: first callbacks, of `watches`; -1 after an error
  std::promise<Status> all_delivered;
  // A cluster's tree is fed once both its resources are in, whichever
  // comes first (loop thread).
  auto apply = [&](int i) {
    ClusterState& c = clusters[i];
    if (!balancers || c.cluster == nullptr || c.endpoints == nullptr) return;
    if (c.balancer == nullptr) {
      c.balancer = std::make_unique<ClusterLoadBalancer>(loop->loop(), pool);
    }
    c.balancer->Update(*c.cluster, *c.endpoints);
  };
  auto count = [&](const Status& status) {
    if (delivered < 0) return;
    if (!status.ok()) {
      delivered = -1;
      all_delivered.set_value(status);
    } else if (++delivered == watches) {
      all_delivered.set_value(OkStatus());
    }
  };
  if (!workload.watch_cds) {
    const auto cluster = std::make_shared<const ClusterResource>(bench::RingHashClusterResource());
    for (ClusterState& c : clusters) c.cluster = cluster;
  }
  loop->RunSync([] {});
  // Everything the client will hold is allocated from here on (besides the
  // watchers, which an application holds too); `clusters` is the
  // benchmark's, allocated above. The reset also trims the heap.
  const bool peak_reset = bench::ResetPeakRss();
  figures.rss_before_mb = bench::ProcStatusMb("VmRSS:");
  figures.anon_before_mb = bench::ProcStatusMb("RssAnon:");
  const double heap_before_mb = bench::HeapInUseMb();
  const Clock::time_point start = Clock::now();
  loop->RunSync([&] {
    client = std::move(*XdsClient::Create(loop->loop(), bootstrap, XdsClientOptions()));
    if (balancers) pool = SubchannelPool::Create(loop->loop());
    for (int i = 0; i < n; ++i) {
      if (workload.watch_cds) {
        auto cds = std::make_shared<CallbackWatcher<ClusterResource>>(
            [&, i](StatusOr<std::shared_ptr<const ClusterResource>> r) {
              if (!r.ok()) return count(r.status());
              const bool first = clusters[i].cluster == nullptr;
              clusters[i].cluster = *r;
              apply(i);
              if (first) count(OkStatus());
            });
        client->WatchResource(ClusterResourceType::Get(), bench::ClusterName(i), cds);
        watchers.push_back(cds);
      }
      auto eds = std::make_shared<CallbackWatcher<EndpointResource>>(
          [&, i](StatusOr<std::shared_ptr<const EndpointResource>> r) {
            if (!r.ok()) return count(r.status());
            const bool first = clusters[i].endpoints == nullptr;
            clusters[i].endpoints = *r;
            apply(i);
            if (first) count(OkStatus());
          });
      client->WatchResource(EndpointResourceType::Get(), bench::ServiceName(i), eds);
      watchers.push_back(eds);
    }
  });
  std::future<Status> delivered_future = all_delivered.get_future();
  Status status = delivered_future.wait_for(std::chrono::seconds(30)) == std::future_status::ready
                      ? delivered_future.get()
                      : DeadlineExceededError("not every resource arrived");
  figures.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Every response ACKed means the client is done with them.
  if (status.ok() && !server.WaitForAcks(workload.resource_types(), std::chrono::seconds(10))) {
    status = DeadlineExceededError("a response was not ACKed");
  }
  if (status.ok()) {
    loop->RunSync([] {});  // whatever the ACKs' turn left to do is done
    figures.rss_after_mb = bench::ProcStatusMb("VmRSS:");
    figures.anon_after_mb = bench::ProcStatusMb("RssAnon:");
    figures.heap_growth_mb = bench::HeapInUseMb() - heap_before_mb;
    if (peak_reset) figures.peak_mb = bench::ProcStatusMb("VmHWM:");
  } else {
    snprintf(figures.error, sizeof(figures.error), "%s", status.ToString().c_str());
  }
  // The objects of the loop go on the loop (the XdsClient asserts it).
  loop->RunSync([&] {
    for (ClusterState& c : clusters) c.balancer.reset();
  });
  if (pool != nullptr) {
    std::promise<void> shut;
    loop->RunSync([&] {
      auto stop = [](SubchannelPool* pool, std::promise<void>* done) -> Task<void> {
        co_await pool->Shutdown();
        done->set_value();
      };
      loop->loop().Spawn(stop(pool.get(), &shut));
    });
    shut.get_future().wait();
  }
  loop->RunSync([&] {
    pool.reset();
    XdsClient::ShutdownAndDestroy(std::move(client));
    clusters.clear();
  });
  return figures;
}

// Each measurement in a process of its own, forked from the benchmark's
// (which has no thread then): the client starts from the same heap every
// repetition. In one process, what a repetition freed stays partly
// resident, and the next one's growth came out about 40 % lower.
void MeasureInProcesses(benchmark::State& state, const Workload& workload) {
  double rss_before_mb = 0;
  double rss_after_mb = 0;
  double peak_growth_mb = 0;
  double heap_growth_mb = 0;
  double anon_growth_mb = 0;
  bool peaks = true;
  for (auto _ : state) {
    ServerProcess server(workload);
    if (!server.ok()) {
      state.SkipWithError("ADS server process failed");
      break;
    }
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
      state.SkipWithError("pipe2 failed");
      break;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipe_fds[0]);
      const Figures figures = MeasureClient(workload, server);
      (void)!write(pipe_fds[1], &figures, sizeof(figures));
      _exit(0);  // not exit(): the benchmark's atexit handlers are not this process's
    }
    close(pipe_fds[1]);
    Figures figures;
    size_t got = 0;
    while (pid > 0 && got < sizeof(figures)) {
      const ssize_t r =
          read(pipe_fds[0], reinterpret_cast<char*>(&figures) + got, sizeof(figures) - got);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    close(pipe_fds[0]);
    if (pid > 0) waitpid(pid, nullptr, 0);
    if (got != sizeof(figures)) {
      state.SkipWithError("client process failed");
      break;
    }
    if (figures.error[0] != '\0') {
      state.SkipWithError(figures.error);
      break;
    }
    state.SetIterationTime(figures.seconds);
    rss_before_mb += figures.rss_before_mb;
    rss_after_mb += figures.rss_after_mb;
    heap_growth_mb += figures.heap_growth_mb;
    anon_growth_mb += figures.anon_after_mb - figures.anon_before_mb;
    peaks = peaks && figures.peak_mb >= 0;
    peak_growth_mb += figures.peak_mb - figures.rss_before_mb;
  }
  const double iterations = static_cast<double>(state.iterations());
  const double growth = (rss_after_mb - rss_before_mb) / iterations;
  state.counters["rss_growth_MB"] = growth;
  state.counters["KB_per_cluster"] = growth * 1024.0 / workload.clusters;
  state.counters["vm_rss_MB"] = rss_after_mb / iterations;
  state.counters["rss_before_MB"] = rss_before_mb / iterations;
  // The growth in parts: anonymous memory (heap, stacks; the rest is the
  // client's code paged in on first use) and, of it, the heap's bytes in
  // use (the difference: the allocator's partly used pages).
  state.counters["anon_growth_MB"] = anon_growth_mb / iterations;
  state.counters["heap_growth_MB"] = heap_growth_mb / iterations;
  // The most the RSS grew meanwhile (responses and their decoding too).
  if (peaks) state.counters["peak_growth_MB"] = peak_growth_mb / iterations;
}

void BM_XdsClientMemory(benchmark::State& state) {
  MeasureInProcesses(state, Workload{.clusters = static_cast<int>(state.range(0)),
                                     .endpoints_per_cluster = 10,
                                     .watch_cds = true,
                                     .balancers = state.range(1) != 0});
}
// One measurement per repetition: each is a fresh client against a fresh
// server process. Time: from creating the client to the last callback.
BENCHMARK(BM_XdsClientMemory)
    ->ArgNames({"clusters", "balancers"})
    ->Args({1000, 0})
    ->Args({1000, 1})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// xds_scale_bench's BM_OneEdsResponse, for its memory: one
// ClusterLoadAssignment of N endpoints (localities of 100) to one watcher
// that feeds a ring_hash ClusterLoadBalancer. peak_growth_MB is the peak
// RSS over the RSS before the client was created.
void BM_EdsResponseMemory(benchmark::State& state) {
  MeasureInProcesses(state, Workload{.clusters = 1,
                                     .endpoints_per_cluster = static_cast<int>(state.range(0)),
                                     .watch_cds = false,
                                     .balancers = true});
}
BENCHMARK(BM_EdsResponseMemory)
    ->ArgNames({"endpoints"})
    ->Arg(10000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
