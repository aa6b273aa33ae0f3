// How an xDS-enabled server secures the connections one filter chain
// accepts: by the chain's DownstreamTlsContext (A29), with certificates from
// the bootstrap's certificate providers, or by a fixed TLS context (the
// fallback of xDS server credentials, or TLS server credentials). Plaintext
// chains have none.
//
// Immutable once made, and shared by every serving loop; Context() may run
// on any of them.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "tls/tls_context.h"
#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/resources/tls_context.h"
#include "uxds/server_credentials.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "xds/certificate_providers.h"

namespace uxds::server {

class DownstreamTls {
 public:
  // A29: the identity from the instance `config` names, client
  // certificates verified against its CA instance when it names one.
  // `chain` names the filter chain in log lines.
  static std::shared_ptr<const DownstreamTls> FromXds(const Bootstrap& bootstrap,
                                                      const DownstreamTlsContext& config,
                                                      std::string chain);
  static std::shared_ptr<const DownstreamTls> Fixed(std::shared_ptr<TlsServerContext> context);

  // On `loop`: the context for a new connection's handshake, from the
  // providers' newest material (built once per pair of material versions,
  // so a new certificate applies to the connections accepted after it).
  // Waits for a provider's first read (bounded by that file read, not by
  // the handshake timeout); UNAVAILABLE naming the instance when it has no
  // usable material, which is logged as a warning once per new reason (the
  // client only sees its connection closed).
  Task<StatusOr<std::shared_ptr<TlsServerContext>>> Context(Loop& loop) const;

  DownstreamTls(const DownstreamTls&) = delete;
  DownstreamTls& operator=(const DownstreamTls&) = delete;

 private:
  DownstreamTls() = default;
  // Context() without the logging.
  Task<StatusOr<std::shared_ptr<TlsServerContext>>> Build(Loop& loop) const;
  StatusOr<std::shared_ptr<TlsServerContext>> ContextFrom(
      std::shared_ptr<const CertificateMaterial> identity,
      std::shared_ptr<const CertificateMaterial> roots) const;

  // Fixed(): the context; FromXds(): null.
  std::shared_ptr<TlsServerContext> fixed_;
  std::optional<CertificateInstance> identity_;
  std::optional<CertificateInstance> roots_;
  TlsServerConfig config_;  // FromXds(): ALPN, require_client_certificate
  std::string chain_;
  // The newest context built, and what it was built from; any loop.
  mutable std::mutex mu_;
  mutable std::shared_ptr<TlsServerContext> built_;
  // The last failure logged (under mu_): a new one is logged, a repeat not.
  mutable std::string logged_failure_;
};

// The fixed TLS context of Tls credentials (or of Xds credentials' TLS
// fallback), null for plaintext; sets `xds_security` for Xds credentials.
// INVALID_ARGUMENT names the field: a file that cannot be used, an Xds
// fallback that is itself Xds.
StatusOr<std::shared_ptr<const DownstreamTls>> FallbackTlsOf(const ServerCredentials& credentials,
                                                             bool& xds_security);

}  // namespace uxds::server
