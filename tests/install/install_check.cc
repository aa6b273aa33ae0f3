// Built against an installed uxds (its headers and uxds.pc only) by
// install_test.sh: a Loop runs a task, a bootstrap parses, a ring is built
// and picks. Prints one line per step; the script compares them.
#include <chrono>
#include <cstdio>
#include <vector>

#include "uxds/bootstrap.h"
#include "uxds/ring_hash.h"
#include "uxds/runtime.h"

namespace {

uxds::Task<int> SleepThenAnswer(uxds::Loop& loop) {
  const uxds::Status slept = co_await uxds::SleepFor(loop, std::chrono::milliseconds(1));
  co_return slept.ok() ? 42 : -1;
}

}  // namespace

int main() {
  auto loop = uxds::Loop::Create();
  if (!loop.ok()) {
    std::printf("loop: %s\n", loop.status().ToString().c_str());
    return 1;
  }
  std::printf("loop: %d\n", (*loop)->BlockOn(SleepThenAnswer(**loop)));

  auto bootstrap = uxds::Bootstrap::FromJson(
      R"({"xds_servers": [{"server_uri": "127.0.0.1:18000", "channel_creds": [{"type": "insecure"}]}],
          "node": {"id": "installed-node"}})");
  if (!bootstrap.ok()) {
    std::printf("bootstrap: %s\n", bootstrap.status().ToString().c_str());
    return 1;
  }
  std::printf("bootstrap: node %s, server %s\n", bootstrap->node.id.c_str(),
              bootstrap->xds_servers[0].server_uri.c_str());
  // A bootstrap error names its field.
  auto invalid = uxds::Bootstrap::FromJson(R"({"xds_servers": []})");
  std::printf("invalid bootstrap: %s\n", invalid.ok() ? "accepted" : "refused");

  const std::vector<uxds::RingHashAddress> addresses = {{"10.0.0.1:80", "", 1},
                                                        {"10.0.0.2:80", "", 1}};
  const std::vector<uxds::RingEndpoint> endpoints = uxds::BuildRingEndpoints(addresses, nullptr);
  uxds::RingSizeConfig sizes;
  sizes.min_ring_size = 16;
  sizes.max_ring_size = 16;
  const uxds::Ring ring = uxds::Ring::Build(endpoints, sizes);
  std::printf("ring: %zu entries over %zu endpoints\n", ring.size(), endpoints.size());
  return 0;
}
