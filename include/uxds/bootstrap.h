// The xDS bootstrap: which control planes to talk to, how, and who we are.
//
// The format is gRPC's (gRFC A27, with A47 authorities, A36 server listener
// names and A88 server features), read from the file named by
// GRPC_XDS_BOOTSTRAP, from the JSON in GRPC_XDS_BOOTSTRAP_CONFIG, from any
// JSON text, or built directly as these plain structs:
//
//   {
//     "xds_servers": [{
//       "server_uri": "xds.example.com:443",
//       "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "/ca.pem"}}],
//       "server_features": ["fail_on_data_errors"]
//     }],
//     "node": {"id": "n1", "cluster": "c", "locality": {"zone": "z"}, "metadata": {...}},
//     "authorities": {"xds.example.com": {"xds_servers": [...]}},
//     "client_default_listener_resource_name_template": "%s",
//     "server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%s",
//     "certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {...}}}
//   }
//
// An invalid bootstrap is one INVALID_ARGUMENT status that lists every
// problem with its JSON path, e.g.
//   bootstrap file /etc/xds.json: errors validating bootstrap: [field:xds_servers[0].server_uri
//   error:field not present; field:node.id error:is not a string]
// Unknown fields are ignored, as gRPC does.
#pragma once

#include <chrono>
#include <compare>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "uxds/status.h"

namespace uxds {

// A JSON value (node metadata) without a JSON library in the interface.
// Numbers are doubles, as in google.protobuf.Value, which the node metadata
// becomes on the wire.
struct JsonValue {
  using Array = std::vector<JsonValue>;
  using Object = std::map<std::string, JsonValue, std::less<>>;
  std::variant<std::monostate /* null */, bool, double, std::string, Array, Object> value;

  friend bool operator==(const JsonValue&, const JsonValue&) = default;
};

// The transport security of the channel to one xDS server: the first
// supported entry of the server's "channel_creds" list.
struct XdsChannelCredentials {
  static constexpr std::string_view kInsecure = "insecure";
  static constexpr std::string_view kTls = "tls";

  std::string type{kInsecure};  // kInsecure or kTls
  // tls only. The server's certificate is verified against these roots (the
  // system's default roots if empty) and must match the host name in
  // server_uri.
  std::string ca_certificate_file;
  // tls only: a client certificate for mutual TLS; both set or both empty.
  std::string certificate_file;
  std::string private_key_file;
  // tls only (A65): the files are read again this often, and soon after
  // one of them changes; new connections use what was read last.
  std::chrono::milliseconds refresh_interval = std::chrono::minutes(10);

  friend bool operator==(const XdsChannelCredentials&, const XdsChannelCredentials&) = default;
  friend auto operator<=>(const XdsChannelCredentials&, const XdsChannelCredentials&) = default;
};

// One xDS server. Two entries naming the same server (in different
// authorities) compare equal and share one ADS stream (A47).
struct XdsServerConfig {
  std::string server_uri;  // a gRPC target, e.g. "xds.example.com:443"
  XdsChannelCredentials channel_credentials;
  // A88 server features. "ignore_resource_deletion" is accepted in the JSON
  // and ignored: under A88 every data error is already ignored unless
  // fail_on_data_errors is set.
  bool fail_on_data_errors = false;
  bool resource_timer_is_transient_error = false;

  // A stable text form with every field that makes servers different, for
  // logs and as a hash-map key: {server_uri=..., channel_creds={type=tls,
  // ca_certificate_file=...}, server_features=[fail_on_data_errors]}.
  std::string Key() const;

  friend bool operator==(const XdsServerConfig&, const XdsServerConfig&) = default;
  friend auto operator<=>(const XdsServerConfig&, const XdsServerConfig&) = default;
};

struct XdsLocality {
  std::string region;
  std::string zone;
  std::string sub_zone;

