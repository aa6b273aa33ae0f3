// Routing of RPCs on an xDS-enabled server (A36): the RouteConfiguration of
// a connection's HttpConnectionManager decides, per RPC, whether the
// application's handler runs. The virtual host is chosen by :authority and
// the route matched as on the client (src/xds/routing/route_selection.h);
// only a route with non_forwarding_action lets the RPC through.
//
// Threads: the control thread writes a RouteTable; RPCs on every serving
// loop read it. Each version is immutable and published by swapping one
// pointer; an RPC holds the version it read until its check ends.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "http2/service_registry.h"
#include "uxds/resources/listener.h"
#include "uxds/resources/route_config.h"
#include "uxds/status.h"

namespace uxds::server {

// The routes an RPC on one HttpConnectionManager sees: an inline
// RouteConfiguration, or the latest result of an RDS watch (which changes
// under live connections: A36 "does not apply to an updated
// RouteConfiguration provided by reference via rds field").
class RouteTable {
 public:
  using Routes = StatusOr<std::shared_ptr<const RouteConfigResource>>;
  // "RouteConfiguration not received" until the first Set().
  RouteTable();
  explicit RouteTable(Routes routes);
  RouteTable(const RouteTable&) = delete;
  RouteTable& operator=(const RouteTable&) = delete;

  // Any thread: the version in use now.
  std::shared_ptr<const Routes> Current() const;
  // Control thread: makes `routes` the version every later RPC reads.
  void Set(Routes routes);

 private:
  // A lock held for a pointer copy, not std::atomic<std::shared_ptr>:
  // libstdc++'s lock-bit implementation of that is invisible to
  // ThreadSanitizer. One lock per RPC: the first line the serving loops
  // share on an RPC's path (with the version's reference count).
  mutable std::mutex mutex_;
  std::shared_ptr<const Routes> current_;
};

// The virtual host and route an RPC matched; both point into the
// RouteConfiguration version the caller holds.
struct ServerRoute {
  const RouteConfigResource::VirtualHost* virtual_host = nullptr;
  const RouteConfigResource::Route* route = nullptr;
};

// A36: the route of an RPC that may reach its handler, else UNAVAILABLE
// saying why (no virtual host for the authority, no route, a route whose
// action is not non_forwarding_action, or the RouteConfiguration's own
// error). Never NOT_FOUND (A54: reserved for applications).
StatusOr<ServerRoute> SelectServerRoute(
    const StatusOr<std::shared_ptr<const RouteConfigResource>>& routes,
    const http2::ServerCall& call);

// A41: runs the HttpConnectionManager's RBAC filters, in order, on an RPC
// that matched `route`, each with the most specific policy (the route's
// RBACPerRoute, else the virtual host's, else the filter's own).
// PERMISSION_DENIED if one of them denies it.
Status CheckRbac(std::span<const HttpConnectionManager::HttpFilter> filters,
                 const ServerRoute& route, const http2::ServerCall& call);

// A registry that routes every RPC through `table`, then through the RBAC
// filters among `http_filters` (A41), before handing it to the
// application's `registry`.
std::shared_ptr<const http2::ServiceRegistry> MakeRoutedRegistry(
    std::shared_ptr<const http2::ServiceRegistry> registry, std::shared_ptr<const RouteTable> table,
    std::vector<HttpConnectionManager::HttpFilter> http_filters = {});

// A36 "configuration error logging": the problems that make RPCs fail with
// UNAVAILABLE although the configuration is applied: an RDS error, or a
// route whose action is not non_forwarding_action. Empty: none.
std::vector<std::string> RouteConfigProblems(
    const std::string& context, const StatusOr<std::shared_ptr<const RouteConfigResource>>& routes);

}  // namespace uxds::server
