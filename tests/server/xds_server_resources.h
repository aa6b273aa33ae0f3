// Server Listeners and RouteConfigurations (A36) as the fake control plane
// sends them, for the XdsServer tests.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/fake_control_plane.h"

namespace uxds::testing {

// Which action a server route carries.
enum class ServerRouteAction { kNonForwarding, kRoute };

// Routes of one virtual host (domain "*") for a server.
struct ServerRoutes {
  // Path prefix -> action, in order; "" matches every path.
  std::vector<std::pair<std::string, ServerRouteAction>> routes = {
      {"", ServerRouteAction::kNonForwarding}};
  // A39 typed_per_filter_config: filter name -> the override as a
  // google.protobuf.Any (type URL, serialized message), on the virtual host
  // and on the route of a prefix.
  std::map<std::string, std::pair<std::string, std::string>> virtual_host_overrides = {};
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>>
      route_overrides = {};
};

struct ServerChain {
  std::string name;
  std::vector<std::string> prefix_ranges;  // "127.0.0.1/32"
  // 0 ANY, 1 SAME_IP_OR_LOOPBACK, 2 EXTERNAL.
  int source_type = 0;
  std::vector<std::string> source_prefix_ranges;
  std::vector<uint32_t> source_ports;
  // Routes over RDS when set, else inline `routes`.
  std::string rds_name;
  ServerRoutes routes;
  // A29: a DownstreamTlsContext when tls_identity names a certificate
  // provider instance; tls_ca (if set) verifies client certificates.
  std::string tls_identity = {};
  std::string tls_ca = {};
  bool require_client_certificate = false;
  // HTTP filters before the router: name -> the config as a
  // google.protobuf.Any (type URL, serialized message).
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> http_filters = {};
};

// Spec helpers (designated initializers that leave fields out trip
// -Wmissing-field-initializers).
struct ServerListenerSpec;
ServerChain Chain(std::string name);

struct ServerListenerSpec {
  std::string name;
  std::string address = "127.0.0.1";  // Listener.address.socket_address
  uint16_t port = 0;
  std::vector<ServerChain> chains;
  std::optional<ServerChain> default_chain;
};

ServerListenerSpec Listener(std::string name, std::string address, uint16_t port,
                            std::vector<ServerChain> chains);

ResponseResource ServerListener(const ServerListenerSpec& spec);
// A RouteConfiguration `name` for a server (one virtual host, domain "*").
ResponseResource ServerRouteConfig(const std::string& name, const ServerRoutes& routes);

}  // namespace uxds::testing
