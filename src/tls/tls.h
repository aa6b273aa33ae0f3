// uxds TLS layer: contexts built from configuration, and TlsStream.
#pragma once

#include "tls/tls_context.h"  // IWYU pragma: export
#include "tls/tls_stream.h"   // IWYU pragma: export
