// The RBAC HTTP filter's configs (A41) compiled into RbacPolicy, with the
// validation A41 asks for: CEL conditions, header matchers on "grpc-*" or
// ":scheme", and what uxds cannot enforce are errors (the resource is
// NACKed). Errors land at the current field of `errors`.
#pragma once

#include <optional>
#include <string_view>

#include "uxds/resources/rbac.h"
#include "xds/validation_errors.h"

namespace uxds {

inline constexpr std::string_view kRbacConfigType = "envoy.extensions.filters.http.rbac.v3.RBAC";
inline constexpr std::string_view kRbacPerRouteConfigType =
    "envoy.extensions.filters.http.rbac.v3.RBACPerRoute";

// A serialized envoy.extensions.filters.http.rbac.v3.RBAC. nullopt (and no
// error): nothing is enforced, as `rules` is absent or its action is LOG.
// With errors, a policy that denies everything (the resource is NACKed;
// nothing should use it, and if something did it would fail closed).
std::optional<RbacPolicy> ParseRbacConfig(std::string_view serialized, ValidationErrors& errors);

// A serialized RBACPerRoute: its `rbac`, or nothing enforced on the route
// when it has none.
std::optional<RbacPolicy> ParseRbacPerRoute(std::string_view serialized, ValidationErrors& errors);

}  // namespace uxds