  friend bool operator==(const XdsLocality&, const XdsLocality&) = default;
};

// Who we are to the control plane (envoy.config.core.v3.Node).
struct XdsNode {
  std::string id;
  std::string cluster;
  XdsLocality locality;
  JsonValue::Object metadata;  // becomes Node.metadata (google.protobuf.Struct)

  friend bool operator==(const XdsNode&, const XdsNode&) = default;
};

// A47: a federation authority, the part after "xdstp://" in resource names.
struct XdsAuthority {
  // Listener name for a client target "xds://<authority>/<target>". Empty
  // means A47's default "xdstp://<authority>/envoy.config.listener.v3.Listener/%s".
  std::string client_listener_resource_name_template;
  // Empty means the bootstrap's top-level xds_servers.
  std::vector<XdsServerConfig> xds_servers;

  friend bool operator==(const XdsAuthority&, const XdsAuthority&) = default;
};

// A certificate provider instance (A29) as the bootstrap names it; xDS
// security config refers to it by its key in Bootstrap::certificate_providers.
struct CertificateProviderConfig {
  std::string plugin_name;         // e.g. "file_watcher"
  std::string config_json = "{}";  // the plugin's "config" object, compact JSON text

  friend bool operator==(const CertificateProviderConfig&,
                         const CertificateProviderConfig&) = default;
};

struct Bootstrap {
  // Environment variables FromEnvironment() reads, in this order.
  static constexpr const char* kFileEnvVar = "GRPC_XDS_BOOTSTRAP";
  static constexpr const char* kConfigEnvVar = "GRPC_XDS_BOOTSTRAP_CONFIG";

  // In priority order; A71 falls back from one to the next.
  std::vector<XdsServerConfig> xds_servers;
  XdsNode node;
  std::map<std::string, XdsAuthority, std::less<>> authorities;
  // A47: Listener name for a client target without authority; empty means "%s".
  std::string client_default_listener_resource_name_template;
  // A36/A47: Listener name for an xDS-enabled server; no default.
  std::string server_listener_resource_name_template;
  std::map<std::string, CertificateProviderConfig, std::less<>> certificate_providers;

  // Parses and validates bootstrap JSON.
  static StatusOr<Bootstrap> FromJson(std::string_view json);
  // Reads and parses a bootstrap file; errors start with "bootstrap file <path>: ".
  static StatusOr<Bootstrap> FromFile(const std::string& path);
  // The file named by GRPC_XDS_BOOTSTRAP if that is set and not empty, else
  // the JSON in GRPC_XDS_BOOTSTRAP_CONFIG; FAILED_PRECONDITION if neither is set.
  static StatusOr<Bootstrap> FromEnvironment();

  // Checks a bootstrap built in code by the rules FromJson applies (servers
  // present, known credentials, authority templates); errors name the fields
  // by their JSON paths.
  Status Validate() const;

  const XdsAuthority* FindAuthority(std::string_view name) const;

  // A47: the Listener resource name a client channel for `target` (the path
  // of an "xds:" URI without its leading '/') subscribes to. `authority` is
  // the URI's authority, empty for "xds:///target" or "xds:target".
  // INVALID_ARGUMENT if the authority is not in `authorities`.
  StatusOr<std::string> ClientListenerResourceName(std::string_view authority,
                                                   std::string_view target) const;
  // A36/A47: the Listener resource name an xDS-enabled server listening on
  // `listening_address` ("0.0.0.0:8080", "[::]:8080") subscribes to.
  // FAILED_PRECONDITION if server_listener_resource_name_template is unset.
  StatusOr<std::string> ServerListenerResourceName(std::string_view listening_address) const;

  friend bool operator==(const Bootstrap&, const Bootstrap&) = default;
};

// A47: replaces every "%s" in a Listener resource name template with
// `replacement`. If the template starts with "xdstp:", the replacement is
// percent-encoded first, keeping only the characters RFC 3986 section 3.3
// allows in a path (unreserved, sub-delims, ':', '@') and '/'.
std::string ExpandListenerResourceNameTemplate(std::string_view name_template,
                                               std::string_view replacement);

}  // namespace uxds
