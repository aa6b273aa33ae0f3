// `uxds call --bootstrap F xds:///target [--method M] [--header k=v]... [-n N]
//  [--concurrency C] [--deadline-ms D] [--wait-for-ready]`: unary calls
// through a uxds Channel (routing, hash policies, LB as an application gets
// them), one JSON line per call and a summary line. Uses the public API only.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "grpc/testing/messages.pb.h"
#include "uxds/bootstrap.h"
#include "uxds/client_channel.h"
#include "uxds/runtime.h"
#include "uxds/xds_client_pool.h"

namespace uxds::tool {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr char kDefaultMethod[] = "/grpc.testing.TestService/UnaryCall";

struct CallArgs {
  std::string bootstrap_file;
  std::string target;
  std::string method = kDefaultMethod;
  std::vector<std::string> headers;  // "name=value"
  int count = 1;
  int concurrency = 1;
  int deadline_ms = 5000;
  bool wait_for_ready = false;
};

// What one call printed, kept for the summary.
struct CallRecord {
  std::string backend;
  std::string status;
  int64_t latency_us = 0;
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

struct CallRun {
  Channel& channel;
  const CallArgs& args;
  CallOptions options;
  std::string request;
  int next = 0;  // the index of the next call to start
  std::vector<CallRecord> records;

