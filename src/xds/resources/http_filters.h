// The xDS HTTP filters uxds knows (A39's filter registry): the router (a
// terminal filter that only selects gRPC's built-in routing, on clients and
// servers, without per-route overrides), RBAC (A41: servers only, with
// RBACPerRoute overrides) and fault injection (A33: clients only, with
// HTTPFault overrides). Any other filter type makes a Listener or
// RouteConfiguration invalid unless it is marked optional.
#pragma once

#include <google/protobuf/map.h>

#include <string>
#include <string_view>

#include "google/protobuf/any.pb.h"
#include "uxds/resources/http_filter_config.h"
#include "xds/resources/xds_extension.h"
#include "xds/validation_errors.h"

namespace uxds {

struct HttpFilterType {
  std::string_view config_type;                // top-level config message name
  std::string_view override_config_type = {};  // none: overrides are rejected
  bool supported_on_clients = false;
  bool supported_on_servers = false;
  bool terminal = false;
  // Parses a top-level config (HttpConnectionManager.http_filters).
  HttpFilterConfig (*parse_config)(const XdsExtension& extension,
                                   ValidationErrors& errors) = nullptr;
  // Parses a per-route override (typed_per_filter_config).
  HttpFilterConfig (*parse_override)(const XdsExtension& extension,
                                     ValidationErrors& errors) = nullptr;
};

// The filter whose top-level or override config type is `type`; nullptr if
// uxds does not know it.
const HttpFilterType* FindHttpFilterType(std::string_view type);

// A39: parses a typed_per_filter_config map (VirtualHost, Route,
// ClusterWeight) at the current field. Entries are checked in key order so
// that messages do not depend on the map's iteration order. Optional
// overrides of unknown filters are left out.
HttpFilterOverrides ParseTypedPerFilterConfig(
    const google::protobuf::Map<std::string, google::protobuf::Any>& configs,
    ValidationErrors& errors);

}  // namespace uxds
