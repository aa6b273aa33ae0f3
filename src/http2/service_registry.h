// The service registry of the HTTP/2 server: the public one
// (include/uxds/service_registry.h), named in this namespace too.
#pragma once

#include "http2/server_call.h"
#include "uxds/service_registry.h"

namespace uxds::http2 {

using ::uxds::Handler;
using ::uxds::MakeUnaryHandler;
using ::uxds::ServiceRegistry;
using ::uxds::UnaryHandler;

}  // namespace uxds::http2
