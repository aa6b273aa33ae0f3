// `uxds call --bootstrap F xds:///target [--method M] [--header k=v]... [-n N]
//  [--concurrency C] [--deadline-ms D] [--wait-for-ready] [--summary-only]`:
// unary calls through a uxds Channel (routing, hash policies, LB as an
// application gets them), one JSON line per call and a summary line. Uses the
// public API only.
//
// SIGINT/SIGTERM (or stdout failing) stops it starting calls; those in
// flight get kInFlightGrace to end, then are cancelled, and the summary is
// printed. Memory does not grow with -n: the summary keeps counts and a
// fixed-size latency histogram, not the calls.
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "address_check.h"
#include "cli.h"
#include "commands.h"
#include "grpc/testing/messages.pb.h"
#include "latency_histogram.h"
#include "uxds/bootstrap.h"
#include "uxds/client_channel.h"
#include "uxds/log.h"
#include "uxds/runtime.h"
#include "uxds/xds_client_pool.h"

namespace uxds::tool {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long calls in flight may still run after a stop was asked for.
constexpr std::chrono::seconds kInFlightGrace{2};

// Printed text never throws: bytes that are not UTF-8 (a target, method or
// peer from the command line or the network) become U+FFFD.
std::string Dump(const json& line) {
  return line.dump(-1, ' ', false, json::error_handler_t::replace);
}

constexpr char kDefaultMethod[] = "/grpc.testing.TestService/UnaryCall";

struct CallArgs {
  std::string bootstrap_file;
  std::string target;
  std::string method = kDefaultMethod;
  std::vector<std::string> headers;  // "name=value"
  int64_t count = 1;
  int concurrency = 1;
  int deadline_ms = 5000;
  bool wait_for_ready = false;
  // Benches make 10^5 calls and read the summary alone: no line per call
  // (nor its formatting cost in the CPU they measure).
  bool summary_only = false;
  // Loops making calls (the channel's and loops - 1 more); 0: one per CPU.
  int64_t loops = 0;
  // A29: the clusters' xDS security config secures the connections.
  bool xds_creds = false;
};

// What the calls did, summed up as they end (constant memory in -n).
struct Tally {
  int64_t calls = 0;
  std::map<std::string, int64_t> by_backend;
  std::map<std::string, int64_t> by_status;
  LatencyHistogram latency;
};

// The backend that answered: SimpleResponse.hostname (what gRPC's xDS
// interop servers fill in), else the address the call went to.
std::string BackendOf(const std::string& method, const UnaryResponse& response) {
  if (method == kDefaultMethod) {
    grpc::testing::SimpleResponse parsed;
    if (parsed.ParseFromString(response.message) && !parsed.hostname().empty()) {
      return parsed.hostname();
    }
  }
  return response.peer;
}

// What the calls of every loop share: the plan, the next call's index, and
// whether (and why) no new call starts.
struct CallPlan {
  CallPlan(Loop& main, const CallArgs& a) : args(a), main_loop(main), stop_requested(main) {}

  const CallArgs& args;
  CallOptions options;
  std::string request;
  std::atomic<int64_t> next{0};  // the index of the next call to start
  std::atomic<bool> stopping{false};
  Loop& main_loop;
  Event stop_requested;  // main loop
  // Main loop: cancels every loop's calls in flight.
  std::function<void()> cancel_all;

  // Any thread: no new call starts; a second stop cancels the calls in
  // flight at once.
  void Stop(std::string why) {
    bool second = false;
    {
      std::lock_guard lock(mu_);
      second = !stopped_by_.empty();
      if (!second) stopped_by_ = std::move(why);
    }
    stopping.store(true, std::memory_order_relaxed);
    main_loop.Post([this, second] {
      if (second) {
        cancel_all();
      } else {
        stop_requested.Set();
      }
    });
  }
  std::string stopped_by() {
    std::lock_guard lock(mu_);
    return stopped_by_;
  }

  // After a stop: the calls in flight get kInFlightGrace, then are cancelled.
  Task<void> CancelAfterGrace() {
    const Status stopped = co_await stop_requested.Wait();
    if (!stopped.ok()) co_return;  // every call ended first
    const Status slept = co_await SleepFor(main_loop, kInFlightGrace);
    if (slept.ok()) cancel_all();
  }

