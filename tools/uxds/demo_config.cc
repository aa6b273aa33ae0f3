#include "demo_config.h"

#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace uxds::tool {
namespace {

using DemoJson = nlohmann::json;

constexpr char kListenerType[] = "type.googleapis.com/envoy.config.listener.v3.Listener";
constexpr char kRouteType[] = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
constexpr char kClusterType[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr char kEndpointType[] =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
constexpr char kHcmType[] =
    "type.googleapis.com/"
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
constexpr char kRouterType[] = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
constexpr char kUpstreamTlsType[] =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
constexpr char kDownstreamTlsType[] =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";
constexpr char kRbacType[] = "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC";
constexpr int kPriority0Servers = 4;

// An ADS ConfigSource: RDS and EDS come over the same stream (A27).
DemoJson AdsConfigSource() { return {{"ads", DemoJson::object()}, {"resource_api_version", "V3"}}; }

DemoJson RouterFilter() { return {{"name", "router"}, {"typed_config", {{"@type", kRouterType}}}}; }

DemoJson ClientListener() {
  DemoJson hcm = {
      {"@type", kHcmType},
      {"rds", {{"config_source", AdsConfigSource()}, {"route_config_name", "demo-route"}}},
      {"http_filters", DemoJson::array({RouterFilter()})}};
  return {{"@type", kListenerType},
          {"name", kDemoTargetName},
          {"api_listener", {{"api_listener", hcm}}}};
}

// A42: the request hash is the x-user header's; a call without it gets a
// random hash.
DemoJson Route() {
  DemoJson route = {
      {"match", {{"prefix", ""}}},
      {"route",
       {{"cluster", "demo-cluster"},
        {"hash_policy", DemoJson::array({{{"header", {{"header_name", kDemoHashHeader}}}}})}}}};
  return {{"@type", kRouteType},
          {"name", "demo-route"},
          {"virtual_hosts",
           DemoJson::array(
               {{{"name", "demo"}, {"domains", {"*"}}, {"routes", DemoJson::array({route})}}})}};
}

DemoJson Cluster() {
  return {{"@type", kClusterType},
          {"name", "demo-cluster"},
          {"type", "EDS"},
          {"eds_cluster_config",
           {{"eds_config", AdsConfigSource()}, {"service_name", "demo-endpoints"}}},
          {"lb_policy", "RING_HASH"},
          {"ring_hash_lb_config", {{"minimum_ring_size", "1024"}, {"maximum_ring_size", "4096"}}}};
}

DemoJson SocketAddress(uint16_t port) {
  return {{"socket_address", {{"address", "127.0.0.1"}, {"port_value", port}}}};
}

// One locality per priority (A42 priority over localities).
DemoJson Endpoints(const std::vector<uint16_t>& ports) {
  DemoJson localities = DemoJson::array();
  for (int priority = 0; priority < 2; ++priority) {
    DemoJson lb_endpoints = DemoJson::array();
    const size_t first = priority == 0 ? 0 : kPriority0Servers;
    const size_t end = priority == 0 ? kPriority0Servers : ports.size();
    for (size_t i = first; i < end; ++i) {
      lb_endpoints.push_back({{"endpoint", {{"address", SocketAddress(ports[i])}}}});
    }
    localities.push_back({{"locality", {{"zone", priority == 0 ? "primary" : "backup"}}},
                          {"priority", priority},
                          {"load_balancing_weight", 1},
                          {"lb_endpoints", std::move(lb_endpoints)}});
  }
  return {{"@type", kEndpointType},
          {"cluster_name", "demo-endpoints"},
          {"endpoints", std::move(localities)}};
}

// A36: the Listener an xDS-enabled server on 127.0.0.1:port watches; its
// inline route lets every RPC reach the server's handlers.
DemoJson ServerListener(uint16_t port) {
  const std::string address = "127.0.0.1:" + std::to_string(port);
  DemoJson route_config = {
      {"name", "local"},
      {"virtual_hosts",
       DemoJson::array(
           {{{"name", "all"},
             {"domains", {"*"}},
             {"routes", DemoJson::array({{{"match", {{"prefix", "/"}}},
                                          {"non_forwarding_action", DemoJson::object()}}})}}})}};
  DemoJson hcm = {{"@type", kHcmType},
                  {"route_config", route_config},
                  {"http_filters", DemoJson::array({RouterFilter()})}};
  std::string name = kServerListenerTemplate;
  name.replace(name.find("%s"), 2, address);
  return {{"@type", kListenerType},
          {"name", name},
          {"address", SocketAddress(port)},
          {"filter_chains",
           DemoJson::array(
               {{{"name", "demo"},
                 {"filters", DemoJson::array({{{"name", "hcm"}, {"typed_config", hcm}}})}}})}};
}

// A29: the client's side of the demo's mutual TLS. Roots and identity from
// the bootstrap's certificate providers; the server must be the demo's
// server workload (its SPIFFE ID), whatever its address.
DemoJson UpstreamMutualTls() {
  DemoJson tls = {
      {"@type", kUpstreamTlsType},
      {"common_tls_context",
       {{"tls_certificate_provider_instance", {{"instance_name", kDemoClientIdentity}}},
        {"validation_context",
         {{"ca_certificate_provider_instance", {{"instance_name", kDemoCa}}},
          {"match_subject_alt_names", DemoJson::array({{{"exact", kDemoServerSan}}})}}}}}};
  return {{"name", "envoy.transport_sockets.tls"}, {"typed_config", tls}};
}

// A41: the servers admit the demo client's identity (its SPIFFE ID) for the
// test service and CSDS, except kRbacRefusedMethod; anyone else, nothing.
DemoJson RbacFilter() {
  auto prefix = [](const char* prefix) {
    return DemoJson{{"url_path", {{"path", {{"prefix", prefix}}}}}};
  };
  DemoJson permission = {
      {"and_rules",
       {{"rules",
         DemoJson::array(
             {{{"or_rules",
                {{"rules", DemoJson::array({prefix("/grpc.testing.TestService/"),
                                            prefix("/envoy.service.status.v3.")})}}}},
              {{"not_rule", {{"url_path", {{"path", {{"exact", kRbacRefusedMethod}}}}}}}}})}}}};
  DemoJson principal = {{"authenticated", {{"principal_name", {{"exact", kDemoClientSan}}}}}};
  DemoJson rules = {{"action", "ALLOW"},
                    {"policies",
                     {{"demo-client",
                       {{"permissions", DemoJson::array({permission})},
                        {"principals", DemoJson::array({principal})}}}}}};
  return {{"name", "rbac"}, {"typed_config", {{"@type", kRbacType}, {"rules", rules}}}};
}

// The servers' side: their identity, and client certificates required and
// verified against the demo CA.
DemoJson DownstreamMutualTls() {
  DemoJson tls = {{"@type", kDownstreamTlsType},
                  {"common_tls_context",
                   {{"tls_certificate_provider_instance", {{"instance_name", kDemoServerIdentity}}},
                    {"validation_context",
                     {{"ca_certificate_provider_instance", {{"instance_name", kDemoCa}}}}}}},
                  {"require_client_certificate", true}};
  return {{"name", "envoy.transport_sockets.tls"}, {"typed_config", tls}};
}

Status WriteJsonFile(const std::string& path, const DemoJson& json) {
  std::ofstream out(path);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) return InternalError("cannot write " + path);
  return OkStatus();
}

// The *.json files of `dir`, sorted.
StatusOr<std::vector<std::string>> JsonFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return InvalidArgumentError("cannot read directory " + dir);
  std::vector<std::string> files;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name.size() > 5 && name.ends_with(".json")) files.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

