// ListenerResource's JSON summary.
#include "uxds/resources/listener.h"
#include "xds/resources/fault_filter.h"
#include "xds/resources/resource_json.h"
#include "xds/resources/tls_context_parser.h"

namespace uxds {
namespace {

ResourceJson HttpConnectionManagerJson(const HttpConnectionManager& hcm) {
  ResourceJson json;
  if (const auto* rds_name = std::get_if<std::string>(&hcm.route_config)) {
    json["rds_route_config_name"] = *rds_name;
  } else {
    json["route_config"] =
        ResourceJson::parse(std::get<RouteConfigResource>(hcm.route_config).ToJson());
  }
  ResourceJson filters = ResourceJson::array();
  for (const auto& filter : hcm.http_filters) {
    ResourceJson entry = {{"name", filter.name}, {"type", filter.config_type}};
    if (filter.rbac.has_value()) entry["rbac"] = ResourceJson::parse(filter.rbac->ToJson());
    if (filter.fault.has_value()) entry["fault"] = FaultInjectionJson(*filter.fault);
    filters.push_back(std::move(entry));
  }
  json["http_filters"] = std::move(filters);
  if (hcm.http_max_stream_duration.has_value()) {
    json["max_stream_duration"] = DurationJson(*hcm.http_max_stream_duration);
  }
  return json;
}

ResourceJson FilterChainJson(const FilterChain& chain) {
  ResourceJson json;
  if (!chain.name.empty()) json["name"] = chain.name;
  json["filter_chain_match"] = chain.filter_chain_match.ToString();
  json["http_connection_manager"] = HttpConnectionManagerJson(chain.http_connection_manager);
  if (chain.downstream_tls_context.has_value()) {
    json["downstream_tls_context"] = DownstreamTlsContextJson(*chain.downstream_tls_context);
  }
  return json;
}

ResourceJson FilterChainMapJson(const FilterChainMap& map) {
  static constexpr const char* kSourceTypes[] = {"ANY", "SAME_IP_OR_LOOPBACK", "EXTERNAL"};
  auto prefix_text = [](const std::optional<CidrRange>& prefix) {
    return prefix.has_value() ? prefix->ToString() : std::string("*");
  };
  ResourceJson json = ResourceJson::object();
  for (const auto& destination : map.destination_ips) {
    ResourceJson types = ResourceJson::object();
    for (size_t type = 0; type < destination.source_types.size(); ++type) {
      if (destination.source_types[type].empty()) continue;
      ResourceJson sources = ResourceJson::object();
      for (const auto& source : destination.source_types[type]) {
        ResourceJson ports = ResourceJson::object();
        for (const auto& [port, chain] : source.ports) ports[std::to_string(port)] = chain;
        sources[prefix_text(source.prefix)] = std::move(ports);
      }
      types[kSourceTypes[type]] = std::move(sources);
    }
    json[prefix_text(destination.prefix)] = std::move(types);
  }
  return json;
}

}  // namespace

std::string ListenerResource::ToJson() const {
  ResourceJson json;
  if (const auto* api = std::get_if<ApiListener>(&listener)) {
    json["api_listener"] = {
        {"http_connection_manager", HttpConnectionManagerJson(api->http_connection_manager)}};
    return json.dump();
  }
  const auto& tcp = std::get<TcpListener>(listener);
  json["address"] = tcp.address;
  ResourceJson chains = ResourceJson::array();
  for (const auto& chain : tcp.filter_chains) chains.push_back(FilterChainJson(chain));
  json["filter_chains"] = std::move(chains);
  // destination prefix -> source type -> source prefix -> source port -> chain
  // index ("*": any; port "0": any).
  json["filter_chain_map"] = FilterChainMapJson(tcp.filter_chain_map);
  if (tcp.default_filter_chain.has_value()) {
    json["default_filter_chain"] = FilterChainJson(*tcp.default_filter_chain);
  }
  return json.dump();
}

}  // namespace uxds
