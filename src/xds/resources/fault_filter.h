// The HTTP fault filter (A33): its config parsed as gRPC validates it, and
// its one-line JSON summary.
#pragma once

#include "uxds/resources/http_filter_config.h"
#include "xds/resources/resource_json.h"
#include "xds/resources/xds_extension.h"
#include "xds/validation_errors.h"

namespace uxds {

inline constexpr std::string_view kFaultConfigType =
    "envoy.extensions.filters.http.fault.v3.HTTPFault";

// An HTTPFault, top-level or override (the same message for both, A33).
// Errors at the current field.
HttpFilterConfig ParseFaultFilterConfig(const XdsExtension& extension, ValidationErrors& errors);

ResourceJson FaultInjectionJson(const FaultInjectionConfig& config);

}  // namespace uxds