// proto3 JSON names a field by its lowerCamelCase json_name or by its proto
// name; the control plane takes both, so the demo reads both: it renames
// "lbEndpoints" to "lb_endpoints" (field names are lower_snake_case in the
// xDS protos), leaving "@type" alone.
DemoJson SnakeCaseKeys(const DemoJson& json) {
  if (json.is_array()) {
    DemoJson out = DemoJson::array();
    for (const DemoJson& element : json) out.push_back(SnakeCaseKeys(element));
    return out;
  }
  if (!json.is_object()) return json;
  DemoJson out = DemoJson::object();
  for (const auto& [key, value] : json.items()) {
    std::string name;
    for (const char c : key) {
      if (c >= 'A' && c <= 'Z' && key.front() != '@') {
        name += '_';
        name += static_cast<char>(c - 'A' + 'a');
      } else {
        name += c;
      }
    }
    out[name] = SnakeCaseKeys(value);
  }
  return out;
}

// A proto3 JSON uint32: a number, or a string of digits.
bool GetUint32(const DemoJson& value, uint32_t* out) {
  if (value.is_number_unsigned() && value.get<uint64_t>() <= UINT32_MAX) {
    *out = value.get<uint32_t>();
    return true;
  }
  if (!value.is_string()) return false;
  const std::string text = value.get<std::string>();
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != text.npos) {
    return false;
  }
  const uint64_t parsed = std::stoull(text);
  if (parsed > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(parsed);
  return true;
}

