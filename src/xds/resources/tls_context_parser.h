// A29: UpstreamTlsContext (a Cluster's transport_socket) and the
// CommonTlsContext inside it and inside a DownstreamTlsContext, validated as
// gRPC does: certificate provider instances must be in the bootstrap, and
// fields whose absence would weaken security (SDS, inline certificates,
// tls_params, custom handshakers, SPKI/hash pinning, CRLs, custom
// validators) are NACKed rather than ignored.
#pragma once

#include <optional>

#include "envoy/config/core/v3/base.pb.h"
#include "envoy/extensions/transport_sockets/tls/v3/tls.pb.h"
#include "uxds/resources/tls_context.h"
#include "uxds/xds_resource_type.h"
#include "xds/resources/resource_json.h"
#include "xds/validation_errors.h"

namespace uxds {

inline constexpr std::string_view kUpstreamTlsContextType =
    "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
inline constexpr std::string_view kDownstreamTlsContextType =
    "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";

// Reports at the current field of `errors` (the caller's
// ".common_tls_context").
CommonTlsContext ParseCommonTlsContext(
    const XdsDecodeContext& context,
    const envoy::extensions::transport_sockets::tls::v3::CommonTlsContext& proto,
    ValidationErrors& errors);

// A Cluster's transport_socket (the caller scoped `errors` to
// ".transport_socket"): nullopt on an error (a missing typed_config is one).
std::optional<CommonTlsContext> ParseUpstreamTlsContext(
    const XdsDecodeContext& context, const envoy::config::core::v3::TransportSocket& socket,
    ValidationErrors& errors);

// A server filter chain's transport_socket (the caller scoped `errors` to
// ".transport_socket"), checked as A29 says: an identity instance is
// required; require_client_certificate and a validation context each need
// a CA instance; require_sni and an ocsp_staple_policy other than
// LENIENT_STAPLING are NACKed, as are SAN matchers (not supported on
// servers). nullopt on an error.
std::optional<DownstreamTlsContext> ParseDownstreamTlsContext(
    const XdsDecodeContext& context, const envoy::config::core::v3::TransportSocket& socket,
    ValidationErrors& errors);

ResourceJson TlsContextJson(const CommonTlsContext& tls);
ResourceJson DownstreamTlsContextJson(const DownstreamTlsContext& tls);

}  // namespace uxds
