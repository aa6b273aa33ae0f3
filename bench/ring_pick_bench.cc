// ring_hash picks (A42): XXH64 of a request header value plus the ring pick
// through the real RingHashPicker, beside a plain binary search over the
// same ring (what Envoy and gRPC do) in the same run; the ring build; and
// picks through a PickerSlot from 1 and 2 threads while the control thread
// publishes a new picker 1000 times a second, beside two ceilings for what
// 2 threads can reach on the machine (a private picker per thread, and the
// hash alone).
//
// What a hash+pick figure is: the cost per pick over a stream of requests,
// as gRPC's benchmarks measure per-operation cost. Each iteration makes a
// new 16-byte header value from a counter, hashes it with XXH64 (seed 0)
// and picks with RingHashPicker::PickForHash, the call a channel makes;
// iterations do not depend on each other, so the CPU overlaps one pick's
// cache misses with the next pick's work, as it does for a stream of
// requests. Google Benchmark reports the mean time per iteration; the
// tables use the median of the repetitions. BM_HashAndRandomRead is the
// floor under the same measurement: the hash and one read of the memory a
// ring of that size occupies.
//
// The subchannels are real: uxds HTTP/2 servers on 127.0.0.1 and
// Subchannels from a SubchannelPool that connected to them and are READY.
// The picker reads each endpoint's state from its Subchannel (an atomic
// byte on its own cache line in the subchannel), so the memory a pick
// touches is the one it touches in a channel; a subchannel becomes READY
// only through a connection whose SETTINGS arrived, and uxds has no way
// (and no wish) to fake that.
#include <benchmark/benchmark.h>
#define XXH_INLINE_ALL  // inlined: a 16-byte hash is a few instructions, not a library call
#include <xxhash.h>

#include <sys/mman.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "http2/server.h"
#include "lb/ring_hash_picker.h"
#include "lb/subchannel.h"
#include "test_service/test_service.h"
#include "uxds/channel.h"
#include "uxds/ring_hash.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

constexpr int kServers = 4;
// Ring endpoints share the servers' subchannels: endpoint i is served by
// subchannel i % kServers (the picker only needs each one's state).
constexpr int kRingEndpoints = 100;

// Servers on one loop thread, the SubchannelPool on another (the control
// thread, where SubchannelRefs and pickers are made and freed).
class Fixture {
 public:
  static Fixture& Get() {
    static Fixture* fixture = new Fixture();  // lives until exit
    return *fixture;
  }

  Loop& control() { return control_->loop(); }
  void OnControl(std::function<void()> fn) { control_->RunSync(std::move(fn)); }
  const std::vector<Subchannel*>& subchannels() const { return subchannels_; }

  // Refs for the ring's endpoints (control thread only).
  std::vector<SubchannelRef> RingRefs() const {
    std::vector<SubchannelRef> refs;
    for (int i = 0; i < kRingEndpoints; ++i) refs.push_back(refs_[i % kServers]);
    return refs;
  }

  // A ring of exactly `size` entries over kRingEndpoints endpoints, with
  // the cap raised to `size`; built once per size.
  std::shared_ptr<const Ring> RingOfSize(uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& ring = rings_[size];
    if (ring == nullptr) {
      std::vector<RingEndpoint> endpoints;
      for (int i = 0; i < kRingEndpoints; ++i) {
        endpoints.push_back(RingEndpoint{"10.0." + std::to_string(i) + ".1:443", 1});
      }
      RingSizeConfig sizes;
      sizes.min_ring_size = size;
      sizes.max_ring_size = size;
      sizes.ring_size_cap = size;
      ring = std::make_shared<const Ring>(Ring::Build(endpoints, sizes));
    }
    return ring;
  }

  // A picker over `ring` (made on the control thread).
  std::unique_ptr<const RingHashPicker> MakePicker(std::shared_ptr<const Ring> ring) {
    std::unique_ptr<const RingHashPicker> picker;
    OnControl([&] {
      picker = std::make_unique<const RingHashPicker>(std::move(ring), RingRefs(), "", false,
                                                      UnavailableError("no endpoint"));
    });
    return picker;
  }
  void FreePicker(std::unique_ptr<const RingHashPicker> picker) {
    OnControl([&] { picker.reset(); });
  }

