// A29's TLS contexts, with gRPC's field paths and error texts
// (gRPC C++ xds_common_types.cc and xds_cluster.cc).
#include "xds/resources/tls_context_parser.h"

#include <string>

#include "envoy/extensions/transport_sockets/tls/v3/common.pb.h"
#include "xds/resources/field_parsers.h"
#include "xds/resources/matcher_parsers.h"
#include "xds/resources/xds_extension.h"

namespace uxds {
namespace {

namespace tls_v3 = envoy::extensions::transport_sockets::tls::v3;
using ProviderInstance = CommonTlsContext::CertificateProviderPluginInstance;

// The instance named at `field_name` of a CertificateProviderPluginInstance
// or its deprecated twin (both have instance_name and certificate_name).
// A29: an instance the bootstrap does not define cannot give certificates.
template <typename InstanceProto>
ProviderInstance ParseProviderInstance(const XdsDecodeContext& context, const InstanceProto& proto,
                                       std::string_view field_name, ValidationErrors& errors) {
  auto field = errors.Scope(field_name);
  ProviderInstance instance{proto.instance_name(), proto.certificate_name()};
  if (!context.bootstrap.certificate_providers.contains(instance.instance_name)) {
    auto name_field = errors.Scope(".instance_name");
    errors.Add("unrecognized certificate provider instance name: " + instance.instance_name);
  }
  return instance;
}

void Unsupported(std::string_view field_name, ValidationErrors& errors) {
  auto field = errors.Scope(field_name);
  errors.Add("feature unsupported");
}

CommonTlsContext::CertificateValidationContext ParseValidationContext(
    const XdsDecodeContext& context, const tls_v3::CertificateValidationContext& proto,
    ValidationErrors& errors) {
  CommonTlsContext::CertificateValidationContext validation;
  if (proto.has_ca_certificate_provider_instance()) {
    validation.ca_certificate_provider_instance =
        ParseProviderInstance(context, proto.ca_certificate_provider_instance(),
                              ".ca_certificate_provider_instance", errors);
  }
  for (int i = 0; i < proto.match_subject_alt_names_size(); ++i) {
    auto field = errors.Scope(".match_subject_alt_names[" + std::to_string(i) + "]");
    if (auto matcher = ParseStringMatcher(proto.match_subject_alt_names(i), errors)) {
      validation.match_subject_alt_names.push_back(*std::move(matcher));
    }
  }
  // A29: ignoring any of these would accept peers the control plane meant
  // to refuse. (match_typed_subject_alt_names, newer than A29, is the same
  // kind of check.)
  if (proto.verify_certificate_spki_size() > 0) Unsupported(".verify_certificate_spki", errors);
  if (proto.verify_certificate_hash_size() > 0) Unsupported(".verify_certificate_hash", errors);
  if (proto.has_require_signed_certificate_timestamp() &&
      proto.require_signed_certificate_timestamp().value()) {
    Unsupported(".require_signed_certificate_timestamp", errors);
  }
  if (proto.has_crl()) Unsupported(".crl", errors);
  if (proto.has_custom_validator_config()) Unsupported(".custom_validator_config", errors);
  if (proto.match_typed_subject_alt_names_size() > 0) {
    Unsupported(".match_typed_subject_alt_names", errors);
  }
  // Ignored, as A29 says: trusted_ca, watched_directory,
  // allow_expired_certificate, trust_chain_verification.
  return validation;
}

}  // namespace

CommonTlsContext ParseCommonTlsContext(const XdsDecodeContext& context,
                                       const tls_v3::CommonTlsContext& proto,
                                       ValidationErrors& errors) {
  CommonTlsContext tls;
  // The identity: tls_certificate_provider_instance, else the deprecated
  // tls_certificate_certificate_provider_instance; inline or SDS
  // certificates are not a source gRPC has.
  if (proto.has_tls_certificate_provider_instance()) {
    tls.tls_certificate_provider_instance =
        ParseProviderInstance(context, proto.tls_certificate_provider_instance(),
                              ".tls_certificate_provider_instance", errors);
  } else if (proto.has_tls_certificate_certificate_provider_instance()) {
    tls.tls_certificate_provider_instance =
        ParseProviderInstance(context, proto.tls_certificate_certificate_provider_instance(),
                              ".tls_certificate_certificate_provider_instance", errors);
  } else {
    if (proto.tls_certificates_size() > 0) Unsupported(".tls_certificates", errors);
    if (proto.tls_certificate_sds_secret_configs_size() > 0) {
      Unsupported(".tls_certificate_sds_secret_configs", errors);
    }
  }
  if (proto.has_tls_params()) Unsupported(".tls_params", errors);
  if (proto.has_custom_handshaker()) Unsupported(".custom_handshaker", errors);
  // The validation context: validation_context, or
  // combined_validation_context's default one.
  switch (proto.validation_context_type_case()) {
    case tls_v3::CommonTlsContext::kValidationContext: {
      auto field = errors.Scope(".validation_context");
      tls.certificate_validation_context =
          ParseValidationContext(context, proto.validation_context(), errors);
      break;
    }
    case tls_v3::CommonTlsContext::kCombinedValidationContext: {
      auto field = errors.Scope(".combined_validation_context");
      const auto& combined = proto.combined_validation_context();
      if (combined.has_default_validation_context()) {
        auto default_field = errors.Scope(".default_validation_context");
        tls.certificate_validation_context =
            ParseValidationContext(context, combined.default_validation_context(), errors);
      }
      // The deprecated way to name the roots, read only when the default
      // context names none. (Its SDS config is not read: the roots must
      // still come from a provider instance.)
      if (tls.certificate_validation_context.ca_certificate_provider_instance.empty() &&
          combined.has_validation_context_certificate_provider_instance()) {
        tls.certificate_validation_context.ca_certificate_provider_instance = ParseProviderInstance(
            context, combined.validation_context_certificate_provider_instance(),
            ".validation_context_certificate_provider_instance", errors);
      }
      break;
    }
    case tls_v3::CommonTlsContext::kValidationContextSdsSecretConfig:
      Unsupported(".validation_context_sds_secret_config", errors);
      break;
    default:
      // The other (deprecated) forms are not read, as in gRPC: without a
      // CA instance an UpstreamTlsContext is NACKed below.
      break;
  }
  // Ignored, as A29 says: alpn_protocols.
  return tls;
}

namespace {

// Unpacks a transport_socket's typed_config, which must be a `type`
// (`name` in the error). The caller scoped `errors` to ".typed_config";
// `extension` then holds the scope of the value inside, for the caller's
// errors about the proto's fields.
template <typename Proto>
bool UnpackTransportSocket(const envoy::config::core::v3::TransportSocket& socket,
                           std::string_view type, std::string_view name, XdsExtension& extension,
                           Proto& proto, ValidationErrors& errors) {
  // A transport_socket without a config is NACKed, as gRPC does, not read
  // as plaintext: its name may well say TLS.
  if (!ExtractXdsExtension(socket.has_typed_config() ? &socket.typed_config() : nullptr, errors,
                           extension)) {
    return false;
  }
  if (extension.type != type) {
    auto type_field = errors.Scope(".type_url");
    errors.Add("unsupported transport socket type");
    return false;
  }
  if (extension.typed_struct.has_value() || !ParseProto(extension.serialized_value, proto)) {
    errors.Add("can't decode " + std::string(name));
    return false;
  }
  return true;
}

}  // namespace

std::optional<CommonTlsContext> ParseUpstreamTlsContext(
    const XdsDecodeContext& context, const envoy::config::core::v3::TransportSocket& socket,
    ValidationErrors& errors) {
  const size_t errors_before = errors.size();
  auto field = errors.Scope(".typed_config");
  XdsExtension extension;
  tls_v3::UpstreamTlsContext proto;
  if (!UnpackTransportSocket(socket, kUpstreamTlsContextType, "UpstreamTlsContext", extension,
                             proto, errors)) {
    return std::nullopt;
  }
  auto common_field = errors.Scope(".common_tls_context");
  CommonTlsContext tls = ParseCommonTlsContext(context, proto.common_tls_context(), errors);
  // A29: a client must be able to verify the server.
  if (tls.certificate_validation_context.ca_certificate_provider_instance.empty()) {
    errors.Add("no CA certificate provider instance configured");
  }
  // Ignored, as A29 says: sni, allow_renegotiation, max_session_keys.
  if (errors.size() != errors_before) return std::nullopt;
  return tls;
}

std::optional<DownstreamTlsContext> ParseDownstreamTlsContext(
    const XdsDecodeContext& context, const envoy::config::core::v3::TransportSocket& socket,
    ValidationErrors& errors) {
  const size_t errors_before = errors.size();
  auto field = errors.Scope(".typed_config");
  XdsExtension extension;
  tls_v3::DownstreamTlsContext proto;
  if (!UnpackTransportSocket(socket, kDownstreamTlsContextType, "DownstreamTlsContext", extension,
                             proto, errors)) {
    return std::nullopt;
  }
  DownstreamTlsContext tls;
  tls.require_client_certificate =
      proto.has_require_client_certificate() && proto.require_client_certificate().value();
  {
    auto common_field = errors.Scope(".common_tls_context");
    tls.common_tls_context = ParseCommonTlsContext(context, proto.common_tls_context(), errors);
    const CommonTlsContext& common = tls.common_tls_context;
    const auto& validation = common.certificate_validation_context;
    // A29: a server always presents a certificate.
    if (common.tls_certificate_provider_instance.empty()) {
      errors.Add("TLS configuration provided but no tls_certificate_provider_instance found");
    }
    // A29: a validation context (to verify clients with) needs the roots.
    const bool has_validation_context =
        proto.common_tls_context().has_validation_context() ||
        proto.common_tls_context().has_combined_validation_context();
    if (validation.ca_certificate_provider_instance.empty()) {
      if (tls.require_client_certificate) {
        errors.Add(
            "TLS configuration requires client certificates but no certificate provider "
            "instance specified for validation");
      } else if (has_validation_context) {
        errors.Add("validation context configured but no ca_certificate_provider_instance found");
      }
    }
    // A29 lets a server support SAN matchers or NACK them; a uxds server
    // does not check client SANs, so it must not accept a config that asks to.
    if (!validation.match_subject_alt_names.empty()) {
      errors.Add("match_subject_alt_names not supported on servers");
    }
  }
  // A29: NACKed rather than ignored, which would be less secure than asked.
  if (proto.has_require_sni() && proto.require_sni().value()) {
    auto sni_field = errors.Scope(".require_sni");
    errors.Add("field unsupported");
  }
  if (proto.ocsp_staple_policy() != tls_v3::DownstreamTlsContext::LENIENT_STAPLING) {
    auto ocsp_field = errors.Scope(".ocsp_staple_policy");
    errors.Add("value must be LENIENT_STAPLING");
  }
  // Ignored, as A29 says: session_ticket_keys (and its SDS config),
  // disable_stateless_session_resumption, session_timeout.
  if (errors.size() != errors_before) return std::nullopt;
  return tls;
}

ResourceJson TlsContextJson(const CommonTlsContext& tls) {
  ResourceJson json = ResourceJson::object();
  if (!tls.tls_certificate_provider_instance.empty()) {
    json["tls_certificate_provider_instance"] = tls.tls_certificate_provider_instance.instance_name;
  }
  const auto& validation = tls.certificate_validation_context;
  if (!validation.ca_certificate_provider_instance.empty()) {
    json["ca_certificate_provider_instance"] =
        validation.ca_certificate_provider_instance.instance_name;
  }
  if (!validation.match_subject_alt_names.empty()) {
    ResourceJson matchers = ResourceJson::array();
    for (const StringMatcher& matcher : validation.match_subject_alt_names) {
      matchers.push_back(matcher.ToString());
    }
    json["match_subject_alt_names"] = std::move(matchers);
  }
  return json;
}

ResourceJson DownstreamTlsContextJson(const DownstreamTlsContext& tls) {
  ResourceJson json = TlsContextJson(tls.common_tls_context);
  if (tls.require_client_certificate) json["require_client_certificate"] = true;
  return json;
}

std::string CommonTlsContext::ToJson() const { return TlsContextJson(*this).dump(); }

std::string DownstreamTlsContext::ToJson() const { return DownstreamTlsContextJson(*this).dump(); }

}  // namespace uxds
