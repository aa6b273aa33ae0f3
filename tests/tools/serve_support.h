// What the tests of `uxds serve` and `uxds csds` share: a free port, the
// server Listeners the fake control plane sends, the tool's JSON lines.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "support/fake_control_plane.h"
#include "support/test_support.h"

namespace uxds::testing {

inline constexpr char kServerListenerTemplate[] = "grpc/server?xds.resource.listening_address=%s";

// A loopback port nothing listens on now.
uint16_t FreePort();

// A server Listener on 127.0.0.1:port with one chain whose inline routes
// let every RPC through (non_forwarding_action). Without the router filter
// it is invalid ("expected at least one HTTP filter"): the server NACKs it.
ResponseResource ServingListener(const std::string& name, uint16_t port, bool with_router = true);

// A bootstrap for `uxds serve` against `cp`, written to `path`.
void WriteServeBootstrap(const std::string& path, const FakeControlPlane& cp,
                         const std::string& node_id, bool fail_on_data_errors);

// The process's next stdout line as JSON (nullopt after 30 s or at EOF).
std::optional<nlohmann::json> NextJson(Subprocess& process);

}  // namespace uxds::testing
