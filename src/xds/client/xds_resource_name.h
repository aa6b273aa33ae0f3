// A47 resource names: which authority a watched name belongs to, and the one
// spelling of it used as cache key and in DiscoveryRequest.resource_names.
#pragma once

#include <string>
#include <string_view>

#include "uxds/status.h"
#include "uxds/xds_resource_type.h"

namespace uxds::xds_internal {

// A78's grpc.xds.authority label for names that are not xdstp:// URIs; also
// their authority key (it cannot collide with a URI authority).
inline constexpr std::string_view kOldStyleAuthority = "#old";

struct XdsResourceName {
  // The xdstp:// authority (may be empty: A47 "New-style resource names
  // without any authority will use the empty string"), or kOldStyleAuthority.
  std::string authority;
  // Old-style names as given. xdstp:// names normalized (A47, TP1): context
  // parameters sorted by key, the last value of a repeated key kept.
  std::string key;

  bool is_xdstp() const { return authority != kOldStyleAuthority; }
};

// The offset of the first byte of `text` that is not part of well-formed
// UTF-8, or npos.
size_t FindInvalidUtf8(std::string_view text);

// INVALID_ARGUMENT if `name` is not valid UTF-8, or starts with "xdstp:" but
// is not
// "xdstp://<authority>/<type name>/<id>[?<params>]" with `type`'s type name.
StatusOr<XdsResourceName> ParseXdsResourceName(std::string_view name, const XdsResourceType& type);

}  // namespace uxds::xds_internal