 private:
  std::mutex mu_;
  std::string stopped_by_;  // "SIGINT", "stdout"; empty while calls go on
};

using UnaryCaller = std::function<Task<StatusOr<UnaryResponse>>(
    std::string method, std::string request, CallOptions options)>;

// One loop's workers and what their calls did.
struct LoopCalls {
  LoopCalls(Loop& l, CallPlan& p, UnaryCaller c)
      : loop(l), plan(p), call(std::move(c)), workers(l) {}

  Loop& loop;
  CallPlan& plan;
  UnaryCaller call;
  Tally tally;
  TaskGroup workers;

  // One of the loop's workers: takes the next call until none is left or
  // a stop was asked for.
  Task<void> Worker() {
    const CallArgs& args = plan.args;
    while (!plan.stopping.load(std::memory_order_relaxed)) {
      const int64_t index = plan.next.fetch_add(1, std::memory_order_relaxed);
      if (index >= args.count) break;
      const Clock::time_point start = Clock::now();
      StatusOr<UnaryResponse> reply = co_await call(args.method, plan.request, plan.options);
      const int64_t latency_us =
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
      const std::string status(
          StatusCodeName(reply.ok() ? StatusCode::kOk : reply.status().code()));
      std::string backend;
      if (reply.ok()) {
        backend = BackendOf(args.method, *reply);
        ++tally.by_backend[backend];
      }
      ++tally.calls;
      ++tally.by_status[status];
      tally.latency.Add(latency_us);
      if (args.summary_only) continue;
      json line = {{"call", index}};
      if (reply.ok()) {
        line["backend"] = backend;
        line["peer"] = reply->peer;
      }
      line["status"] = status;
      if (!reply.ok()) line["message"] = reply.status().message();
      line["latency_us"] = latency_us;
      // One fwrite per line: stdio's lock keeps lines of several loops whole.
      const std::string text = Dump(line) + "\n";
      if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::ferror(stdout)) {
        plan.Stop("stdout");
      }
    }
  }
};

void MergeInto(Tally& sum, const Tally& part) {
  sum.calls += part.calls;
  for (const auto& [backend, n] : part.by_backend) sum.by_backend[backend] += n;
  for (const auto& [status, n] : part.by_status) sum.by_status[status] += n;
  sum.latency.Merge(part.latency);
}

// Percentiles come from the histogram (within 0.4%), max is exact.
json Summary(const Tally& tally, const std::string& stopped_by, Clock::duration elapsed) {
  const double seconds = std::chrono::duration<double>(elapsed).count();
  const LatencyHistogram& latency = tally.latency;
  json summary = {{"calls", tally.calls},
                  {"by_backend", tally.by_backend},
                  {"by_status", tally.by_status},
                  {"elapsed_s", std::round(seconds * 1000) / 1000},
                  {"calls_per_s", seconds > 0 ? std::round(tally.calls / seconds * 10) / 10 : 0.0},
                  {"latency_us",
                   {{"p50", latency.Percentile(0.5)},
                    {"p90", latency.Percentile(0.9)},
                    {"p99", latency.Percentile(0.99)},
                    {"max", latency.max()}}}};
  if (!stopped_by.empty()) summary["stopped_by"] = stopped_by;
  return {{"summary", summary}};
}

// Takes SIGINT and SIGTERM (blocked on every thread) with sigtimedwait and
// hands them to the loop, until destroyed.
class SignalWatcher {
 public:
  SignalWatcher(Loop& loop, const sigset_t& signals, std::function<void(int)> on_signal)
      : wake_signal_(FirstMember(signals)),
        thread_([this, &loop, signals, on_signal = std::move(on_signal)] {
          const timespec tick{0, 100'000'000};
          while (!done_.load()) {
            const int sig = sigtimedwait(&signals, nullptr, &tick);
            if (sig > 0 && !done_.load()) loop.Post([on_signal, sig] { on_signal(sig); });
          }
        }) {}
  ~SignalWatcher() {
    done_.store(true);
    // Ends the wait now rather than at the next tick, which added up to
    // 100 ms to every run (`uxds call -n 1` is what start-up benchmarks
    // time). Sent to this thread alone; with done_ set it is not passed on.
    pthread_kill(thread_.native_handle(), wake_signal_);
    thread_.join();
  }

