// Connecting to an xDS server (server_uri and channel_creds of the
// bootstrap): shared by the ADS streams and the load reporting (LRS)
// streams, which open their own connection to the same server with the
// same credentials.
#pragma once

#include <cstddef>
#include <memory>

#include "http2/client_connection.h"
#include "runtime/host_resolver.h"
#include "tls/certificate_provider.h"
#include "tls/tls_context.h"
#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"

namespace uxds::xds_internal {

// What "tls" credentials keep across connection attempts (A65): the
// provider that reads their files off the loop and again every
// refresh_interval, and the context made from the material it read last.
struct XdsServerTls {
  std::shared_ptr<FileWatcherCertificateProvider> provider;
  std::shared_ptr<TlsClientContext> context;
  // The version of material a context could not be made from: not tried
  // (or logged) again; `context` stays the one made before it.
  uint64_t rejected_version = 0;
};

// Resolves server_uri off the loop and connects to each address in the
// resolver's order until one works. `tls` is the state of "tls"
// credentials across calls (made on first use).
Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> ConnectToXdsServer(
    Loop& loop, HostResolver& resolver, const XdsServerConfig& server,
    const XdsClientOptions& options, size_t max_receive_message_size, XdsServerTls& tls);

}  // namespace uxds::xds_internal
