// A29's transport security config, as a Cluster's UpstreamTlsContext or a
// server filter chain's DownstreamTlsContext carries it: which of the
// bootstrap's certificate_providers instances give the identity certificate
// and the CA roots, and the SAN matchers a peer's certificate must pass.
// Parsed and validated when the resource is decoded (unknown instance names
// and fields whose absence would weaken security are NACKed there).
#pragma once

#include <string>
#include <vector>

#include "uxds/resources/matchers.h"

namespace uxds {

struct CommonTlsContext {
  // envoy CertificateProviderPluginInstance: an entry of the bootstrap's
  // certificate_providers. An empty instance_name means none.
  struct CertificateProviderPluginInstance {
    std::string instance_name;
    // Opaque to the file_watcher plugin (A29: ignored).
    std::string certificate_name;

    bool empty() const { return instance_name.empty(); }
    friend bool operator==(const CertificateProviderPluginInstance&,
                           const CertificateProviderPluginInstance&) = default;
  };

  struct CertificateValidationContext {
    // The roots a peer's chain is verified against.
    CertificateProviderPluginInstance ca_certificate_provider_instance;
    // A29 "server authorization": a peer certificate passes if one of its
    // DNS, URI, email or IP SANs matches one of these; none: any passes.
    std::vector<StringMatcher> match_subject_alt_names;

    friend bool operator==(const CertificateValidationContext&,
                           const CertificateValidationContext&) = default;
  };

  // This side's certificate and key (none: no identity is presented).
  CertificateProviderPluginInstance tls_certificate_provider_instance;
  CertificateValidationContext certificate_validation_context;

  // {"tls_certificate_provider_instance":"id","ca_certificate_provider_instance":"ca",
  //  "match_subject_alt_names":["exact:a.example.com"]}, for `uxds watch`.
  std::string ToJson() const;

  friend bool operator==(const CommonTlsContext&, const CommonTlsContext&) = default;
};

// A29: a server filter chain's DownstreamTlsContext. Its identity instance
// is always set; when the validation context names a CA instance, client
// certificates are asked for and verified against it.
struct DownstreamTlsContext {
  CommonTlsContext common_tls_context;
  // A handshake without a (valid) client certificate fails. Decoded only
  // with a CA instance.
  bool require_client_certificate = false;

  // CommonTlsContext::ToJson() plus "require_client_certificate":true.
  std::string ToJson() const;

  friend bool operator==(const DownstreamTlsContext&, const DownstreamTlsContext&) = default;
};

}  // namespace uxds