StatusOr<DemoJson> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  DemoJson json = DemoJson::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return InvalidArgumentError(path + ": not a JSON object");
  }
  return SnakeCaseKeys(json);
}

// The endpoints of one ClusterLoadAssignment, in `path`.
Status ReadEndpoints(const std::string& path, const DemoJson& cla, DemoConfig& config) {
  const DemoJson* localities = cla.contains("endpoints") ? &cla["endpoints"] : nullptr;
  if (localities == nullptr || !localities->is_array()) {
    return InvalidArgumentError(path + ": endpoints: must list localities");
  }
  std::vector<int> per_priority(2, 0);
  for (size_t l = 0; l < localities->size(); ++l) {
    const DemoJson& locality = (*localities)[l];
    const std::string field = "endpoints[" + std::to_string(l) + "]";
    uint32_t priority = 0;
    if (locality.contains("priority") &&
        (!GetUint32(locality["priority"], &priority) || priority > 1)) {
      return InvalidArgumentError(path + ": " + field + ".priority: the demo needs 0 or 1");
    }
    const DemoJson lb_endpoints = locality.value("lb_endpoints", DemoJson::array());
    for (size_t e = 0; e < lb_endpoints.size(); ++e) {
      const DemoJson socket = lb_endpoints[e].value("/endpoint/address/socket_address"_json_pointer,
                                                    DemoJson::object());
      const std::string ip = socket.value("address", "");
      uint32_t port = 0;
      if (ip.empty() || !GetUint32(socket.value("port_value", DemoJson()), &port) || port > 65535) {
        return InvalidArgumentError(path + ": " + field + ".lb_endpoints[" + std::to_string(e) +
                                    "].endpoint.address.socket_address: needs address and "
                                    "port_value");
      }
      const uint32_t p = priority;
      const std::string host = ip.find(':') == std::string::npos ? ip : "[" + ip + "]";
      config.endpoints.push_back(
          {host + ":" + std::to_string(port), p,
           "p" + std::to_string(p) + "-" + std::to_string(++per_priority[p])});
    }
  }
  if (per_priority[0] == 0 || per_priority[1] == 0) {
    return InvalidArgumentError(path + ": endpoints: the demo needs endpoints in priority 0 and 1");
  }
  std::stable_sort(
      config.endpoints.begin(), config.endpoints.end(),
      [](const DemoEndpoint& a, const DemoEndpoint& b) { return a.priority < b.priority; });
  return OkStatus();
}

// The header name of the first header hash policy of a route.
std::string FindHashHeader(const DemoJson& route_config) {
  for (const DemoJson& vhost : route_config.value("virtual_hosts", DemoJson::array())) {
    for (const DemoJson& route : vhost.value("routes", DemoJson::array())) {
      for (const DemoJson& policy :
           route.value("/route/hash_policy"_json_pointer, DemoJson::array())) {
        const std::string header = policy.value("/header/header_name"_json_pointer, "");
        if (!header.empty()) return header;
      }
    }
  }
  return "";
}

}  // namespace