 private:
  Fixture() {
    servers_thread_ = std::move(*LoopThread::Start());
    control_ = std::move(*LoopThread::Start());
    auto registry = std::make_shared<http2::ServiceRegistry>();
    test_service::RegisterTestService(*registry, "ring-bench");
    std::vector<uint16_t> ports;
    servers_thread_->RunSync([&] {
      for (int i = 0; i < kServers; ++i) {
        servers_.push_back(std::move(*http2::Server::Listen(
            servers_thread_->loop(), SocketAddress::Loopback4(0), registry)));
        servers_thread_->loop().Spawn(servers_.back()->Serve());
        ports.push_back(servers_.back()->port());
      }
    });
    OnControl([&] {
      pool_ = SubchannelPool::Create(control());
      for (uint16_t port : ports) {
        refs_.push_back(pool_->Get(SocketAddress::Loopback4(port)));
        refs_.back()->RequestConnection();
        subchannels_.push_back(refs_.back().get());
      }
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (Subchannel* s : subchannels_) {
      while (s->state() != ConnectivityState::kReady) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::fprintf(stderr, "ring_pick_bench: a subchannel did not get READY\n");
          std::abort();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }

  std::unique_ptr<LoopThread> servers_thread_;
  std::unique_ptr<LoopThread> control_;
  std::vector<std::unique_ptr<http2::Server>> servers_;
  std::shared_ptr<SubchannelPool> pool_;
  std::vector<SubchannelRef> refs_;
  std::vector<Subchannel*> subchannels_;
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<const Ring>> rings_;
};

// XXH64 (seed 0) of a 16-byte header value made from a counter: a new value
// for every pick, so a large ring is read at random places.
inline uint64_t HashHeader(uint64_t counter) {
  char value[16];
  const uint64_t mixed = counter * 0x9e3779b97f4a7c15u;
  std::memcpy(value, &counter, 8);
  std::memcpy(value + 8, &mixed, 8);
  return XXH64(value, sizeof(value), 0);
}

void BM_HashAndPick(benchmark::State& state) {
  Fixture& f = Fixture::Get();
  auto picker = f.MakePicker(f.RingOfSize(static_cast<uint64_t>(state.range(0))));
  uint64_t counter = 0;
  for (auto _ : state) {
    const PickResult r = picker->PickForHash(HashHeader(counter++));
    benchmark::DoNotOptimize(r.endpoint);
  }
  state.SetItemsProcessed(state.iterations());
  f.FreePicker(std::move(picker));
}

// The baseline: the same hash, Ring::FindIndexByBinarySearch, and the same
// READY check and endpoint the picker returns.
void BM_HashAndBinarySearch(benchmark::State& state) {
  Fixture& f = Fixture::Get();
  std::shared_ptr<const Ring> ring = f.RingOfSize(static_cast<uint64_t>(state.range(0)));
  std::vector<Subchannel*> by_endpoint;
  for (int i = 0; i < kRingEndpoints; ++i) by_endpoint.push_back(f.subchannels()[i % kServers]);
  uint64_t counter = 0;
  for (auto _ : state) {
    const size_t index = ring->FindIndexByBinarySearch(HashHeader(counter++));
    Subchannel* s = by_endpoint[(*ring)[index].endpoint];
    const Endpoint* e = s->state() == ConnectivityState::kReady ? &s->endpoint() : nullptr;
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());
}

// The floor a pick cannot go below on this machine: the same hash, then
// one 8-byte read at the place it selects in a buffer of 16 bytes per ring
// entry (what a ring of that size occupies), huge pages requested as the
// ring requests them. The reads are summed, so they are independent and
// overlap as independent picks do; nothing is picked.
void BM_HashAndRandomRead(benchmark::State& state) {
  const size_t words = static_cast<size_t>(state.range(0)) * 2;
  const size_t bytes = words * sizeof(uint64_t);
  constexpr size_t kHugePage = size_t{2} << 20;
  auto* buffer = static_cast<uint64_t*>(
      std::aligned_alloc(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage));
  madvise(buffer, bytes, MADV_HUGEPAGE);
  for (size_t i = 0; i < words; ++i) buffer[i] = i;
  const unsigned shift = 64 - static_cast<unsigned>(std::countr_zero(words));
  uint64_t counter = 0;
  uint64_t sum = 0;
  for (auto _ : state) sum += buffer[HashHeader(counter++) >> shift];
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
  std::free(buffer);
}

void RingSizes(benchmark::internal::Benchmark* b) {
  for (int64_t size : {1024, 4096, 65536, 1 << 20, 8388608}) b->Arg(size);
}
BENCHMARK(BM_HashAndPick)->Apply(RingSizes);
BENCHMARK(BM_HashAndBinarySearch)->Apply(RingSizes);
BENCHMARK(BM_HashAndRandomRead)->Apply(RingSizes);

// 1000 weighted endpoints into 4096 entries: what an EDS update costs.
void BM_RingBuild(benchmark::State& state) {
  std::mt19937_64 random(1);
  std::vector<RingEndpoint> endpoints;
  for (int i = 0; i < 1000; ++i) {
    endpoints.push_back(
        RingEndpoint{"10." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ".7:8443",
                     1 + random() % 10});
  }
  RingSizeConfig sizes;
  sizes.min_ring_size = 4096;
  sizes.max_ring_size = 4096;
  for (auto _ : state) {
    Ring ring = Ring::Build(endpoints, sizes);
    benchmark::DoNotOptimize(ring.entries().data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RingBuild)->Unit(benchmark::kMicrosecond);

// Picks through a PickerSlot (ring of 4096) from state.threads() threads
// while the control thread publishes a fresh picker every millisecond and
// reclaims the old ones: the data path of a channel under EDS churn.
class Publisher {
 public:
  explicit Publisher(Fixture& f) : f_(f) {
    ring_ = f.RingOfSize(4096);
    Publish();
    thread_ = std::thread([this] {
      auto next = std::chrono::steady_clock::now();
      while (!stop_.load(std::memory_order_relaxed)) {
        next += std::chrono::milliseconds(1);
        std::this_thread::sleep_until(next);
        Publish();
        published_.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  ~Publisher() {
    stop_ = true;
    thread_.join();
    // No scope is open any more: the slot frees every picker.
    f_.OnControl([&] { slot_.reset(); });
  }
  const PickerSlot& slot() const { return *slot_; }
  uint64_t published() const { return published_.load(std::memory_order_relaxed); }

 private:
  void Publish() {
    // Publish and Reclaim run on the control thread, as in a channel.
    f_.OnControl([&] {
      slot_->Publish(
          new RingHashPicker(ring_, f_.RingRefs(), "", false, UnavailableError("no endpoint")));
      slot_->Reclaim();
    });
  }

  Fixture& f_;
  std::shared_ptr<const Ring> ring_;
  std::unique_ptr<PickerSlot> slot_ = std::make_unique<PickerSlot>();
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> published_{0};
  std::thread thread_;
};

Publisher* g_publisher = nullptr;

void BM_PickThroughSlot(benchmark::State& state) {
  if (state.thread_index() == 0) g_publisher = new Publisher(Fixture::Get());
  // The loop's start is a barrier for every thread: the slot exists then.
  uint64_t counter = static_cast<uint64_t>(state.thread_index()) << 48;
  uint64_t published_before = 0;
  bool first = true;
  for (auto _ : state) {
    if (first) {
      published_before = g_publisher->published();
      first = false;
    }
    PickArgs args;
    args.hash = HashHeader(counter++);
    PickScope scope(g_publisher->slot());
    const PickResult r = scope.Pick(args);
    benchmark::DoNotOptimize(r.endpoint);
  }
  state.SetItemsProcessed(state.iterations());
  // The loop's end is a barrier too: no thread picks any more.
  if (state.thread_index() == 0) {
    state.counters["publishes"] =
        benchmark::Counter(static_cast<double>(g_publisher->published() - published_before),
                           benchmark::Counter::kIsRate);
    delete g_publisher;
    g_publisher = nullptr;
  }
}
BENCHMARK(BM_PickThroughSlot)->Threads(1)->Threads(2)->UseRealTime();

// The ceiling for BM_PickThroughSlot on this machine, under the same
// publisher: each thread picks from a picker of its own (the same ring and
// subchannels, no slot, nothing written that another thread reads). What
// 2 threads reach here over 1 is what the CPUs give two independent loops.
void BM_PickPrivatePicker(benchmark::State& state) {
  if (state.thread_index() == 0) g_publisher = new Publisher(Fixture::Get());
  Fixture& f = Fixture::Get();
  auto picker = f.MakePicker(f.RingOfSize(4096));
  uint64_t counter = static_cast<uint64_t>(state.thread_index()) << 48;
  for (auto _ : state) {
    const PickResult r = picker->PickForHash(HashHeader(counter++));
    benchmark::DoNotOptimize(r.endpoint);
  }
  state.SetItemsProcessed(state.iterations());
  f.FreePicker(std::move(picker));
  if (state.thread_index() == 0) {
    delete g_publisher;
    g_publisher = nullptr;
  }
}
BENCHMARK(BM_PickPrivatePicker)->Threads(1)->Threads(2)->UseRealTime();

// The other ceiling: XXH64 of the 16-byte value alone, per thread, under
// the same publisher (no memory shared at all).
void BM_HashOnly(benchmark::State& state) {
  if (state.thread_index() == 0) g_publisher = new Publisher(Fixture::Get());
  uint64_t counter = static_cast<uint64_t>(state.thread_index()) << 48;
  for (auto _ : state) benchmark::DoNotOptimize(HashHeader(counter++));
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    delete g_publisher;
    g_publisher = nullptr;
  }
}
BENCHMARK(BM_HashOnly)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace uxds
BENCHMARK_MAIN();