 private:
  static int FirstMember(const sigset_t& signals) {
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sigismember(&signals, sig) == 1) return sig;
    }
    return 0;  // none: pthread_kill sends nothing, the tick ends the wait
  }

  const int wake_signal_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Runs every call, then shuts the channel down; the summary, or the error
// that kept the channel from being made.
// (A host:port target needs no bootstrap.)
Task<StatusOr<json>> RunCalls(Loop& loop, const CallArgs& args, std::optional<Bootstrap> bootstrap,
                              const sigset_t* signals) {
  ChannelOptions channel_options;
  if (args.xds_creds) {
    channel_options.credentials = ChannelCredentials::Xds(ChannelCredentials::Insecure());
  }
  if (bootstrap.has_value()) {
    XdsClientOptions client_options;
    client_options.user_agent_name = "uxds call";
    StatusOr<std::shared_ptr<XdsClientPool>> pool =
        XdsClientPool::Create(loop, *std::move(bootstrap), client_options);
    if (!pool.ok()) co_return pool.status();
    channel_options.xds_client_pool = *pool;
  }
  StatusOr<std::unique_ptr<Channel>> channel = Channel::Create(loop, args.target, channel_options);
  if (!channel.ok()) co_return channel.status();
  CallPlan plan(loop, args);
  plan.options.timeout = std::chrono::milliseconds(args.deadline_ms);
  plan.options.wait_for_ready = args.wait_for_ready;
  for (const std::string& header : args.headers) {
    const size_t equals = header.find('=');
    std::string name = header.substr(0, equals);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    plan.options.metadata.emplace_back(std::move(name), header.substr(equals + 1));
  }
  // An empty SimpleRequest (or Empty) is a valid request of the
  // TestService's methods; other methods get empty bytes too.

  // The calls' loops: this one (the channel's), and loops - 1 more, each on
  // its own thread with its own LoopChannel; the workers are spread evenly.
  const int64_t worker_count = std::min<int64_t>(args.concurrency, args.count);
  const int loop_count = static_cast<int>(std::clamp<int64_t>(args.loops, 1, worker_count));
  Channel& shared_channel = **channel;
  std::vector<std::unique_ptr<LoopCalls>> per_loop;
  per_loop.push_back(std::make_unique<LoopCalls>(
      loop, plan, [&shared_channel](std::string method, std::string request, CallOptions options) {
        return shared_channel.UnaryCall(std::move(method), std::move(request), std::move(options));
      }));
  std::vector<std::unique_ptr<LoopThread>> threads;
  std::vector<std::unique_ptr<LoopChannel>> handles;
  for (int i = 1; i < loop_count; ++i) {
    StatusOr<std::unique_ptr<LoopThread>> thread = LoopThread::Start();
    if (!thread.ok()) {
      Log(LogSeverity::kWarning, "uxds call: a loop of its own failed to start (" +
                                     thread.status().ToString() + "); calls on fewer loops");
      break;
    }
    threads.push_back(*std::move(thread));
    handles.push_back(shared_channel.OnLoop(threads.back()->loop()));
    LoopChannel* handle = handles.back().get();
    per_loop.push_back(std::make_unique<LoopCalls>(
        threads.back()->loop(), plan,
        [handle](std::string method, std::string request, CallOptions options) {
          return handle->UnaryCall(std::move(method), std::move(request), std::move(options));
        }));
  }
  plan.cancel_all = [&per_loop] {
    for (const auto& calls : per_loop) {
      LoopCalls* c = calls.get();
      c->loop.Post([c] { c->workers.Cancel(); });
    }
  };
  std::optional<SignalWatcher> signal_watcher;
  if (signals != nullptr) {
    signal_watcher.emplace(loop, *signals,
                           [&plan](int sig) { plan.Stop(sig == SIGINT ? "SIGINT" : "SIGTERM"); });
  }
  const Clock::time_point start = Clock::now();
  TaskGroup grace(loop);
  grace.Spawn(plan.CancelAfterGrace());
  // The other loops run their workers, then shut their handle down, and
  // tell this loop.
  const int64_t loops_running = static_cast<int64_t>(threads.size()) + 1;
  size_t others_running = threads.size();
  Event others_done(loop);
  if (others_running == 0) others_done.Set();
  for (size_t i = 0; i < threads.size(); ++i) {
    const int64_t workers =
        worker_count / loops_running + (static_cast<int64_t>(i + 1) < worker_count % loops_running);
    LoopCalls* calls = per_loop[i + 1].get();
    LoopChannel* handle = handles[i].get();
    auto finished = [&loop, &others_running, &others_done] {
      loop.Post([&others_running, &others_done] {
        if (--others_running == 0) others_done.Set();
      });
    };
    threads[i]->RunSync([&] {
      threads[i]->loop().Spawn([](LoopCalls* calls, LoopChannel* handle, int64_t workers,
                                  std::function<void()> finished) -> Task<void> {
        for (int64_t w = 0; w < workers; ++w) calls->workers.Spawn(calls->Worker());
        co_await calls->workers.Join();
        co_await handle->Shutdown();
        finished();
      }(calls, handle, workers, finished));
    });
  }
  const int64_t own_workers = worker_count / loops_running + (0 < worker_count % loops_running);
  for (int64_t w = 0; w < own_workers; ++w) per_loop[0]->workers.Spawn(per_loop[0]->Worker());
  co_await per_loop[0]->workers.Join();
  (void)co_await others_done.Wait();
  const Clock::duration elapsed = Clock::now() - start;
  signal_watcher.reset();  // before `plan`: its posts reach `plan`
  co_await grace.CancelAndJoin();
  Tally tally;
  for (const auto& calls : per_loop) MergeInto(tally, calls->tally);
  // Each other loop's handle and workers go on that loop, before it ends.
  for (size_t i = 0; i < threads.size(); ++i) {
    threads[i]->RunSync([&] {
      handles[i].reset();
      per_loop[i + 1].reset();
    });
  }
  threads.clear();
  co_await (*channel)->Shutdown();
  co_return Summary(tally, plan.stopped_by(), elapsed);
}