Status WriteBuiltInConfig(const std::string& dir, const std::vector<uint16_t>& ports, bool mtls) {
  DemoJson cluster = Cluster();
  if (mtls) cluster["transport_socket"] = UpstreamMutualTls();
  std::vector<std::pair<std::string, DemoJson>> files = {{"listener-demo.json", ClientListener()},
                                                         {"route-demo.json", Route()},
                                                         {"cluster-demo.json", cluster},
                                                         {"endpoints-demo.json", Endpoints(ports)}};
  for (uint16_t port : ports) {
    DemoJson listener = ServerListener(port);
    if (mtls) {
      DemoJson& chain = listener["filter_chains"][0];
      chain["transport_socket"] = DownstreamMutualTls();
      DemoJson& filters = chain["filters"][0]["typed_config"]["http_filters"];
      filters.insert(filters.begin(), RbacFilter());
    }
    files.emplace_back("listener-server-" + std::to_string(port) + ".json", std::move(listener));
  }
  for (const auto& [name, json] : files) {
    Status written = WriteJsonFile(dir + "/" + name, json);
    if (!written.ok()) return written;
  }
  return OkStatus();
}

StatusOr<DemoConfig> ReadDemoConfig(const std::string& dir, const std::string& target_name) {
  StatusOr<std::vector<std::string>> files = JsonFiles(dir);
  if (!files.ok()) return files.status();
  DemoConfig config;
  config.target = "xds:///" + target_name;
  std::string cla_file;
  for (const std::string& path : *files) {
    StatusOr<DemoJson> json = ReadJsonFile(path);
    if (!json.ok()) continue;  // the control plane reports it with its line
    const std::string type = json->value("@type", "");
    if (type == kEndpointType) {
      if (!cla_file.empty()) {
        return InvalidArgumentError(path + ": a second ClusterLoadAssignment (the first is in " +
                                    cla_file + "); the demo starts the servers of one");
      }
      cla_file = path;
      Status read = ReadEndpoints(path, *json, config);
      if (!read.ok()) return read;
    } else if (type == kRouteType && config.hash_header.empty()) {
      config.hash_header = FindHashHeader(*json);
    }
  }
  if (cla_file.empty()) {
    return InvalidArgumentError(dir + ": no file with \"@type\": \"" + std::string(kEndpointType) +
                                "\": the demo starts a server on each of its endpoints");
  }
  if (config.hash_header.empty()) {
    return InvalidArgumentError(dir +
                                ": no RouteConfiguration with a route.hash_policy[].header:"
                                " the demo checks that one header value sticks to one server");
  }
  return config;
}

std::string DemoBootstrapJson(const std::string& control_plane,
                              const DemoCertificateFiles* certificates) {
  DemoJson bootstrap = {
      {"xds_servers",
       DemoJson::array({{{"server_uri", control_plane},
                         {"channel_creds", DemoJson::array({{{"type", "insecure"}}})}}})},
      {"node", {{"id", "uxds-demo"}}},
      {"server_listener_resource_name_template", kServerListenerTemplate}};
  if (certificates != nullptr) {
    auto file_watcher = [](DemoJson config) {
      return DemoJson{{"plugin_name", "file_watcher"}, {"config", std::move(config)}};
    };
    bootstrap["certificate_providers"] = {
        {kDemoCa, file_watcher({{"ca_certificate_file", certificates->ca_cert}})},
        {kDemoServerIdentity, file_watcher({{"certificate_file", certificates->server_cert},
                                            {"private_key_file", certificates->server_key}})},
        {kDemoClientIdentity, file_watcher({{"certificate_file", certificates->client_cert},
                                            {"private_key_file", certificates->client_key}})}};
  }
  return bootstrap.dump(2);
}

}  // namespace uxds::tool
