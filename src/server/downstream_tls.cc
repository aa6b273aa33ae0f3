#include "server/downstream_tls.h"

#include <utility>

#include "uxds/log.h"

namespace uxds::server {

std::shared_ptr<const DownstreamTls> DownstreamTls::FromXds(const Bootstrap& bootstrap,
                                                            const DownstreamTlsContext& config,
                                                            std::string chain) {
  auto tls = std::shared_ptr<DownstreamTls>(new DownstreamTls());
  tls->chain_ = std::move(chain);
  const CommonTlsContext& common = config.common_tls_context;
  tls->identity_.emplace(bootstrap, common.tls_certificate_provider_instance.instance_name);
  // Error texts about the material name the instances, not files.
  tls->config_.certificate_chain_file =
      "(certificate provider instance " + tls->identity_->name() + ")";
  tls->config_.private_key_file = tls->config_.certificate_chain_file;
  const auto& ca = common.certificate_validation_context.ca_certificate_provider_instance;
  if (!ca.empty()) {
    tls->roots_.emplace(bootstrap, ca.instance_name);
    tls->config_.ca_certificate_file = "(certificate provider instance " + ca.instance_name + ")";
  }
  tls->config_.require_client_certificate = config.require_client_certificate;
  return tls;
}

std::shared_ptr<const DownstreamTls> DownstreamTls::Fixed(
    std::shared_ptr<TlsServerContext> context) {
  auto tls = std::shared_ptr<DownstreamTls>(new DownstreamTls());
  tls->fixed_ = std::move(context);
  return tls;
}

StatusOr<std::shared_ptr<TlsServerContext>> DownstreamTls::ContextFrom(
    std::shared_ptr<const CertificateMaterial> identity,
    std::shared_ptr<const CertificateMaterial> roots) const {
  std::lock_guard lock(mu_);
  if (built_ != nullptr && built_->identity_material() == identity.get() &&
      built_->roots_material() == roots.get()) {
    return built_;
  }
  StatusOr<std::shared_ptr<TlsServerContext>> context =
      TlsServerContext::FromMaterial(std::move(identity), std::move(roots), config_);
  if (!context.ok()) return Status(StatusCode::kUnavailable, context.status().message());
  built_ = *context;
  return built_;
}

Task<StatusOr<std::shared_ptr<TlsServerContext>>> DownstreamTls::Context(Loop& loop) const {
  if (fixed_ != nullptr) co_return fixed_;
  StatusOr<std::shared_ptr<TlsServerContext>> context = co_await Build(loop);
  if (!context.ok() && context.status().code() != StatusCode::kCancelled) {
    std::string message(context.status().message());
    bool is_new = false;
    {
      std::lock_guard lock(mu_);
      is_new = message != logged_failure_;
      if (is_new) logged_failure_ = message;
    }
    if (is_new) {
      Log(LogSeverity::kWarning, "xDS-enabled server: filter chain \"" + chain_ +
                                     "\" closes its connections unserved: " + message);
    }
  }
  co_return context;
}

Task<StatusOr<std::shared_ptr<TlsServerContext>>> DownstreamTls::Build(Loop& loop) const {
  StatusOr<std::shared_ptr<const CertificateMaterial>> identity =
      co_await identity_->Material(loop);
  if (!identity.ok()) co_return identity.status();
  if ((*identity)->identity_chain.empty()) {
    co_return UnavailableError("certificate provider instance \"" + identity_->name() +
                               "\" has no identity certificate");
  }
  std::shared_ptr<const CertificateMaterial> roots;
  if (roots_.has_value()) {
    StatusOr<std::shared_ptr<const CertificateMaterial>> read = co_await roots_->Material(loop);
    if (!read.ok()) co_return read.status();
    if ((*read)->roots.empty()) {
      co_return UnavailableError("certificate provider instance \"" + roots_->name() +
                                 "\" has no CA certificates");
    }
    roots = *std::move(read);
  }
  co_return ContextFrom(*std::move(identity), std::move(roots));
}

StatusOr<std::shared_ptr<const DownstreamTls>> FallbackTlsOf(const ServerCredentials& credentials,
                                                             bool& xds_security) {
  using Kind = ServerCredentials::Kind;
  xds_security = false;
  const ServerCredentials* plain = &credentials;
  if (plain->kind == Kind::kXds) {
    xds_security = true;
    plain = plain->fallback.get();
    if (plain == nullptr || plain->kind == Kind::kXds) {
      return InvalidArgumentError(
          "XdsServerOptions.credentials: the fallback of xDS credentials must be Insecure or Tls");
    }
  }
  if (plain->kind != Kind::kTls) return std::shared_ptr<const DownstreamTls>();
  TlsServerConfig config;
  config.certificate_chain_file = plain->tls.certificate_chain_file;
  config.private_key_file = plain->tls.private_key_file;
  config.ca_certificate_file = plain->tls.ca_certificate_file;
  config.require_client_certificate = plain->tls.require_client_certificate;
  StatusOr<std::shared_ptr<TlsServerContext>> context = TlsServerContext::Create(config);
  if (!context.ok()) {
    return InvalidArgumentError("XdsServerOptions.credentials: " +
                                std::string(context.status().message()));
  }
  return DownstreamTls::Fixed(*std::move(context));
}

}  // namespace uxds::server