// CLI11 check: "name=value" with a name gRPC can send as metadata (lower
// case letters, digits, '-', '_', '.'; not a pseudo-header like ":path") and
// a value it can carry.
std::string CheckHeader(const std::string& header) {
  const size_t equals = header.find('=');
  if (equals == std::string::npos || equals == 0) {
    return "--header must be NAME=VALUE, got \"" + Printable(header) + "\"";
  }
  for (size_t i = 0; i < equals; ++i) {
    const auto c = static_cast<unsigned char>(std::tolower(static_cast<unsigned char>(header[i])));
    if (!std::isdigit(c) && !(c >= 'a' && c <= 'z') && c != '-' && c != '_' && c != '.') {
      return "--header name \"" + Printable(header.substr(0, equals)) +
             "\" cannot be sent: a metadata name has only letters, digits, '-', '_' and '.'";
    }
  }
  // Bytes go in a "-bin" header (base64 on the wire); others carry printable
  // ASCII only.
  if (header.substr(0, equals).ends_with("-bin")) return "";
  for (size_t i = equals + 1; i < header.size(); ++i) {
    const auto c = static_cast<unsigned char>(header[i]);
    if (c < 0x20 || c >= 0x7f) {
      return "--header value of \"" + Printable(header.substr(0, equals)) +
             "\" is not printable ASCII (a name ending in -bin takes bytes)";
    }
  }
  return "";
}

std::string CheckMethod(const std::string& method) {
  if (method.size() < 4 || method[0] != '/' || method.find('/', 1) == std::string::npos ||
      method.back() == '/') {
    return "--method must be /package.Service/Method, got \"" + Printable(method) + "\"";
  }
  for (const char c : method) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return "--method \"" + Printable(method) + "\" has a byte that is not printable ASCII";
    }
  }
  return "";
}

// A host:port target is checked like every address the tool takes; other
// schemes are the channel's to judge.
std::string CheckTarget(const std::string& target) {
  if (target.find("://") != std::string::npos || target.starts_with("xds:") ||
      target.starts_with("dns:")) {
    return "";
  }
  return CheckTargetAddress(target);
}

}  // namespace

