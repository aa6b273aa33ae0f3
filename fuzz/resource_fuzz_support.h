// Shared by the xDS resource decoder fuzzers: the decode context and the
// properties every decode must have, whatever the bytes. A broken property
// traps, which libFuzzer reports as a crash with the input that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "uxds/bootstrap.h"
#include "uxds/xds_resource_type.h"
#include "xds/resources/resource_decoders.h"

namespace uxds::fuzzing {

inline const XdsDecodeContext& FuzzDecodeContext() {
  static const Bootstrap bootstrap = [] {
    Bootstrap b;
    XdsServerConfig server;
    server.server_uri = "xds.fuzz.example:443";
    b.xds_servers.push_back(server);
    return b;
  }();
  static const XdsDecodeContext context{bootstrap, bootstrap.xds_servers.front()};
  return context;
}

inline void Require(bool property) {
  if (!property) __builtin_trap();
}

// Decodes `data` twice with `decode` and checks: errors are INVALID_ARGUMENT
// with a message; equal bytes give equal resources (deep equality is what
// keeps an identical update from notifying anyone); the JSON summary parses;
// `check` holds for every valid resource (what validation promises users).
template <typename Decode, typename Check>
int FuzzDecode(Decode decode, Check check, const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto first = decode(FuzzDecodeContext(), bytes);
  if (!first.resource.ok()) {
    Require(first.resource.status().code() == StatusCode::kInvalidArgument);
    Require(!first.resource.status().message().empty());
    return 0;
  }
  Require(first.name.has_value());
  auto second = decode(FuzzDecodeContext(), bytes);
  Require(second.resource.ok() && *first.resource == *second.resource);
  Require(nlohmann::json::accept(first.resource->ToJson()));
  check(*first.resource);
  return 0;
}

}  // namespace uxds::fuzzing
