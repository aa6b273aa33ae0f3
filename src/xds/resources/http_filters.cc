#include "xds/resources/http_filters.h"

#include <algorithm>
#include <vector>

#include "envoy/config/route/v3/route_components.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "xds/resources/fault_filter.h"
#include "xds/resources/field_parsers.h"
#include "xds/resources/rbac_parser.h"

namespace uxds {
namespace {

constexpr std::string_view kFilterConfigType = "envoy.config.route.v3.FilterConfig";
constexpr std::string_view kRouterConfigType = "envoy.extensions.filters.http.router.v3.Router";

// A39: the router's fields are all ignored, but the config must be a Router.
HttpFilterConfig ParseRouterConfig(const XdsExtension& extension, ValidationErrors& errors) {
  envoy::extensions::filters::http::router::v3::Router router;
  if (extension.typed_struct.has_value() || !ParseProto(extension.serialized_value, router)) {
    errors.Add("could not parse router filter config");
  }
  return {.config_type = std::string(kRouterConfigType)};
}

HttpFilterConfig RejectRouterOverride(const XdsExtension& /*extension*/, ValidationErrors& errors) {
  errors.Add("router filter does not support config override");
  return {};
}

constexpr HttpFilterType kRouter{
    .config_type = kRouterConfigType,
    .supported_on_clients = true,
    .supported_on_servers = true,
    .terminal = true,
    .parse_config = ParseRouterConfig,
    .parse_override = RejectRouterOverride,
};

// A41: the RBAC filter, on servers only.
HttpFilterConfig ParseRbacFilterConfig(const XdsExtension& extension, ValidationErrors& errors) {
  HttpFilterConfig config{.config_type = std::string(kRbacConfigType)};
  if (extension.typed_struct.has_value()) {
    errors.Add("could not parse HTTP RBAC filter config");
    config.rbac = RbacPolicy{};  // denies everything (fails closed)
    return config;
  }
  config.rbac = ParseRbacConfig(extension.serialized_value, errors);
  return config;
}

HttpFilterConfig ParseRbacOverride(const XdsExtension& extension, ValidationErrors& errors) {
  HttpFilterConfig config{.config_type = std::string(kRbacPerRouteConfigType)};
  if (extension.typed_struct.has_value()) {
    errors.Add("could not parse RBACPerRoute");
    config.rbac = RbacPolicy{};  // denies everything (fails closed)
    return config;
  }
  config.rbac = ParseRbacPerRoute(extension.serialized_value, errors);
  return config;
}

constexpr HttpFilterType kRbac{
    .config_type = kRbacConfigType,
    .override_config_type = kRbacPerRouteConfigType,
    .supported_on_clients = false,
    .supported_on_servers = true,
    .terminal = false,
    .parse_config = ParseRbacFilterConfig,
    .parse_override = ParseRbacOverride,
};

// A33: the fault filter, on clients only; an override is an HTTPFault too.
constexpr HttpFilterType kFault{
    .config_type = kFaultConfigType,
    .supported_on_clients = true,
    .supported_on_servers = false,
    .terminal = false,
    .parse_config = ParseFaultFilterConfig,
    .parse_override = ParseFaultFilterConfig,
};

// The filter an override of type `type` is for: its override type, or its
// top-level type (which only some filters take as an override).
const HttpFilterType* FindOverrideFilterType(std::string_view type) {
  for (const HttpFilterType* filter : {&kRouter, &kRbac, &kFault}) {
    if (type == filter->config_type || type == filter->override_config_type) return filter;
  }
  return nullptr;
}

std::optional<HttpFilterConfig> ParseOverrideOf(const HttpFilterType& filter,
                                                const XdsExtension& extension,
                                                ValidationErrors& errors) {
  if (!filter.override_config_type.empty() && extension.type != filter.override_config_type) {
    errors.Add("filter override must be of type " + std::string(filter.override_config_type));
    return std::nullopt;
  }
  return filter.parse_override(extension, errors);
}

// nullopt: nothing to keep (an error, or an optional unknown filter).
std::optional<HttpFilterConfig> ParseOverride(std::string_view name,
                                              const google::protobuf::Any& any,
                                              ValidationErrors& errors) {
  if (name.empty()) errors.Add("filter name must be non-empty");
  XdsExtension extension;
  if (!ExtractXdsExtension(&any, errors, extension)) return std::nullopt;
  if (extension.type != kFilterConfigType) {
    const HttpFilterType* filter = FindOverrideFilterType(extension.type);
    if (filter == nullptr) {
      errors.Add("unsupported filter type");
      return std::nullopt;
    }
    return ParseOverrideOf(*filter, extension, errors);
  }
  // A39: FilterConfig wraps the override and may mark it optional.
  envoy::config::route::v3::FilterConfig filter_config;
  if (extension.typed_struct.has_value() ||
      !ParseProto(extension.serialized_value, filter_config)) {
    errors.Add("could not parse FilterConfig");
    return std::nullopt;
  }
  auto config_field = errors.Scope(".config");
  XdsExtension inner;
  if (!ExtractXdsExtension(filter_config.has_config() ? &filter_config.config() : nullptr, errors,
                           inner)) {
    return std::nullopt;
  }
  const HttpFilterType* filter = FindOverrideFilterType(inner.type);
  if (filter == nullptr) {
    if (!filter_config.is_optional()) errors.Add("unsupported filter type");
    return std::nullopt;
  }
  return ParseOverrideOf(*filter, inner, errors);
}

}  // namespace

const HttpFilterType* FindHttpFilterType(std::string_view type) {
  for (const HttpFilterType* filter : {&kRouter, &kRbac, &kFault}) {
    if (type == filter->config_type) return filter;
  }
  return nullptr;
}

HttpFilterOverrides ParseTypedPerFilterConfig(
    const google::protobuf::Map<std::string, google::protobuf::Any>& configs,
    ValidationErrors& errors) {
  std::vector<const std::string*> names;
  names.reserve(configs.size());
  for (const auto& [name, any] : configs) names.push_back(&name);
  std::sort(names.begin(), names.end(), [](auto* a, auto* b) { return *a < *b; });
  HttpFilterOverrides overrides;
  for (const std::string* name : names) {
    auto field = errors.Scope("[" + *name + "]");
    std::optional<HttpFilterConfig> config = ParseOverride(*name, configs.at(*name), errors);
    if (config.has_value()) overrides.emplace(*name, *std::move(config));
  }
  return overrides;
}

}  // namespace uxds