int RunCall(const std::vector<std::string>& args) {
  CallArgs call;
  CLI::App app{
      "Unary calls through a uxds Channel: one JSON line per call (backend, status,\n"
      "latency_us; none with --summary-only), then a summary line with counts per\n"
      "backend and per status, elapsed_s, calls_per_s and latency percentiles (from a\n"
      "histogram: within 0.4%; max is exact). SIGINT/SIGTERM stops new calls, gives\n"
      "those in flight 2 s and prints the summary. Exit status 0 when every call\n"
      "succeeded, 1 otherwise, 128+signal when stopped by a signal.",
      "uxds call"};
  app.add_option("--bootstrap", call.bootstrap_file,
                 "gRPC xDS bootstrap file (default: $GRPC_XDS_BOOTSTRAP or "
                 "$GRPC_XDS_BOOTSTRAP_CONFIG)")
      ->check(CLI::ExistingFile);
  app.add_option("target", call.target, "xds:///name, or host:port for a channel without xDS")
      ->required()
      ->check(CheckTarget);
  app.add_option("--method", call.method, "the method to call")
      ->check(CheckMethod)
      ->capture_default_str();
  app.add_option("--header", call.headers, "request metadata NAME=VALUE (repeatable)")
      ->check(CheckHeader);
  app.add_option("-n,--calls", call.count, "how many calls")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000'000}))
      ->capture_default_str();
  app.add_option("--concurrency", call.concurrency, "calls in flight at once")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--deadline-ms", call.deadline_ms, "each call's deadline")
      ->check(CLI::Range(1, 86400000))
      ->capture_default_str();
  app.add_flag("--wait-for-ready", call.wait_for_ready,
               "a call with no usable endpoint waits for one (within its deadline)");
  app.add_flag("--summary-only", call.summary_only,
               "print the summary line alone, no line per call");
  app.add_flag("--xds-creds", call.xds_creds,
               "xDS credentials (A29): a cluster's UpstreamTlsContext makes its connections\n"
               "TLS; clusters without one are plaintext");
  app.add_option("--loops", call.loops,
                 "loops making calls, each on its own thread and connections (0: one per CPU)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}))
      ->capture_default_str();
  if (auto rc = ParseCommandLine(app, args)) return *rc;
  if (call.loops == 0) call.loops = std::max<int64_t>(1, std::thread::hardware_concurrency());

  std::optional<Bootstrap> bootstrap;
  if (call.target.starts_with("xds:") || !call.bootstrap_file.empty()) {
    StatusOr<Bootstrap> loaded = call.bootstrap_file.empty()
                                     ? Bootstrap::FromEnvironment()
                                     : Bootstrap::FromFile(call.bootstrap_file);
    if (!loaded.ok()) {
      std::fprintf(stderr, "uxds call: %s\n", Printable(loaded.status().ToString()).c_str());
      return kExitRuntimeError;
    }
    bootstrap = *std::move(loaded);
  }
  // Taken by a thread of RunCalls (sigtimedwait), on no thread by a handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  StatusOr<std::unique_ptr<Loop>> loop = Loop::Create();
  if (!loop.ok()) {
    std::fprintf(stderr, "uxds call: %s\n", loop.status().ToString().c_str());
    return kExitRuntimeError;
  }
  StatusOr<json> summary = (*loop)->BlockOn(RunCalls(**loop, call, std::move(bootstrap), &signals));
  if (!summary.ok()) {
    std::fprintf(stderr, "uxds call: %s\n", Printable(summary.status().ToString()).c_str());
    return kExitRuntimeError;
  }
  std::printf("%s\n", Dump(*summary).c_str());
  if (StdoutFailed("uxds call")) return kExitRuntimeError;
  const std::string stopped_by = (*summary)["summary"].value("stopped_by", "");
  if (stopped_by == "SIGINT") return 128 + SIGINT;
  if (stopped_by == "SIGTERM") return 128 + SIGTERM;
  const int64_t ok = (*summary)["summary"]["by_status"].value("OK", int64_t{0});
  const int64_t calls = (*summary)["summary"]["calls"].get<int64_t>();
  if (ok != calls) {
    std::fprintf(stderr, "uxds call: %lld of %lld calls failed\n",
                 static_cast<long long>(calls - ok), static_cast<long long>(calls));
    return kExitRuntimeError;
  }
  return kExitOk;
}

}  // namespace uxds::tool
