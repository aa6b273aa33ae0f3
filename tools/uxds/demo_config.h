// The configuration `uxds demo` serves: its built-in one, written with the
// ports it chose, or a user's directory (--config DIR), and what the demo
// reads from it to know which servers to start and what to check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "demo_certificates.h"
#include "uxds/status.h"

namespace uxds::tool {

// One server the demo starts: an endpoint of the ClusterLoadAssignment.
struct DemoEndpoint {
  std::string address;  // "127.0.0.1:PORT", as XdsServer listens and a call's peer reads
  uint32_t priority = 0;
  std::string name;  // "p0-1", "p1-2": priority and position, the server's hostname
};

struct DemoConfig {
  std::string target;                   // "xds:///demo"
  std::string hash_header;              // the route's header hash policy: "x-user"
  std::vector<DemoEndpoint> endpoints;  // priority 0 first
};

// The built-in configuration's names.
inline constexpr char kDemoTargetName[] = "demo";
inline constexpr char kDemoHashHeader[] = "x-user";
inline constexpr char kServerListenerTemplate[] = "grpc/server?xds.resource.listening_address=%s";
// --mtls: the bootstrap's certificate provider instances.
inline constexpr char kDemoCa[] = "demo-ca";
inline constexpr char kDemoServerIdentity[] = "server-identity";
inline constexpr char kDemoClientIdentity[] = "client-identity";
// --mtls: the method the servers' RBAC policy (A41) refuses the demo client.
inline constexpr char kRbacRefusedMethod[] = "/grpc.testing.TestService/UnimplementedCall";

// Writes the built-in resources into `dir`, one proto3 JSON file each: the
// client Listener "demo" (RDS "demo-route"), the RouteConfiguration (every
// path to "demo-cluster", hashed on the x-user header: A42), the RING_HASH
// Cluster, its ClusterLoadAssignment ("demo-endpoints": four endpoints in
// priority 0, two in priority 1, on `ports`) and one server Listener per
// endpoint whose route lets every RPC in (A36 non_forwarding_action).
// With `mtls` (A29), the Cluster's UpstreamTlsContext and each server
// Listener's DownstreamTlsContext make every call mutual TLS, and each
// server Listener's RBAC filter (A41) admits only the demo client's
// identity, to every method but kRbacRefusedMethod.
Status WriteBuiltInConfig(const std::string& dir, const std::vector<uint16_t>& ports,
                          bool mtls = false);

// Reads what the demo needs from the resource files in `dir` (*.json with
// "@type"): the one ClusterLoadAssignment's endpoints (IPv4 or IPv6 with a
// port_value, in priorities 0 and 1, at least one in each), and the first
// header hash policy of a RouteConfiguration. Errors name the file and the
// field.
StatusOr<DemoConfig> ReadDemoConfig(const std::string& dir, const std::string& target_name);

// A bootstrap for the demo's client and servers: one insecure xDS server
// (`control_plane` "IP:PORT"), node "uxds-demo", the server Listener template;
// with `certificates`, the certificate providers --mtls's resources name.
std::string DemoBootstrapJson(const std::string& control_plane,
                              const DemoCertificateFiles* certificates = nullptr);

}  // namespace uxds::tool
