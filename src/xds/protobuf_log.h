// Routes protobuf's own log lines (e.g. "String field ... contains invalid
// UTF-8 data" while a resource is decoded) into uxds's log sink.
#pragma once

namespace uxds::xds_internal {

// Idempotent and thread-safe; called when an XdsClient is created.
void RouteProtobufLogsToUxdsLog();

}  // namespace uxds::xds_internal
