#include "server/server_routing.h"

#include <array>
#include <random>
#include <span>
#include <utility>
#include <variant>

#include "xds/resources/rbac_parser.h"
#include "xds/routing/route_selection.h"

namespace uxds::server {

namespace {

uint32_t RouteFractionDraw() {
  // Only for routes with runtime_fraction; the serving loop owns this
  // generator (one per thread).
  thread_local std::minstd_rand generator(std::random_device{}());
  return static_cast<uint32_t>(generator());
}

}  // namespace

RouteTable::RouteTable()
    : RouteTable(Status(StatusCode::kUnavailable, "RouteConfiguration not received")) {}

RouteTable::RouteTable(Routes routes)
    : current_(std::make_shared<const Routes>(std::move(routes))) {}

std::shared_ptr<const RouteTable::Routes> RouteTable::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

void RouteTable::Set(Routes routes) {
  auto next = std::make_shared<const Routes>(std::move(routes));
  std::lock_guard<std::mutex> lock(mutex_);
  current_.swap(next);
  // The old version is freed outside the lock (`next`), or by the last RPC
  // still holding it.
}

StatusOr<ServerRoute> SelectServerRoute(
    const StatusOr<std::shared_ptr<const RouteConfigResource>>& routes,
    const http2::ServerCall& call) {
  // A36: an RDS resource NACKed without a previous good version, unavailable
  // or nonexistent fails every RPC of its HttpConnectionManager.
  if (!routes.ok()) {
    return Status(StatusCode::kUnavailable,
                  "RouteConfiguration unusable: " + routes.status().ToString());
  }
  const RouteConfigResource::VirtualHost* virtual_host =
      (*routes)->FindVirtualHost(call.authority());
  if (virtual_host == nullptr) {
    return Status(StatusCode::kUnavailable,
                  "no virtual host for authority \"" + call.authority() + "\"");
  }
  // The metadata as views: on the stack for up to 16 entries, so a
  // routed RPC allocates nothing here.
  constexpr size_t kOnStack = 16;
  const auto& metadata = call.request_metadata();
  std::array<PickHeader, kOnStack> on_stack;
  std::vector<PickHeader> spilled;
  if (metadata.size() > kOnStack) spilled.resize(metadata.size());
  const std::span<PickHeader> headers =
      metadata.size() > kOnStack ? std::span<PickHeader>(spilled)
                                 : std::span<PickHeader>(on_stack.data(), metadata.size());
  for (size_t i = 0; i < metadata.size(); ++i) {
    headers[i] = {metadata[i].first, metadata[i].second};
  }
  const routing::RpcView rpc{call.method(), headers};
  const RouteConfigResource::Route* route =
      routing::SelectRoute(*virtual_host, rpc, [] { return RouteFractionDraw(); });
  if (route == nullptr) {
    return Status(StatusCode::kUnavailable, "no route matched " + call.method());
  }
  // A36: "Route.non_forwarding_action is expected for all Routes used on
  // server-side"; any other action fails the RPC with UNAVAILABLE.
  if (!std::holds_alternative<RouteConfigResource::Route::NonForwardingAction>(route->action)) {
    return Status(StatusCode::kUnavailable,
                  "the route matching " + call.method() + " has no non_forwarding_action");
  }
  return ServerRoute{virtual_host, route};
}

Status CheckRbac(std::span<const HttpConnectionManager::HttpFilter> filters,
                 const ServerRoute& route, const http2::ServerCall& call) {
  const RbacRequest request{
      .path = call.method(),
      // A41: the server refuses every :method but POST before a call exists
      // (ServerSession::OnRequestHeaders), so POST is the method seen here.
      .http_method = "POST",
      .authority = call.authority(),
      .content_type = call.content_type(),
      .metadata = call.request_metadata(),
      .connection = &call.connection(),
  };
  for (const HttpConnectionManager::HttpFilter& filter : filters) {
    if (filter.config_type != kRbacConfigType) continue;
    // A39: the route's override wins over the virtual host's, which wins
    // over the filter's own config.
    const std::optional<RbacPolicy>* policy = &filter.rbac;
    if (auto it = route.route->filter_overrides.find(filter.name);
        it != route.route->filter_overrides.end()) {
      policy = &it->second.rbac;
    } else if (auto vit = route.virtual_host->filter_overrides.find(filter.name);
               vit != route.virtual_host->filter_overrides.end()) {
      policy = &vit->second.rbac;
    }
    // A41: a denied RPC fails PERMISSION_DENIED and never reaches its handler.
    if (policy->has_value() && !(*policy)->Allows(request)) {
      return Status(StatusCode::kPermissionDenied, "Unauthorized RPC rejected");
    }
  }
  return Status();
}

std::shared_ptr<const http2::ServiceRegistry> MakeRoutedRegistry(
    std::shared_ptr<const http2::ServiceRegistry> registry, std::shared_ptr<const RouteTable> table,
    std::vector<HttpConnectionManager::HttpFilter> http_filters) {
  auto routed = std::make_shared<http2::ServiceRegistry>();
  // Only the filters that act on an RPC stay (the router is the routing
  // above).
  std::erase_if(http_filters, [](const HttpConnectionManager::HttpFilter& filter) {
    return filter.config_type != kRbacConfigType;
  });
  // Every path goes through the fallback: routing comes before dispatch.
  routed->SetFallbackHandler(
      [registry = std::move(registry), table = std::move(table),
       filters = std::move(http_filters)](http2::ServerCall& call) -> Task<Status> {
        Status allowed;
        {
          // Held while the route is read (it points into this version), not
          // while the handler runs: a long stream keeps no old routes alive.
          const std::shared_ptr<const RouteTable::Routes> routes = table->Current();
          StatusOr<ServerRoute> route = SelectServerRoute(*routes, call);
          allowed = route.ok() ? CheckRbac(filters, *route, call) : route.status();
        }
        if (!allowed.ok()) co_return allowed;
        const http2::Handler* handler = registry->Find(call.method());
        if (handler == nullptr) {
          co_return Status(StatusCode::kUnimplemented, "unknown method " + call.method());
        }
        Status handled = co_await (*handler)(call);
        co_return handled;
      });
  return routed;
}

std::vector<std::string> RouteConfigProblems(
    const std::string& context,
    const StatusOr<std::shared_ptr<const RouteConfigResource>>& routes) {
  std::vector<std::string> problems;
  if (!routes.ok()) {
    problems.push_back(context + ": " + routes.status().ToString());
    return problems;
  }
  for (const RouteConfigResource::VirtualHost& virtual_host : (*routes)->virtual_hosts) {
    for (size_t i = 0; i < virtual_host.routes.size(); ++i) {
      if (!std::holds_alternative<RouteConfigResource::Route::NonForwardingAction>(
              virtual_host.routes[i].action)) {
        std::string domain = virtual_host.domains.empty() ? "" : virtual_host.domains.front();
        problems.push_back(context + ": virtual host \"" + domain + "\" route " +
                           std::to_string(i) + " has an action other than non_forwarding_action");
      }
    }
  }
  return problems;
}

}  // namespace uxds::server
