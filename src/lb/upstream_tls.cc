#include "lb/upstream_tls.h"

#include <utility>

#include "xds/certificate_providers.h"
#include "xds/resources/san_matching.h"

namespace uxds {

namespace {

// Every field that decides how a connection is secured, each
// length-prefixed, so two different configs never share a key (and so a
// subchannel): "<size>:<text>".
std::string SecurityKey(const CommonTlsContext& config) {
  std::string key;
  auto add = [&key](std::string_view field) {
    key += std::to_string(field.size());
    key += ':';
    key += field;
  };
  add(config.tls_certificate_provider_instance.instance_name);
  add(config.certificate_validation_context.ca_certificate_provider_instance.instance_name);
  for (const StringMatcher& matcher :
       config.certificate_validation_context.match_subject_alt_names) {
    add(std::to_string(static_cast<int>(matcher.type)) + (matcher.ignore_case ? "i" : "c"));
    add(matcher.type == StringMatcher::Type::kSafeRegex ? matcher.regex.pattern() : matcher.value);
  }
  return key;
}

}  // namespace

std::shared_ptr<const UpstreamTls> UpstreamTls::FromXds(const Bootstrap& bootstrap,
                                                        const CommonTlsContext& config) {
  auto tls = std::shared_ptr<UpstreamTls>(new UpstreamTls());
  tls->key_ = "xds:" + SecurityKey(config);
  tls->roots_.emplace(
      bootstrap,
      config.certificate_validation_context.ca_certificate_provider_instance.instance_name);
  if (!config.tls_certificate_provider_instance.empty()) {
    tls->identity_.emplace(bootstrap, config.tls_certificate_provider_instance.instance_name);
  }
  // Error texts about the material name the instances, not files.
  tls->config_.ca_certificate_file = "(certificate provider instance " + tls->roots_->name() + ")";
  if (tls->identity_.has_value()) {
    tls->config_.certificate_file =
        "(certificate provider instance " + tls->identity_->name() + ")";
    tls->config_.private_key_file = tls->config_.certificate_file;
  }
  // A29: the SAN matchers replace the host name check (none: any server
  // the roots vouch for).
  tls->config_.server_authorization =
      [matchers = config.certificate_validation_context.match_subject_alt_names](
          const std::vector<SubjectAltName>& sans) {
        return MatchesSubjectAltNames(sans, matchers);
      };
  return tls;
}

std::shared_ptr<const UpstreamTls> UpstreamTls::Fixed(std::shared_ptr<TlsClientContext> context,
                                                      std::string server_name) {
  auto tls = std::shared_ptr<UpstreamTls>(new UpstreamTls());
  tls->key_ = "tls:" + server_name;
  tls->server_name_ = std::move(server_name);
  tls->fixed_ = std::move(context);
  return tls;
}

StatusOr<std::shared_ptr<TlsClientContext>> UpstreamTls::ContextFrom(
    std::shared_ptr<const CertificateMaterial> roots,
    std::shared_ptr<const CertificateMaterial> identity) const {
  std::lock_guard lock(mu_);
  if (built_ != nullptr && built_->material() == roots.get() &&
      built_->identity_material() == identity.get()) {
    return built_;
  }
  StatusOr<std::shared_ptr<TlsClientContext>> context =
      TlsClientContext::FromMaterial(std::move(roots), std::move(identity), config_);
  if (!context.ok()) return Status(StatusCode::kUnavailable, context.status().message());
  built_ = *context;
  return built_;
}

Task<Status> UpstreamTls::Secure(Loop& loop, http2::ClientConnectionOptions& options) const {
  options.tls_server_name = server_name_;
  if (fixed_ != nullptr) {
    options.tls = fixed_;
    co_return OkStatus();
  }
  StatusOr<std::shared_ptr<const CertificateMaterial>> roots = co_await roots_->Material(loop);
  if (!roots.ok()) co_return roots.status();
  if ((*roots)->roots.empty()) {
    co_return UnavailableError("certificate provider instance \"" + roots_->name() +
                               "\" has no CA certificates");
  }
  std::shared_ptr<const CertificateMaterial> identity;
  if (identity_.has_value()) {
    StatusOr<std::shared_ptr<const CertificateMaterial>> read = co_await identity_->Material(loop);
    if (!read.ok()) co_return read.status();
    if ((*read)->identity_chain.empty()) {
      co_return UnavailableError("certificate provider instance \"" + identity_->name() +
                                 "\" has no identity certificate");
    }
    identity = *std::move(read);
  }
  StatusOr<std::shared_ptr<TlsClientContext>> context =
      ContextFrom(*std::move(roots), std::move(identity));
  if (!context.ok()) co_return context.status();
  options.tls = *std::move(context);
  co_return OkStatus();
}

Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> ConnectSecured(
    Loop& loop, const SocketAddress& address, http2::ClientConnectionOptions options,
    const UpstreamTls* tls) {
  if (tls != nullptr) {
    const Status secured = co_await tls->Secure(loop, options);
    if (!secured.ok()) {
      co_return Status(secured.code(), "securing the connection to " + address.ToString() + ": " +
                                           std::string(secured.message()));
    }
  }
  co_return co_await http2::ClientConnection::Connect(loop, address, options);
}

}  // namespace uxds
