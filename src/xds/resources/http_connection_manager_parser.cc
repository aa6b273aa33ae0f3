// HttpConnectionManager parsing with gRPC's rules and error texts (A27, A31,
// A39, A41; gRPC C++ xds_listener_parser.cc).
#include "xds/resources/http_connection_manager_parser.h"

#include <set>
#include <string>

#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "xds/resources/field_parsers.h"
#include "xds/resources/http_filters.h"
#include "xds/resources/route_config_parser.h"

namespace uxds {
namespace {

namespace hcm_v3 = envoy::extensions::filters::network::http_connection_manager::v3;

constexpr std::string_view kHttpConnectionManagerType =
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

void ParseHttpFilters(const hcm_v3::HttpConnectionManager& proto, bool is_client,
                      HttpConnectionManager& hcm, ValidationErrors& errors) {
  auto field = errors.Scope(".http_filters");
  const size_t errors_before = errors.size();
  std::set<std::string, std::less<>> names_seen;
  for (int i = 0; i < proto.http_filters_size(); ++i) {
    auto index_field = errors.Scope("[" + std::to_string(i) + "]");
    const auto& filter = proto.http_filters(i);
    {
      auto name_field = errors.Scope(".name");
      if (filter.name().empty()) {
        errors.Add("empty filter name");
        continue;
      }
      if (!names_seen.insert(filter.name()).second) {
        errors.Add("duplicate HTTP filter name: " + filter.name());
        continue;
      }
    }
    auto config_field = errors.Scope(".typed_config");
    XdsExtension extension;
    if (!ExtractXdsExtension(filter.has_typed_config() ? &filter.typed_config() : nullptr, errors,
                             extension)) {
      continue;
    }
    const HttpFilterType* type = FindHttpFilterType(extension.type);
    // A39: an unknown filter type is ignored if the filter is optional.
    if (type == nullptr) {
      if (!filter.is_optional()) errors.Add("unsupported filter type");
      continue;
    }
    if (is_client ? !type->supported_on_clients : !type->supported_on_servers) {
      if (!filter.is_optional()) {
        errors.Add(std::string("filter is not supported on ") +
                   (is_client ? "clients" : "servers"));
      }
      continue;
    }
    HttpFilterConfig config = type->parse_config(extension, errors);
    hcm.http_filters.push_back({.name = filter.name(),
                                .config_type = std::move(config.config_type),
                                .rbac = std::move(config.rbac),
                                .fault = std::move(config.fault)});
  }
  if (errors.size() == errors_before && hcm.http_filters.empty()) {
    errors.Add("expected at least one HTTP filter");
  }
  // A39: the last filter is terminal and no other one is.
  for (size_t i = 0; i < hcm.http_filters.size(); ++i) {
    const auto& filter = hcm.http_filters[i];
    const bool terminal = FindHttpFilterType(filter.config_type)->terminal;
    const bool last = i + 1 == hcm.http_filters.size();
    if (terminal && !last) {
      errors.Add("terminal filter for config type " + filter.config_type +
                 " must be the last filter in the chain");
    } else if (!terminal && last) {
      errors.Add("non-terminal filter for config type " + filter.config_type +
                 " is the last filter in the chain");
    }
  }
}

}  // namespace

HttpConnectionManager ParseHttpConnectionManager(const XdsExtension& extension, bool is_client,
                                                 ValidationErrors& errors) {
  HttpConnectionManager hcm;
  if (extension.type != kHttpConnectionManagerType) {
    errors.Add("unsupported filter type");
    return hcm;
  }
  hcm_v3::HttpConnectionManager proto;
  if (extension.typed_struct.has_value() || !ParseProto(extension.serialized_value, proto)) {
    errors.Add("could not parse HttpConnectionManager config");
    return hcm;
  }
  // A41: gRPC does not trust forwarded client addresses.
  if (proto.xff_num_trusted_hops() != 0) {
    auto field = errors.Scope(".xff_num_trusted_hops");
    errors.Add("must be zero");
  }
  if (proto.original_ip_detection_extensions_size() != 0) {
    auto field = errors.Scope(".original_ip_detection_extensions");
    errors.Add("must be empty");
  }
  if (proto.common_http_protocol_options().has_max_stream_duration()) {
    auto field = errors.Scope(".common_http_protocol_options.max_stream_duration");
    hcm.http_max_stream_duration =
        ParseDuration(proto.common_http_protocol_options().max_stream_duration(), errors);
  }
  ParseHttpFilters(proto, is_client, hcm, errors);
  if (proto.has_route_config()) {
    auto field = errors.Scope(".route_config");
    hcm.route_config = ParseRouteConfig(proto.route_config(), errors);
  } else if (!proto.has_rds()) {
    errors.Add("neither route_config nor rds fields are present");
  } else {
    hcm.route_config = proto.rds().route_config_name();
    // A27: RDS comes over the same ADS stream.
    auto field = errors.Scope(".rds.config_source");
    if (!proto.rds().has_config_source()) {
      errors.Add("field not present");
    } else if (!proto.rds().config_source().has_ads() && !proto.rds().config_source().has_self()) {
      errors.Add("ConfigSource does not specify ADS or SELF");
    }
  }
  return hcm;
}

}  // namespace uxds
