// libFuzzer target: a real XdsClient fed random sequences of events by an
// in-process ADS server (xds_fuzz_ads_server.h) on loopback, with the A88
// invariants checked after every step.
//
// The input is a program (xds_fuzz_program.h says how bytes decode): one
// byte of server features (fail_on_data_errors, resource_timer_is_transient_error),
// then up to kMaxSteps steps over three names of each of LDS, CDS and EDS:
// watch or cancel a name; an ADS response of one type whose resources are,
// per name, absent (LDS/CDS: a deletion), valid (three versions), invalid,
// duplicated, or a TP3 resource_errors entry; the server closing the stream;
// a wait past the resource timer.
//
// After each step the loop runs until the client has taken it in (the
// server has seen the ACK/NACK of the response and a request naming exactly
// the watched names on a live stream), then xds_fuzz_checks.h compares what
// every watcher was told with the client's cache (A88) and the server's rule
// checker has judged every request. A failed check prints the step and the
// check and traps. Each input gets a fresh XdsClient, shut down and freed
// at the end; the loop and the server serve every input.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/xds_client.h"
#include "xds_fuzz_ads_server.h"
#include "xds_fuzz_checks.h"
#include "xds_fuzz_program.h"

namespace uxds::fuzz {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kResourceTimer{20};
// Generous bounds on the client taking in one step (it needs a few ms).
constexpr int kSettlePolls = 3000;  // of 1 ms
constexpr int kTeardownPolls = 3000;

StatusOr<Bootstrap> MakeBootstrap(uint16_t port, const Features& features) {
  std::string server_features;
  if (features.fail_on_data_errors) server_features += "\"fail_on_data_errors\"";
  if (features.resource_timer_is_transient_error) {
    if (!server_features.empty()) server_features += ",";
    server_features += "\"resource_timer_is_transient_error\"";
  }
  return Bootstrap::FromJson(R"({"xds_servers":[{"server_uri":"127.0.0.1:)" + std::to_string(port) +
                             R"(","channel_creds":[{"type":"insecure"}],"server_features":[)" +
                             server_features + R"(]}],"node":{"id":"xds-client-fuzzer"}})");
}

class Run {
 public:
  Run(Loop& loop, FuzzAdsServer& server, const Program& program)
      : loop_(loop), server_(server), program_(program) {}

  Task<void> Execute() {
    auto bootstrap = MakeBootstrap(server_.port(), program_.features);
    Require(bootstrap.ok(), -1, "bootstrap", bootstrap.status().message());
    XdsClientOptions options;
    options.resource_does_not_exist_timeout = kResourceTimer;
    options.resource_transient_error_timeout = kResourceTimer;
    options.backoff_initial = milliseconds(2);
    options.backoff_max = milliseconds(20);
    options.connect_timeout = milliseconds(2000);
    auto client = XdsClient::Create(loop_, *std::move(bootstrap), options);
    Require(client.ok(), -1, "create", client.status().message());
    Model model(**client, server_, program_.features);
    for (size_t i = 0; i < program_.steps.size(); ++i) {
      const int step = static_cast<int>(i);
      const Step& action = program_.steps[i];
      PendingAnswer pending;
      model.BeforeStep(step, action);
      switch (action.kind) {
        case StepKind::kWatch:
          model.Watch(action.type, action.name);
          break;
        case StepKind::kCancel:
          model.Cancel(action.type, action.name);
          break;
        case StepKind::kRespond:
          pending = model.Respond(action);
          break;
        case StepKind::kCloseStream:
          model.CloseStream();
          break;
        case StepKind::kWaitPastTimer: {
          const Status slept = co_await SleepFor(loop_, kResourceTimer * 2 + milliseconds(5));
          (void)slept;
          break;
        }
      }
      co_await Settle(model, step, pending);
      model.AfterStep(step, action, pending);
    }
    co_await (*client)->Shutdown();
    model.Forget();
    client->reset();
    co_await Teardown();
  }

 private:
  // Runs the loop until the client has taken in the step and its cache has
  // held still for a turn of the loop with I/O (a resource timer may fire at
  // any time; its notifications reach the watchers on later turns).
  Task<void> Settle(Model& model, int step, const PendingAnswer& pending) {
    std::string why = "not polled";
    for (int i = 0; i < kSettlePolls; ++i) {
      const std::string before = model.CacheFingerprint();
      const Status slept = co_await SleepFor(loop_, milliseconds(1));
      (void)slept;
      why = model.Unsettled(pending);
      if (why.empty() && model.CacheFingerprint() == before) break;
      if (why.empty()) why = "the cache keeps changing";
    }
    Require(why.empty(), step, "settle", why);
  }

  // Every stream and connection of this input gone: no fd outlives it.
  Task<void> Teardown() {
    for (int i = 0; i < kTeardownPolls; ++i) {
      if (server_.AllStreamsFinished() && server_.connection_count() == 0) break;
      const Status slept = co_await SleepFor(loop_, milliseconds(1));
      (void)slept;
    }
    Require(server_.AllStreamsFinished(), -1, "teardown", "an ADS stream outlived the client");
    Require(server_.connection_count() == 0, -1, "teardown", "a connection outlived the client");
    for (const std::string& violation : server_.TakeViolations()) {
      Require(false, -1, "protocol", violation);
    }
    server_.Reset();
  }

  Loop& loop_;
  FuzzAdsServer& server_;
  const Program& program_;
};

}  // namespace
}  // namespace uxds::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using uxds::fuzz::Require;
  static uxds::Loop* const loop = [] {
    auto created = uxds::Loop::Create();
    Require(created.ok(), -1, "loop", "");
    return created->release();  // lives for the whole run
  }();
  static uxds::fuzz::FuzzAdsServer* const server = [] {
    auto started = uxds::fuzz::FuzzAdsServer::Start(*loop);
    Require(started != nullptr, -1, "server", "cannot listen");
    return started.release();  // lives for the whole run
  }();
  const uxds::fuzz::Program program = uxds::fuzz::DecodeProgram(data, size);
  uxds::fuzz::Run run(*loop, *server, program);
  loop->BlockOn(run.Execute());
  return 0;
}
