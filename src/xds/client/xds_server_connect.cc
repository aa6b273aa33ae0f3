#include "xds/client/xds_server_connect.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/socket_address.h"
#include "uxds/log.h"

namespace uxds::xds_internal {

namespace {

// Debian's CA bundle: the roots of "tls" channel credentials without a
// ca_certificate_file (the bootstrap says "the system's default roots").
constexpr const char* kSystemRootsFile = "/etc/ssl/certs/ca-certificates.crt";

struct HostPort {
  std::string host;  // without brackets
  std::string port;
  std::string authority;  // host:port as given
};

// server_uri is a gRPC target: "host:port", "dns:///host:port", "[::1]:port".
HostPort SplitTarget(std::string_view target) {
  for (std::string_view scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (target.starts_with(scheme)) {
      target.remove_prefix(scheme.size());
      break;
    }
  }
  HostPort result;
  result.authority = std::string(target);
  if (target.starts_with('[')) {
    const size_t close = target.find(']');
    result.host =
        std::string(target.substr(1, close == std::string_view::npos ? target.npos : close - 1));
    if (close != std::string_view::npos && close + 1 < target.size() && target[close + 1] == ':') {
      result.port = std::string(target.substr(close + 2));
    }
  } else if (const size_t colon = target.rfind(':'); colon != std::string_view::npos) {
    result.host = std::string(target.substr(0, colon));
    result.port = std::string(target.substr(colon + 1));
  } else {
    result.host = std::string(target);
  }
  if (result.port.empty()) {
    // gRPC's default port.
    result.port = "443";
    result.authority =
        (result.host.find(':') != std::string::npos ? "[" + result.host + "]" : result.host) +
        ":443";
  }
  return result;
}

}  // namespace

Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> ConnectToXdsServer(
    Loop& loop, HostResolver& resolver, const XdsServerConfig& server,
    const XdsClientOptions& client_options, size_t max_receive_message_size, XdsServerTls& tls) {
  const HostPort target = SplitTarget(server.server_uri);
  // Off the loop: a lookup can take seconds. A name that does not resolve
  // is a connectivity failure like a refused connection (A57, A71).
  StatusOr<std::vector<SocketAddress>> addresses =
      co_await resolver.Resolve(target.host, target.port);
  if (!addresses.ok()) co_return addresses.status();
  http2::ClientConnectionOptions options;
  options.authority = target.authority;
  options.connect_timeout = client_options.connect_timeout;
  options.keepalive_time = client_options.keepalive_time;
  options.keepalive_timeout = client_options.keepalive_timeout;
  options.max_receive_message_size = max_receive_message_size;
  const XdsChannelCredentials& credentials = server.channel_credentials;
  if (credentials.type == XdsChannelCredentials::kTls) {
    if (tls.provider == nullptr) {
      FileWatcherConfig files;
      files.ca_certificate_file = credentials.ca_certificate_file.empty()
                                      ? kSystemRootsFile
                                      : credentials.ca_certificate_file;
      files.certificate_file = credentials.certificate_file;
      files.private_key_file = credentials.private_key_file;
      files.refresh_interval = credentials.refresh_interval;
      tls.provider = FileWatcherCertificateProvider::Shared(files);
    }
    // A65: the files are read on the provider's thread, never on this loop.
    if (Status read = co_await tls.provider->WaitForFirstRead(loop); !read.ok()) co_return read;
    std::shared_ptr<const CertificateMaterial> material = tls.provider->Current();
    if (material == nullptr) {
      // No good read yet: the next attempt (after backoff) reads the files
      // again rather than waiting for the interval, which may be long, or
      // for inotify, which may not see the directory.
      tls.provider->RefreshNow();
      co_return tls.provider->last_error();
    }
    if ((tls.context == nullptr || tls.context->material() != material.get()) &&
        material->version != tls.rejected_version) {
      // New material (or the first): later connections use it, the open
      // one keeps the session it has.
      TlsClientConfig config;
      config.ca_certificate_file = tls.provider->config().ca_certificate_file;
      config.certificate_file = credentials.certificate_file;
      config.private_key_file = credentials.private_key_file;
      const uint64_t version = material->version;
      StatusOr<std::shared_ptr<TlsClientContext>> context =
          TlsClientContext::FromMaterial(std::move(material), config);
      if (context.ok()) {
        tls.context = *std::move(context);
      } else if (tls.context == nullptr) {
        co_return context.status();
      } else {
        // A65: a rotation that cannot be used keeps the previous
        // certificates, as a bad file does.
        tls.rejected_version = version;
        Log(LogSeverity::kWarning,
            "xDS server " + server.server_uri +
                ": keeping the previous TLS credentials: " + context.status().ToString());
      }
    }
    options.tls = tls.context;
    options.tls_server_name = target.host;
  }
  // Every address in the resolver's order (RFC 6724), as gRPC's pick_first
  // does: "localhost" may give ::1 first while the server listens on
  // 127.0.0.1 only.
  Status failures;
  for (const SocketAddress& address : *addresses) {
    StatusOr<std::unique_ptr<http2::ClientConnection>> connection =
        co_await http2::ClientConnection::Connect(loop, address, options);
    if (connection.ok() || addresses->size() == 1) co_return connection;
    const std::string failure = address.ToString() + ": " + connection.status().message();
    failures = failures.ok() ? Status(connection.status().code(), failure)
                             : Status(failures.code(), failures.message() + "; " + failure);
    CancelState* cancel = co_await CurrentCancelState();
    if (cancel != nullptr && cancel->cancelled()) break;
  }
  co_return failures;
}

}  // namespace uxds::xds_internal
