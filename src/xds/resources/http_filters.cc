#include "xds/resources/http_filters.h"

#include <algorithm>
#include <vector>

#include "envoy/config/route/v3/route_components.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "xds/resources/field_parsers.h"

namespace uxds {
namespace {

constexpr std::string_view kFilterConfigType = "envoy.config.route.v3.FilterConfig";

// A39: the router's fields are all ignored, but the config must be a Router.
void ValidateRouterConfig(const XdsExtension& extension, ValidationErrors& errors) {
  envoy::extensions::filters::http::router::v3::Router router;
  if (extension.typed_struct.has_value() || !ParseProto(extension.serialized_value, router)) {
    errors.Add("could not parse router filter config");
  }
}

void RejectRouterOverride(const XdsExtension& /*extension*/, ValidationErrors& errors) {
  errors.Add("router filter does not support config override");
}

constexpr HttpFilterType kRouter{
    .config_type = "envoy.extensions.filters.http.router.v3.Router",
    .supported_on_clients = true,
    .supported_on_servers = true,
    .terminal = true,
    .validate_config = ValidateRouterConfig,
    .validate_override = RejectRouterOverride,
};

void ValidateOverride(std::string_view name, const google::protobuf::Any& any,
                      ValidationErrors& errors) {
  if (name.empty()) errors.Add("filter name must be non-empty");
  XdsExtension extension;
  if (!ExtractXdsExtension(&any, errors, extension)) return;
  if (extension.type != kFilterConfigType) {
    const HttpFilterType* filter = FindHttpFilterType(extension.type);
    if (filter == nullptr) {
      errors.Add("unsupported filter type");
      return;
    }
    filter->validate_override(extension, errors);
    return;
  }
  // A39: FilterConfig wraps the override and may mark it optional.
  envoy::config::route::v3::FilterConfig filter_config;
  if (extension.typed_struct.has_value() ||
      !ParseProto(extension.serialized_value, filter_config)) {
    errors.Add("could not parse FilterConfig");
    return;
  }
  auto config_field = errors.Scope(".config");
  XdsExtension inner;
  if (!ExtractXdsExtension(filter_config.has_config() ? &filter_config.config() : nullptr, errors,
                           inner)) {
    return;
  }
  const HttpFilterType* filter = FindHttpFilterType(inner.type);
  if (filter == nullptr) {
    if (!filter_config.is_optional()) errors.Add("unsupported filter type");
    return;
  }
  filter->validate_override(inner, errors);
}

}  // namespace

const HttpFilterType* FindHttpFilterType(std::string_view type) {
  if (type == kRouter.config_type) return &kRouter;
  return nullptr;
}

void ValidateTypedPerFilterConfig(
    const google::protobuf::Map<std::string, google::protobuf::Any>& configs,
    ValidationErrors& errors) {
  std::vector<const std::string*> names;
  names.reserve(configs.size());
  for (const auto& [name, any] : configs) names.push_back(&name);
  std::sort(names.begin(), names.end(), [](auto* a, auto* b) { return *a < *b; });
  for (const std::string* name : names) {
    auto field = errors.Scope("[" + *name + "]");
    ValidateOverride(*name, configs.at(*name), errors);
  }
}

}  // namespace uxds
