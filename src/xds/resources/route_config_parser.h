// RouteConfiguration validation, shared by RDS and the route_config inlined
// in a Listener's HttpConnectionManager (A27): errors are recorded at the
// current field of `errors`.
#pragma once

#include "envoy/config/route/v3/route.pb.h"
#include "uxds/resources/route_config.h"
#include "xds/validation_errors.h"

namespace uxds {

RouteConfigResource ParseRouteConfig(const envoy::config::route::v3::RouteConfiguration& proto,
                                     ValidationErrors& errors);

}  // namespace uxds