  // One of `concurrency` workers: takes the next call until none is left.
  Task<void> Worker() {
    while (next < args.count) {
      const int index = next++;
      const Clock::time_point start = Clock::now();
      StatusOr<UnaryResponse> reply = co_await channel.UnaryCall(args.method, request, options);
      CallRecord record;
      record.latency_us =
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
      record.status =
          std::string(StatusCodeName(reply.ok() ? StatusCode::kOk : reply.status().code()));
      json line = {{"call", index}};
      if (reply.ok()) {
        record.backend = BackendOf(args.method, *reply);
        line["backend"] = record.backend;
        line["peer"] = reply->peer;
      }
      line["status"] = record.status;
      if (!reply.ok()) line["message"] = reply.status().message();
      line["latency_us"] = record.latency_us;
      std::printf("%s\n", line.dump().c_str());
      records.push_back(std::move(record));
    }
  }
};

// The latency at quantile q (nearest rank) of sorted values.
int64_t Percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(q * static_cast<double>(sorted.size()) + 0.999999);
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

json Summary(const std::vector<CallRecord>& records) {
  std::map<std::string, int> by_backend;
  std::map<std::string, int> by_status;
  std::vector<int64_t> latencies;
  for (const CallRecord& record : records) {
    if (!record.backend.empty()) ++by_backend[record.backend];
    ++by_status[record.status];
    latencies.push_back(record.latency_us);
  }
  std::sort(latencies.begin(), latencies.end());
  return {{"summary",
           {{"calls", records.size()},
            {"by_backend", by_backend},
            {"by_status", by_status},
            {"latency_us",
             {{"p50", Percentile(latencies, 0.5)},
              {"p90", Percentile(latencies, 0.9)},
              {"p99", Percentile(latencies, 0.99)},
              {"max", latencies.empty() ? 0 : latencies.back()}}}}}};
}

// Runs every call, then shuts the channel down; the summary, or the error
// that kept the channel from being made.
// (A host:port target needs no bootstrap.)
Task<StatusOr<json>> RunCalls(Loop& loop, const CallArgs& args,
                              std::optional<Bootstrap> bootstrap) {
  ChannelOptions channel_options;
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
  CallRun run{**channel, args, {}, {}, 0, {}};
  run.options.timeout = std::chrono::milliseconds(args.deadline_ms);
  run.options.wait_for_ready = args.wait_for_ready;
  for (const std::string& header : args.headers) {
    const size_t equals = header.find('=');
    std::string name = header.substr(0, equals);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    run.options.metadata.emplace_back(std::move(name), header.substr(equals + 1));
  }
  // An empty SimpleRequest (or Empty) is a valid request of the
  // TestService's methods; other methods get empty bytes too.
  TaskGroup workers(loop);
  for (int i = 0; i < std::min(args.concurrency, args.count); ++i) workers.Spawn(run.Worker());
  co_await workers.Join();
  co_await (*channel)->Shutdown();
  co_return Summary(run.records);
}

// CLI11 check: "name=value" with a non-empty name.
std::string CheckHeader(const std::string& header) {
  const size_t equals = header.find('=');
  if (equals == std::string::npos || equals == 0) {
    return "--header must be NAME=VALUE, got \"" + header + "\"";
  }
  return "";
}

std::string CheckMethod(const std::string& method) {
  if (method.size() < 4 || method[0] != '/' || method.find('/', 1) == std::string::npos ||
      method.back() == '/') {
    return "--method must be /package.Service/Method, got \"" + method + "\"";
  }
  return "";
}

}  // namespace

int RunCall(const std::vector<std::string>& args) {
  CallArgs call;
  CLI::App app{
      "Unary calls through a uxds Channel: one JSON line per call (backend, status,\n"
      "latency_us), then a summary line with counts per backend and per status and\n"
      "latency percentiles. Exit status 0 when every call succeeded, 1 otherwise.",
      "uxds call"};
  app.add_option("--bootstrap", call.bootstrap_file,
                 "gRPC xDS bootstrap file (default: $GRPC_XDS_BOOTSTRAP or "
                 "$GRPC_XDS_BOOTSTRAP_CONFIG)")
      ->check(CLI::ExistingFile);
  app.add_option("target", call.target, "xds:///name, or host:port for a channel without xDS")
      ->required();
  app.add_option("--method", call.method, "the method to call")
      ->check(CheckMethod)
      ->capture_default_str();
  app.add_option("--header", call.headers, "request metadata NAME=VALUE (repeatable)")
      ->check(CheckHeader);
  app.add_option("-n,--calls", call.count, "how many calls")
      ->check(CLI::Range(1, 10000000))
      ->capture_default_str();
  app.add_option("--concurrency", call.concurrency, "calls in flight at once")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--deadline-ms", call.deadline_ms, "each call's deadline")
      ->check(CLI::Range(1, 86400000))
      ->capture_default_str();
  app.add_flag("--wait-for-ready", call.wait_for_ready,
               "a call with no usable endpoint waits for one (within its deadline)");
  if (auto rc = ParseCommandLine(app, args)) return *rc;

  std::optional<Bootstrap> bootstrap;
  if (call.target.starts_with("xds:") || !call.bootstrap_file.empty()) {
    StatusOr<Bootstrap> loaded = call.bootstrap_file.empty()
                                     ? Bootstrap::FromEnvironment()
                                     : Bootstrap::FromFile(call.bootstrap_file);
    if (!loaded.ok()) {
      std::fprintf(stderr, "uxds call: %s\n", loaded.status().ToString().c_str());
      return kExitRuntimeError;
    }
    bootstrap = *std::move(loaded);
  }
  StatusOr<std::unique_ptr<Loop>> loop = Loop::Create();
  if (!loop.ok()) {
    std::fprintf(stderr, "uxds call: %s\n", loop.status().ToString().c_str());
    return kExitRuntimeError;
  }
  StatusOr<json> summary = (*loop)->BlockOn(RunCalls(**loop, call, std::move(bootstrap)));
  if (!summary.ok()) {
    std::fprintf(stderr, "uxds call: %s\n", summary.status().ToString().c_str());
    return kExitRuntimeError;
  }
  std::printf("%s\n", summary->dump().c_str());
  std::fflush(stdout);
  const int ok = (*summary)["summary"]["by_status"].value("OK", 0);
  const int calls = (*summary)["summary"]["calls"].get<int>();
  if (ok != calls) {
    std::fprintf(stderr, "uxds call: %d of %d calls failed\n", calls - ok, calls);
    return kExitRuntimeError;
  }
  return kExitOk;
}

}  // namespace uxds::tool
