// The resources the XdsClient fuzzer's ADS server sends: for each of LDS,
// CDS and EDS, three valid versions and one invalid resource (named, so the
// NACK names it: A46), built from the envoy protos.
#pragma once

#include <string>
#include <string_view>

#include "uxds/xds_resource_type.h"

namespace uxds::fuzz {

// type: 0 LDS, 1 CDS, 2 EDS.
std::string_view TypeUrl(int type);
const XdsResourceType& ResourceType(int type);
// Name `name` (0..2) of the pool of `type`: "l0", "c1", "e2", ...
std::string PoolName(int type, int name);
// A name no watcher ever asks for.
std::string UnrequestedName(int type);
// The serialized resource (the Any's value).
std::string ValidResource(int type, const std::string& name, int variant);
std::string InvalidResource(int type, const std::string& name);

}  // namespace uxds::fuzz
