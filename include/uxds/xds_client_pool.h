// XdsClientPool: one XdsClient per data-plane target, as gRPC keeps them.
//
// Every channel to "xds:///foo" shares the XdsClient of "xds:///foo", and
// the xDS-enabled servers of a process share the one under kServerKey; a
// client is created on first use and shut down when its last user lets go.
// Each client reports its key as CSDS's client_scope (A40, A71), and the
// pool's CSDS service lists them all.
//
//   auto pool = XdsClientPool::Create(loop, *Bootstrap::FromEnvironment());
//   StatusOr<std::shared_ptr<XdsClient>> client = (*pool)->Get("xds:///foo");
//
// Threads: the clients live on the pool's loop (the control thread); call
// Get() there, and drop the last reference to a client there too (its
// shutdown then runs on that loop, see ~XdsClient).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/service_registry.h"
#include "uxds/status.h"
#include "uxds/xds_client.h"

namespace uxds {

class XdsClientPool;
namespace xds_internal {
struct XdsClientPoolState;
// For the CSDS service: the registry of the pool's live clients.
XdsClientPoolState& StateOf(XdsClientPool& pool);
}  // namespace xds_internal

class XdsClientPool {
 public:
  // The key of the client every xDS-enabled server shares (A36).
  static constexpr std::string_view kServerKey = "#server";

  // Checks the bootstrap and the options (as XdsClient::Create does); the
  // clients get `options` with client_scope set to their key.
  static StatusOr<std::shared_ptr<XdsClientPool>> Create(Loop& loop, Bootstrap bootstrap,
                                                         XdsClientOptions options = {});
  // Clients still in use live on; the pool only forgets them.
  ~XdsClientPool();
  XdsClientPool(const XdsClientPool&) = delete;
  XdsClientPool& operator=(const XdsClientPool&) = delete;

  // The client of `target` (a channel's target string, or kServerKey),
  // created now if no one holds it. Loop thread only.
  StatusOr<std::shared_ptr<XdsClient>> Get(std::string_view target);
  // The keys of the clients alive now, in the order they were created.
  std::vector<std::string> Keys() const;

  Loop& loop() const;
  const Bootstrap& bootstrap() const;

  // A40: serves envoy.service.status.v3.ClientStatusDiscoveryService
  // (FetchClientStatus, StreamClientStatus) on `registry`, reporting every
  // client of this pool alive at the time of each request. The server may
  // run on any loop.
  void RegisterCsdsService(ServiceRegistry& registry) const;

 private:
  friend xds_internal::XdsClientPoolState& xds_internal::StateOf(XdsClientPool& pool);
  explicit XdsClientPool(std::shared_ptr<xds_internal::XdsClientPoolState> state);
  std::shared_ptr<xds_internal::XdsClientPoolState> state_;
};

}  // namespace uxds
