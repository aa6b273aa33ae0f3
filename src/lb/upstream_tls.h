// How a channel's connections to one cluster's endpoints are secured: by
// the Cluster's xDS security config (A29's UpstreamTlsContext, with
// certificates from the bootstrap's certificate providers), or by a fixed
// TLS context (the fallback of xDS credentials, or a channel's TLS
// credentials). Plaintext connections have none.
//
// Immutable once made, and shared by every subchannel and loop connection
// made with it; Secure() may run on any loop.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "http2/client_connection.h"
#include "http2/client_connection_options.h"
#include "runtime/socket_address.h"
#include "tls/certificate_provider.h"
#include "tls/tls_context.h"
#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/resources/tls_context.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "xds/certificate_providers.h"

namespace uxds {

class UpstreamTls {
 public:
  // A29: the roots and identity come from the instances `config` names in
  // `bootstrap`, and the server's SANs must pass its matchers instead of a
  // host name check. An instance the bootstrap lacks (the decoder NACKs
  // such a Cluster, so only a bootstrap built in code can) fails every
  // connection with the reason.
  static std::shared_ptr<const UpstreamTls> FromXds(const Bootstrap& bootstrap,
                                                    const CommonTlsContext& config);
  // Every connection uses `context`, and the server's certificate must
  // match `server_name` (empty: the address connected to).
  static std::shared_ptr<const UpstreamTls> Fixed(std::shared_ptr<TlsClientContext> context,
                                                  std::string server_name);

  // Tells subchannels to the same address apart: connections made with
  // equal keys are secured alike and may be shared.
  const std::string& key() const { return key_; }

  // On `loop`: sets `options.tls` (and the name the server is checked
  // against) for a new connection. Waits for a provider's first read of
  // its files; UNAVAILABLE, naming the instance, when it has no usable
  // material. A context is built once per pair of material versions.
  Task<Status> Secure(Loop& loop, http2::ClientConnectionOptions& options) const;

  UpstreamTls(const UpstreamTls&) = delete;
  UpstreamTls& operator=(const UpstreamTls&) = delete;

 private:
  UpstreamTls() = default;
  StatusOr<std::shared_ptr<TlsClientContext>> ContextFrom(
      std::shared_ptr<const CertificateMaterial> roots,
      std::shared_ptr<const CertificateMaterial> identity) const;

  std::string key_;
  std::string server_name_;
  // Fixed(): the context; FromXds(): null.
  std::shared_ptr<TlsClientContext> fixed_;
  // FromXds(): the roots' instance, and the identity's when one is named.
  std::optional<CertificateInstance> roots_;
  std::optional<CertificateInstance> identity_;
  TlsClientConfig config_;  // FromXds(): ALPN and the SAN check
  // The newest context built, and what it was built from; any loop.
  mutable std::mutex mu_;
  mutable std::shared_ptr<TlsClientContext> built_;
};

// A connection to `address`, secured by `tls` when it is not null (A29: the
// attempt first gets its TLS context, and may wait for a certificate
// provider's first read of its files).
Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> ConnectSecured(
    Loop& loop, const SocketAddress& address, http2::ClientConnectionOptions options,
    const UpstreamTls* tls);

}  // namespace uxds
