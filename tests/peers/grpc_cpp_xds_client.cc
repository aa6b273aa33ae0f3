// A gRPC C++ (Debian's 1.51) xDS client: unary grpc.testing.TestService
// calls through a gRPC channel, the reference `uxds call` is benchmarked
// against (tools/dev/client_compare.py). A separate program, never linked
// with uxds: gRPC C++ links OpenSSL, uxds links BoringSSL.
//
//   grpc_cpp_xds_client [--calls N] [--concurrency C] [--deadline-ms D]
//                       [--response-size B] [--xds-creds] TARGET
//
// TARGET is what gRPC takes, e.g. xds:///name, whose bootstrap gRPC reads
// from $GRPC_XDS_BOOTSTRAP (or $GRPC_XDS_BOOTSTRAP_CONFIG) itself. Debian's
// libgrpc (which libgrpc++ links) registers the xds resolver, so nothing but
// libgrpc++ is needed. Data-plane credentials are insecure, like `uxds call`;
// with --xds-creds they are gRPC's XdsCredentials over an insecure fallback
// (A29: a Cluster's UpstreamTlsContext makes its connections TLS, with the
// certificate providers of the bootstrap).
//
// Keeps C calls in flight with the callback API (gRPC C++'s fastest client
// path, so the bench compares against gRPC at its best): each call's
// completion starts the next one. Every call has wait_for_ready, so calls
// made before the xDS config arrived wait for it instead of failing; the
// clock starts before the first call, so (as in `uxds call`) elapsed_s
// includes getting the config and connecting.
//
// Prints one JSON line at the end, shaped like `uxds call`'s summary (so one
// parser reads both) plus ok and failed:
//   {"summary":{"calls":N,"ok":N,"failed":0,"by_backend":{...},"by_status":{"OK":N},
//    "elapsed_s":S,"calls_per_s":R,"latency_us":{"p50":..,"p90":..,"p99":..,"max":..}}}
// Percentiles are exact (nearest rank over every call's latency; uxds call's
// histogram is within 0.4%). Exit status 0 iff every call succeeded, 1
// otherwise, 2 on a usage error.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grpc/testing/messages.pb.h"
#include "grpc/testing/test.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::TestService;

struct Options {
  std::string target;
  int64_t calls = 1;
  int64_t concurrency = 1;
  int64_t deadline_ms = 5000;
  int64_t response_size = 0;  // 0: an empty request, the bytes `uxds call` sends
  bool xds_creds = false;
};

// The names uxds (and gRPC's docs) print, so by_status matches `uxds call`.
const char* CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  return index >= 0 && index < 17 ? kNames[index] : "UNKNOWN";
}

// Characters a JSON string cannot hold as they are (a hostname or peer from
// the network, an error message) are escaped.
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string JsonCounts(const std::map<std::string, int64_t>& counts) {
  std::string out = "{";
  for (const auto& [name, count] : counts) {
    if (out.size() > 1) out += ",";
    out += JsonString(name) + ":" + std::to_string(count);
  }
  return out + "}";
}

// All calls of one run. Completions run on gRPC's threads, possibly several
// at once, so the tally is under a mutex; it is held only to count, never
// while starting a call.
class Run {
 public:
  Run(TestService::Stub& stub, const Options& options) : stub_(stub), options_(options) {
    request_.set_response_size(static_cast<int32_t>(options.response_size));
    // Exact percentiles keep every latency (8 bytes a call; the bench makes
    // up to a few million calls).
    latencies_us_.reserve(static_cast<size_t>(std::min<int64_t>(options.calls, 1 << 22)));
  }

  // Starts the calls and returns once every one has ended.
  void CallAll() {
    start_ = Clock::now();
    const int64_t slots = std::min(options_.concurrency, options_.calls);
    for (int64_t i = 0; i < slots; ++i) {
      slots_.push_back(std::make_unique<Slot>());
      next_ = i + 1;
    }
    // Every slot exists before the first call starts: a completion starts
    // its slot's next call and reads next_.
    for (auto& slot : slots_) Start(*slot);
    std::unique_lock<std::mutex> lock(mu_);
    all_done_.wait(lock, [this] { return ended_ == options_.calls; });
    end_ = Clock::now();
  }

  int64_t ok() const {
    auto it = by_status_.find("OK");
    return it == by_status_.end() ? 0 : it->second;
  }

  std::string Summary() {
    const double seconds = std::chrono::duration<double>(end_ - start_).count();
    const int64_t calls = ended_;
    char numbers[128];
    std::snprintf(numbers, sizeof numbers, "\"elapsed_s\":%.3f,\"calls_per_s\":%.1f", seconds,
                  seconds > 0 ? static_cast<double>(calls) / seconds : 0.0);
    std::sort(latencies_us_.begin(), latencies_us_.end());
    std::string summary =
        "{\"summary\":{\"calls\":" + std::to_string(calls) + ",\"ok\":" + std::to_string(ok()) +
        ",\"failed\":" + std::to_string(calls - ok()) +
        ",\"by_backend\":" + JsonCounts(by_backend_) + ",\"by_status\":" + JsonCounts(by_status_) +
        "," + numbers + ",\"latency_us\":{\"p50\":" + std::to_string(Percentile(0.5)) +
        ",\"p90\":" + std::to_string(Percentile(0.9)) +
        ",\"p99\":" + std::to_string(Percentile(0.99)) +
        ",\"max\":" + std::to_string(latencies_us_.empty() ? 0 : latencies_us_.back()) + "}";
    if (!first_error_.empty()) summary += ",\"first_error\":" + JsonString(first_error_);
    return summary + "}}";
  }

