// `uxds csds ADDR [--json]`: what the XdsClients of a running uxds process
// (e.g. `uxds serve`) hold, read through its CSDS service (A40) and printed
// as a table (one row per cache entry) or as JSON.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "address_check.h"
#include "cli.h"
#include "commands.h"
#include "csds_table.h"
#include "uxds/client_channel.h"
#include "uxds/csds_client.h"
#include "uxds/runtime.h"

namespace uxds::tool {
namespace {

struct CsdsArgs {
  std::string address;
  bool json = false;
  int timeout_ms = 5000;
};

Task<StatusOr<std::vector<CsdsClientStatus>>> Fetch(Loop& loop, const CsdsArgs& args) {
  auto channel = Channel::Create(loop, args.address);
  if (!channel.ok()) co_return channel.status();
  CallOptions options;
  options.timeout = std::chrono::milliseconds(args.timeout_ms);
  // A fresh channel has no connection yet: wait for one, up to the timeout.
  options.wait_for_ready = true;
  StatusOr<std::vector<CsdsClientStatus>> clients = co_await FetchClientStatus(**channel, options);
  co_await (*channel)->Shutdown();
  co_return clients;
}

}  // namespace

int RunCsds(const std::vector<std::string>& args) {
  CLI::App app{"Print the xDS client status (CSDS, gRFC A40) of a running uxds process.",
               "uxds csds"};
  CsdsArgs parsed;
  app.add_option("address", parsed.address, "the process's gRPC address, HOST:PORT")
      ->required()
      ->check(TargetAddress());
  app.add_flag("--json", parsed.json, "print JSON instead of a table");
  app.add_option("--timeout-ms", parsed.timeout_ms,
                 "how long to wait for the process and its answer")
      ->check(CLI::Range(1, 3'600'000));
  if (auto rc = ParseCommandLine(app, args)) return *rc;

  auto loop = Loop::Create();
  if (!loop.ok()) {
    std::fprintf(stderr, "uxds csds: %s\n", loop.status().ToString().c_str());
    return kExitRuntimeError;
  }
  StatusOr<std::vector<CsdsClientStatus>> clients = (*loop)->BlockOn(Fetch(**loop, parsed));
  if (!clients.ok()) {
    std::fprintf(stderr, "uxds csds: FetchClientStatus from %s: %s\n", parsed.address.c_str(),
                 clients.status().ToString().c_str());
    return kExitRuntimeError;
  }
  const std::string out =
      parsed.json
          ? CsdsJson(*clients).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"
          : CsdsTable(*clients);
  std::fputs(out.c_str(), stdout);
  return std::fflush(stdout) == 0 ? kExitOk : kExitRuntimeError;
}

}  // namespace uxds::tool
