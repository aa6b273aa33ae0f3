// The Client Status Discovery Service (A40) on a uxds HTTP/2 server:
// envoy.service.status.v3.ClientStatusDiscoveryService, answering what the
// registered XdsClients have cached (csds_client_registry.h).
//
//   auto clients = std::make_shared<CsdsClientRegistry>();
//   auto registration = clients->Add(*xds_client);
//   auto services = std::make_shared<http2::ServiceRegistry>();
//   RegisterCsdsService(*services, clients);
//   auto server = http2::Server::Listen(server_loop, address, services);
//
// The server may run on any loop: each call reads the clients on their own
// loops and is resumed on the server's.
#pragma once

#include <memory>
#include <string>

#include "envoy/service/status/v3/csds.pb.h"
#include "http2/service_registry.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "xds/csds/csds_client_registry.h"

namespace uxds::csds {

inline constexpr char kFetchClientStatusPath[] =
    "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus";
inline constexpr char kStreamClientStatusPath[] =
    "/envoy.service.status.v3.ClientStatusDiscoveryService/StreamClientStatus";

// Registers FetchClientStatus (unary) and StreamClientStatus (one response
// per request, until the client half-closes). Only the v3 service: A40
// leaves v2 callers with UNIMPLEMENTED, which the server answers for any
// unregistered path.
void RegisterCsdsService(http2::ServiceRegistry& registry,
                         std::shared_ptr<CsdsClientRegistry> clients);

// One serialized ClientStatusRequest answered with a serialized
// ClientStatusResponse, the fetch awaited on `loop`. INVALID_ARGUMENT when the
// request does not parse or carries node_matchers (A40: "return an
// INVALID_ARGUMENT if the CSDS implementation observe an non-empty Node
// Matcher"); the request's node is ignored, as gRPC does.
Task<StatusOr<std::string>> AnswerClientStatusRequest(CsdsClientRegistry& clients, Loop& loop,
                                                      std::string serialized_request);

}  // namespace uxds::csds
