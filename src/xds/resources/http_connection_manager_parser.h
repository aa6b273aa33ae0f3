// HttpConnectionManager validation, shared by client Listeners (inside
// api_listener) and server Listeners (the one network filter of each filter
// chain).
#pragma once

#include "uxds/resources/listener.h"
#include "xds/resources/xds_extension.h"
#include "xds/validation_errors.h"

namespace uxds {

// `extension`: the typed config that should hold an HttpConnectionManager.
// A39: `is_client` picks which side's HTTP filters are supported.
HttpConnectionManager ParseHttpConnectionManager(const XdsExtension& extension, bool is_client,
                                                 ValidationErrors& errors);

}  // namespace uxds
