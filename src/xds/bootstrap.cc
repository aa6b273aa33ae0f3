// Bootstrap loading (file, environment), validation of bootstraps built in
// code, Listener resource names (A36, A47) and the Node proto. The JSON
// parser is in bootstrap_json.cc.
#include "xds/bootstrap.h"
#include "xds/certificate_providers.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <variant>

namespace uxds {

namespace bootstrap_internal {

// The server_uri forms the XdsClient can connect to: "host:port",
// "[v6]:port", optionally behind "dns:///", "dns:", "ipv4:" or "ipv6:". A
// port outside 1-65535 would otherwise reach getaddrinfo, which takes its
// low 16 bits; a unix socket or a DNS server of its own is not supported.
void CheckServerUri(std::string_view uri, ValidationErrors& errors) {
  for (std::string_view unsupported : {"unix:", "unix-abstract:", "vsock:"}) {
    if (uri.starts_with(unsupported)) {
      errors.Add("\"" + std::string(unsupported) +
                 "\" targets are not supported for xDS servers (use host:port)");
      return;
    }
  }
  if (uri.starts_with("dns://") && !uri.starts_with("dns:///")) {
    errors.Add("a DNS server in the target is not supported (use dns:///host:port)");
    return;
  }
  for (std::string_view scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (uri.starts_with(scheme)) {
      uri.remove_prefix(scheme.size());
      break;
    }
  }
  std::string_view port;
  if (uri.starts_with('[')) {
    const size_t close = uri.find(']');
    if (close == std::string_view::npos) {
      errors.Add("missing ']' after the IPv6 address");
      return;
    }
    if (close + 1 < uri.size()) {
      if (uri[close + 1] != ':') {
        errors.Add("expected ':' and a port after ']'");
        return;
      }
      port = uri.substr(close + 2);
    }
  } else if (const size_t colon = uri.rfind(':'); colon != std::string_view::npos) {
    if (uri.find(':') != colon) {
      errors.Add("an IPv6 address must be in brackets ([::1]:443)");
      return;
    }
    port = uri.substr(colon + 1);
    if (colon == 0) {
      errors.Add("the host is empty");
      return;
    }
  }
  if (uri.empty()) {
    errors.Add("the host is empty");
    return;
  }
  if (port.data() == nullptr) return;  // no port: gRPC's default, 443
  uint32_t value = 0;
  bool numeric = !port.empty() && port.size() <= 5;
  for (char c : port) {
    if (c < '0' || c > '9') numeric = false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (!numeric || value < 1 || value > 65535) {
    errors.Add("port \"" + std::string(port) + "\" is not a number from 1 to 65535");
  }
}

void CheckReadableFile(std::string_view field, const std::string& path, ValidationErrors& errors) {
  if (path.empty()) return;
  const std::string what = std::string(field) + " \"" + path + "\"";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errors.Add(what + " cannot be opened: " + std::strerror(errno));
    return;
  }
  char byte;
  const ssize_t n = read(fd, &byte, 1);
  const int read_errno = errno;
  close(fd);
  if (n < 0) {
    errors.Add(what + " cannot be read: " + std::strerror(read_errno));
  } else if (n == 0) {
    errors.Add(what + " is empty");
  }
}

void CheckXdsServer(const XdsServerConfig& server, ValidationErrors& errors) {
  // gRPC C++ accepts an empty server_uri and fails later, at connect time;
  // rejecting it here names the field instead.
  if (server.server_uri.empty()) {
    auto field = errors.Scope(".server_uri");
    errors.Add("must be non-empty");
  } else {
    auto field = errors.Scope(".server_uri");
    CheckServerUri(server.server_uri, errors);
  }
  auto field = errors.Scope(".channel_creds");
  const XdsChannelCredentials& credentials = server.channel_credentials;
  if (credentials.type == XdsChannelCredentials::kTls) {
    CheckTlsCertificatePair(!credentials.certificate_file.empty(),
                            !credentials.private_key_file.empty(), errors);
    // Found at load time rather than at each connection attempt, where a
    // missing file would only be retried with backoff, forever.
    CheckReadableFile("ca_certificate_file", credentials.ca_certificate_file, errors);
    CheckReadableFile("certificate_file", credentials.certificate_file, errors);
    CheckReadableFile("private_key_file", credentials.private_key_file, errors);
    if (credentials.refresh_interval < kMinRefreshInterval) {
      // The JSON form reads a shorter period as a second; one built in code
      // is told, rather than have its files read every millisecond.
      auto interval_field = errors.Scope(".refresh_interval");
      errors.Add("must be at least 1s");
    } else if (credentials.refresh_interval > FileWatcherConfig::kMaxRefreshInterval) {
      // The JSON form is capped when parsed; a bootstrap built in code is
      // held to the same bound (the reading thread's deadline arithmetic).
      auto interval_field = errors.Scope(".refresh_interval");
      errors.Add("must be at most a year");
    }
  } else if (credentials.type == XdsChannelCredentials::kInsecure) {
    if (!credentials.ca_certificate_file.empty() || !credentials.certificate_file.empty() ||
        !credentials.private_key_file.empty()) {
      errors.Add("certificate files are only used with \"tls\" credentials");
    }
  } else {
    errors.Add("unsupported credentials type \"" + credentials.type +
               "\" (supported: insecure, tls)");
  }
}

void CheckTlsCertificatePair(bool has_certificate_file, bool has_private_key_file,
                             ValidationErrors& errors) {
  if (has_certificate_file != has_private_key_file) {
    errors.Add(
        "fields \"certificate_file\" and \"private_key_file\" must be both set or both unset");
  }
}

void CheckAuthorityListenerTemplate(std::string_view authority_name, std::string_view name_template,
                                    ValidationErrors& errors) {
  // A47: "Must start with "xdstp://<authority_name>/""; empty means the default.
  std::string prefix = "xdstp://";
  prefix.append(authority_name);
  prefix += '/';
  if (!name_template.empty() && !name_template.starts_with(prefix)) {
    errors.Add("field must begin with \"" + prefix + "\"");
  }
}

}  // namespace bootstrap_internal

namespace {

constexpr std::string_view kErrorsPrefix = "errors validating bootstrap";

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    Status status = ErrnoToStatus(err, "cannot open");
    // A missing file is a configuration problem, not an unavailable service.
    if (err == ENOENT) return NotFoundError(status.message());
    return status;
  }
  std::string contents;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      Status status = ErrnoToStatus(errno, "cannot read");
      ::close(fd);
      return status;
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

// A47 / RFC 3986 section 3.3: pchar = unreserved / pct-encoded / sub-delims /
// ":" / "@"; '/' separates segments and stays as is.
bool IsPathCharacter(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("-._~!$&'()*+,;=:@/").find(c) != std::string_view::npos;
}

std::string PercentEncodePath(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (IsPathCharacter(c)) {
      out += c;
    } else {
      const auto byte = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

}  // namespace

std::string XdsServerConfig::Key() const {
  std::string key = "{server_uri=" + server_uri + ", channel_creds={type=";
  key += channel_credentials.type;
  auto append_if_set = [&key](std::string_view name, const std::string& value) {
    if (value.empty()) return;
    key += ", ";
    key += name;
    key += '=';
    key += value;
  };
  append_if_set("ca_certificate_file", channel_credentials.ca_certificate_file);
  append_if_set("certificate_file", channel_credentials.certificate_file);
  append_if_set("private_key_file", channel_credentials.private_key_file);
  if (channel_credentials.refresh_interval != XdsChannelCredentials{}.refresh_interval) {
    append_if_set("refresh_interval",
                  std::to_string(channel_credentials.refresh_interval.count()) + "ms");
  }
  key += '}';
  if (fail_on_data_errors || resource_timer_is_transient_error) {
    key += ", server_features=[";
    if (fail_on_data_errors) key += "fail_on_data_errors";
    if (fail_on_data_errors && resource_timer_is_transient_error) key += ", ";
    if (resource_timer_is_transient_error) key += "resource_timer_is_transient_error";
    key += ']';
  }
  key += '}';
  return key;
}

StatusOr<Bootstrap> Bootstrap::FromFile(const std::string& path) {
  const std::string context = "bootstrap file " + path;
  auto contents = ReadWholeFile(path);
  if (!contents.ok()) return contents.status().WithContext(context);
  auto bootstrap = FromJson(*contents);
  if (!bootstrap.ok()) return bootstrap.status().WithContext(context);
  return bootstrap;
}

StatusOr<Bootstrap> Bootstrap::FromEnvironment() {
  // As gRPC: the file first, then the inline config. An empty value counts as unset.
  const char* file = std::getenv(kFileEnvVar);
  if (file != nullptr && *file != '\0') return FromFile(file);
  const char* config = std::getenv(kConfigEnvVar);
  if (config != nullptr && *config != '\0') {
    auto bootstrap = FromJson(config);
    if (!bootstrap.ok()) {
      return bootstrap.status().WithContext(std::string("bootstrap from ") + kConfigEnvVar);
    }
    return bootstrap;
  }
  return FailedPreconditionError(std::string("no xDS bootstrap: neither ") + kFileEnvVar + " nor " +
                                 kConfigEnvVar + " is set");
}

Status Bootstrap::Validate() const {
  ValidationErrors errors;
  {
    auto field = errors.Scope(".xds_servers");
    if (xds_servers.empty()) errors.Add("must be non-empty");
    for (size_t i = 0; i < xds_servers.size(); ++i) {
      auto server_field = errors.Scope("[" + std::to_string(i) + "]");
      bootstrap_internal::CheckXdsServer(xds_servers[i], errors);
    }
  }
  {
    auto field = errors.Scope(".certificate_providers");
    for (const auto& [name, provider] : certificate_providers) {
      auto provider_field = errors.Scope("[\"" + name + "\"]");
      // Logged when the JSON was read; this runs for each XdsClient.
      CheckCertificateProvider(provider, errors, RefreshClampLog::kQuiet);
    }
  }
  auto field = errors.Scope(".authorities");
  for (const auto& [name, authority] : authorities) {
    auto authority_field = errors.Scope("[\"" + name + "\"]");
    {
      auto template_field = errors.Scope(".client_listener_resource_name_template");
      bootstrap_internal::CheckAuthorityListenerTemplate(
          name, authority.client_listener_resource_name_template, errors);
    }
    auto servers_field = errors.Scope(".xds_servers");
    for (size_t i = 0; i < authority.xds_servers.size(); ++i) {
      auto server_field = errors.Scope("[" + std::to_string(i) + "]");
      bootstrap_internal::CheckXdsServer(authority.xds_servers[i], errors);
    }
  }
  return errors.ToStatus(kErrorsPrefix);
}

const XdsAuthority* Bootstrap::FindAuthority(std::string_view name) const {
  auto it = authorities.find(name);
  return it == authorities.end() ? nullptr : &it->second;
}

StatusOr<std::string> Bootstrap::ClientListenerResourceName(std::string_view authority,
                                                            std::string_view target) const {
  if (authority.empty()) {
    // A47: defaults to "%s", the target itself (an old-style name).
    return ExpandListenerResourceNameTemplate(client_default_listener_resource_name_template.empty()
                                                  ? "%s"
                                                  : client_default_listener_resource_name_template,
                                              target);
  }
  const XdsAuthority* entry = FindAuthority(authority);
  if (entry == nullptr) {
    return InvalidArgumentError("authority \"" + std::string(authority) +
                                "\" is not in the bootstrap's authorities");
  }
  if (entry->client_listener_resource_name_template.empty()) {
    return ExpandListenerResourceNameTemplate(
        "xdstp://" + std::string(authority) + "/envoy.config.listener.v3.Listener/%s", target);
  }
  return ExpandListenerResourceNameTemplate(entry->client_listener_resource_name_template, target);
}

StatusOr<std::string> Bootstrap::ServerListenerResourceName(
    std::string_view listening_address) const {
  // A36: "There is no default; if unset, xDS-based server creation fails."
  if (server_listener_resource_name_template.empty()) {
    return FailedPreconditionError(
        "the bootstrap has no server_listener_resource_name_template, which an xDS-enabled "
        "server needs");
  }
  return ExpandListenerResourceNameTemplate(server_listener_resource_name_template,
                                            listening_address);
}

std::string ExpandListenerResourceNameTemplate(std::string_view name_template,
                                               std::string_view replacement) {
  std::string encoded;
  if (name_template.starts_with("xdstp:")) {
    encoded = PercentEncodePath(replacement);
    replacement = encoded;
  }
  std::string out;
  out.reserve(name_template.size() + replacement.size());
  for (size_t pos = 0;;) {
    const size_t token = name_template.find("%s", pos);
    if (token == std::string_view::npos) {
      out.append(name_template.substr(pos));
      return out;
    }
    out.append(name_template.substr(pos, token - pos));
    out.append(replacement);
    pos = token + 2;
  }
}

void JsonValueToProto(const JsonValue& json, google::protobuf::Value* proto) {
  struct Visitor {
    google::protobuf::Value* proto;
    void operator()(std::monostate) const { proto->set_null_value(google::protobuf::NULL_VALUE); }
    void operator()(bool value) const { proto->set_bool_value(value); }
    void operator()(double value) const { proto->set_number_value(value); }
    void operator()(const std::string& value) const { proto->set_string_value(value); }
    void operator()(const JsonValue::Array& array) const {
      auto* list = proto->mutable_list_value();
      for (const JsonValue& element : array) JsonValueToProto(element, list->add_values());
    }
    void operator()(const JsonValue::Object& object) const {
      JsonObjectToProto(object, proto->mutable_struct_value());
    }
  };
  std::visit(Visitor{proto}, json.value);
}

void JsonObjectToProto(const JsonValue::Object& json, google::protobuf::Struct* proto) {
  auto& fields = *proto->mutable_fields();
  for (const auto& [key, value] : json) JsonValueToProto(value, &fields[key]);
}

void PopulateNodeProto(const XdsNode& node, std::string_view user_agent_name,
                       std::string_view user_agent_version, envoy::config::core::v3::Node* proto) {
  proto->set_id(node.id);
  proto->set_cluster(node.cluster);
  const XdsLocality& locality = node.locality;
  if (!locality.region.empty() || !locality.zone.empty() || !locality.sub_zone.empty()) {
    auto* out = proto->mutable_locality();
    out->set_region(locality.region);
    out->set_zone(locality.zone);
    out->set_sub_zone(locality.sub_zone);
  }
  if (!node.metadata.empty()) JsonObjectToProto(node.metadata, proto->mutable_metadata());
  proto->set_user_agent_name(std::string(user_agent_name));
  proto->set_user_agent_version(std::string(user_agent_version));
}

}  // namespace uxds
