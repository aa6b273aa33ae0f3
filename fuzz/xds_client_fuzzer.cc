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
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/xds_client.h"
#include "xds_fuzz_ads_server.h"
#include "xds_fuzz_checks.h"
#include "xds_fuzz_program.h"

namespace uxds::fuzz {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kResourceTimer{10};
// A generous bound on the client taking in one step (it needs well under a
// millisecond; a reconnection after a failed stream up to the 20 ms backoff).
constexpr milliseconds kSettleBound{3000};
constexpr int kStableTurns = 4;
constexpr std::chrono::microseconds kPoll{200};
constexpr int kTeardownPolls = 15000;  // 3 s

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

// Open sockets of the process (the sanitizers' symbolizer and libFuzzer
// open pipes and files of their own).
int OpenSockets(std::string* list = nullptr) {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* fd = readdir(dir)) {
      char target[256] = {};
      const std::string path = std::string("/proc/self/fd/") + fd->d_name;
      const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
      if (n <= 0 || std::string_view(target).substr(0, 7) != "socket:") continue;
      ++count;
      if (list != nullptr) *list += std::string(" ") + fd->d_name + "=" + target;
    }
    closedir(dir);
  }
  return count;
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
  // Runs the loop until the client has taken in the step and then its cache
  // and watchers have held still for kStableTurns turns of the loop (each
  // dispatches the I/O completions that have arrived): a resource timer may
  // fire at any time, and notifications reach the watchers on later turns,
  // after the write of the ACK or NACK has completed (its completion is
  // posted before the server can read the request).
  Task<void> Settle(Model& model, int step, const PendingAnswer& pending) {
    const auto deadline = Loop::Clock::now() + kSettleBound;
    std::string why = "not polled";
    int stable = 0;
    while (stable < kStableTurns && Loop::Clock::now() < deadline) {
      const std::string before = model.Fingerprint();
      co_await loop_.Yield();
      why = model.Unsettled(pending);
      stable = why.empty() && model.Fingerprint() == before ? stable + 1 : 0;
    }
    Require(stable == kStableTurns, step, "settle", why.empty() ? "no rest" : why);
  }

  // Every stream and connection of this input gone: no fd outlives it.
  Task<void> Teardown() {
    for (int i = 0; i < kTeardownPolls; ++i) {
      if (server_.AllStreamsFinished() && server_.connection_count() == 0) break;
      const Status slept = co_await SleepFor(loop_, kPoll);
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
  // No socket outlives its input: the count after the first one (the
  // server's listener) is the most.
  // A closed socket's fd is released a turn or two later (an fd is closed
  // only once no io_uring request naming it can reach the kernel): wait up
  // to a second for it.
  auto drain = [](std::chrono::milliseconds duration) {
    loop->BlockOn([](std::chrono::milliseconds d) -> uxds::Task<void> {
      const uxds::Status slept = co_await uxds::SleepFor(*loop, d);
      (void)slept;
    }(duration));
  };
  static const int sockets_after_first = [&] {
    drain(std::chrono::milliseconds(20));
    return uxds::fuzz::OpenSockets();
  }();
  int sockets = uxds::fuzz::OpenSockets();
  for (int i = 0; i < 1000 && sockets > sockets_after_first; ++i) {
    drain(std::chrono::milliseconds(1));
    sockets = uxds::fuzz::OpenSockets();
  }
  if (sockets > sockets_after_first) {
    std::string list;
    uxds::fuzz::OpenSockets(&list);
    Require(false, -1, "teardown",
            "open sockets grew from " + std::to_string(sockets_after_first) + " to " +
                std::to_string(sockets) + ":" + list);
  }
  return 0;
}
