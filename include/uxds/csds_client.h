// A CSDS client (gRFC A40): what the XdsClients of another process hold.
//
// Calls envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus
// over a Channel (a plain "host:port" channel to any process that serves
// CSDS, such as `uxds serve`) and returns the answer as plain structs, one
// per XdsClient of that process (A71: its client_scope, e.g. "xds:///foo" or
// "#server").
//
//   auto channel = Channel::Create(loop, "127.0.0.1:8080");
//   StatusOr<std::vector<CsdsClientStatus>> clients =
//       co_await FetchClientStatus(**channel, {.timeout = std::chrono::seconds(5)});
//
// Threads: on the channel's loop, like every call on the channel.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "uxds/client_channel.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"

namespace uxds {

// One cache entry of a remote XdsClient (A40 GenericXdsConfig).
struct CsdsResourceStatus {
  std::string type_url;
  std::string name;
  // The entry's cache state (A88 / TP3); kRequested for a status value this
  // client does not know.
  XdsCacheState state = XdsCacheState::kRequested;
  std::string version;  // of the resource in use; empty when none
  // The last rejected update (error_state): its details and version; both
  // empty when there is none.
  std::string error;
  std::string failed_version;
};

// One XdsClient of the remote process.
struct CsdsClientStatus {
  std::string client_scope;
  std::string node_id;
  std::vector<CsdsResourceStatus> resources;
};

// Fetches the client status of the process `channel` reaches, without the
// resources' contents. The call's own status when it fails (UNAVAILABLE for
// a process that is not there, UNIMPLEMENTED for one without CSDS);
// INTERNAL when the response does not parse.
Task<StatusOr<std::vector<CsdsClientStatus>>> FetchClientStatus(Channel& channel,
                                                                CallOptions options = {});

// "Listener" for "type.googleapis.com/envoy.config.listener.v3.Listener":
// the last component of a type URL, for tables.
std::string_view ShortTypeName(std::string_view type_url);

}  // namespace uxds
