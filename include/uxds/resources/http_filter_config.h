// HttpFilterConfig: the parsed config of one HTTP filter uxds runs (A39), at
// the top level of an HttpConnectionManager or as a per-route override
// (typed_per_filter_config of a VirtualHost or Route).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "uxds/resources/fault_injection.h"
#include "uxds/resources/rbac.h"

namespace uxds {

struct HttpFilterConfig {
  // The config message's type, e.g.
  // "envoy.extensions.filters.http.rbac.v3.RBACPerRoute".
  std::string config_type;
  // envoy.filters.http.rbac (A41): the policy to enforce; nullopt enforces
  // nothing (rules absent, action LOG, or an RBACPerRoute without rbac).
  std::optional<RbacPolicy> rbac = {};
  // envoy.filters.http.fault (A33): what to inject (clients only).
  std::optional<FaultInjectionConfig> fault = {};
  friend bool operator==(const HttpFilterConfig&, const HttpFilterConfig&) = default;
};

// typed_per_filter_config: overrides by HTTP filter name.
using HttpFilterOverrides = std::map<std::string, HttpFilterConfig>;

}  // namespace uxds