 private:
  // One call in flight at a time. A ClientContext serves one call only, so
  // each call gets a new one (as gRPC's own callback benchmark client does).
  struct Slot {
    std::unique_ptr<grpc::ClientContext> context;
    SimpleResponse response;
    Clock::time_point start;
  };

  void Start(Slot& slot) {
    slot.context = std::make_unique<grpc::ClientContext>();
    slot.context->set_wait_for_ready(true);
    slot.start = Clock::now();
    // gRPC takes a system_clock time or a gpr_timespec: the monotonic clock,
    // so a wall clock step cannot move the deadline.
    slot.context->set_deadline(gpr_time_add(
        gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(options_.deadline_ms, GPR_TIMESPAN)));
    stub_.async()->UnaryCall(slot.context.get(), &request_, &slot.response,
                             [this, &slot](grpc::Status status) { OnDone(slot, status); });
  }

  void OnDone(Slot& slot, const grpc::Status& status) {
    const int64_t latency_us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - slot.start).count();
    // As `uxds call`: the hostname the server put in the response, else the
    // address the call went to.
    std::string backend;
    if (status.ok()) {
      backend = slot.response.hostname().empty() ? slot.context->peer() : slot.response.hostname();
    }
    bool start_next = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      latencies_us_.push_back(latency_us);
      ++by_status_[CodeName(status.error_code())];
      if (status.ok()) {
        ++by_backend_[backend];
      } else if (first_error_.empty()) {
        first_error_ = std::string(CodeName(status.error_code())) + ": " + status.error_message();
      }
      ++ended_;
      if (next_ < options_.calls) {
        ++next_;
        start_next = true;
      }
      // Under the lock, and the last thing this touches of the Run: CallAll
      // may return and destroy it as soon as the lock is free.
      if (ended_ == options_.calls) all_done_.notify_one();
    }
    if (start_next) Start(slot);
  }

  // Nearest rank, as uxds call's histogram reports it; latencies_us_ sorted.
  int64_t Percentile(double q) const {
    if (latencies_us_.empty()) return 0;
    const auto n = static_cast<int64_t>(latencies_us_.size());
    const int64_t rank =
        std::clamp<int64_t>(static_cast<int64_t>(std::ceil(q * static_cast<double>(n))), 1, n);
    return latencies_us_[static_cast<size_t>(rank - 1)];
  }

  TestService::Stub& stub_;
  const Options& options_;
  SimpleRequest request_;  // read by every call at once: only const use
  std::vector<std::unique_ptr<Slot>> slots_;
  Clock::time_point start_;
  Clock::time_point end_;

  std::mutex mu_;
  std::condition_variable all_done_;
  int64_t next_ = 0;   // calls started
  int64_t ended_ = 0;  // calls ended
  std::vector<int64_t> latencies_us_;
  std::map<std::string, int64_t> by_backend_;
  std::map<std::string, int64_t> by_status_;
  std::string first_error_;
};

int Usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--calls N] [--concurrency C] [--deadline-ms D] [--response-size B] "
               "[--xds-creds] TARGET\n",
               program);
  return 2;
}

// A whole decimal number in [min, max], else false.
bool ParseNumber(const char* text, int64_t min, int64_t max, int64_t& value) {
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || parsed < min || parsed > max) return false;
  value = parsed;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    int64_t* number = nullptr;
    int64_t min = 1;
    int64_t max = 0;
    if (std::strcmp(arg, "--calls") == 0 || std::strcmp(arg, "-n") == 0) {
      number = &options.calls, max = 1'000'000'000;
    } else if (std::strcmp(arg, "--concurrency") == 0) {
      number = &options.concurrency, max = 10000;
    } else if (std::strcmp(arg, "--deadline-ms") == 0) {
      number = &options.deadline_ms, max = 86'400'000;
    } else if (std::strcmp(arg, "--response-size") == 0) {
      number = &options.response_size, min = 0, max = 1 << 30;
    } else if (std::strcmp(arg, "--xds-creds") == 0) {
      options.xds_creds = true;
      continue;
    } else if (arg[0] == '-' || !options.target.empty()) {
      return Usage(argv[0]);
    } else {
      options.target = arg;
      continue;
    }
    if (i + 1 >= argc || !ParseNumber(argv[++i], min, max, *number)) return Usage(argv[0]);
  }
  if (options.target.empty()) return Usage(argv[0]);

  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.xds_creds) credentials = grpc::XdsCredentials(credentials);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(options.target, credentials);
  std::unique_ptr<TestService::Stub> stub = TestService::NewStub(channel);
  bool all_ok = false;
  {
    Run run(*stub, options);
    run.CallAll();
    std::printf("%s\n", run.Summary().c_str());
    all_ok = run.ok() == options.calls;
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "grpc_cpp_xds_client: cannot write stdout\n");
    return 1;
  }
  return all_ok ? 0 : 1;
}
