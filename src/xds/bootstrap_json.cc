// Bootstrap::FromJson: gRPC's bootstrap format read with gRPC C++'s JSON
// rules. A missing required field is "field not present", a value of the
// wrong type "is not a string" (object, array, boolean), unknown fields are
// ignored, and every problem is collected before failing.
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xds/bootstrap.h"
#include "xds/certificate_providers.h"
#include "xds/validation_errors.h"

namespace uxds {
namespace {

using Json = nlohmann::json;

// The member `name` of `object` (a JSON object), or nullptr. A missing
// required member is reported at the member's path; the caller has scoped
// `errors` to the object.
const Json* FindMember(const Json& object, std::string_view name, bool required,
                       ValidationErrors& errors) {
  auto it = object.find(std::string(name));
  if (it != object.end()) return &*it;
  if (required) {
    auto field = errors.Scope(std::string(".").append(name));
    errors.Add("field not present");
  }
  return nullptr;
}

// Reads a string member into *out; true if it was present and a string.
bool ReadString(const Json& object, std::string_view name, bool required, ValidationErrors& errors,
                std::string* out) {
  const Json* value = FindMember(object, name, required, errors);
  if (value == nullptr) return false;
  if (!value->is_string()) {
    auto field = errors.Scope(std::string(".").append(name));
    errors.Add("is not a string");
    return false;
  }
  *out = value->get<std::string>();
  return true;
}

JsonValue ToJsonValue(const Json& json) {
  switch (json.type()) {
    case Json::value_t::boolean:
      return JsonValue{json.get<bool>()};
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return JsonValue{json.get<double>()};
    case Json::value_t::string:
      return JsonValue{json.get<std::string>()};
    case Json::value_t::array: {
      JsonValue::Array array;
      array.reserve(json.size());
      for (const Json& element : json) array.push_back(ToJsonValue(element));
      return JsonValue{std::move(array)};
    }
    case Json::value_t::object: {
      JsonValue::Object object;
      for (const auto& [key, member] : json.items()) object.emplace(key, ToJsonValue(member));
      return JsonValue{std::move(object)};
    }
    default:  // null; binary and discarded values do not come out of parse()
      return JsonValue{};
  }
}

// A channel_creds entry's "config" object for a supported type; reports at
// the entry's ".config".
XdsChannelCredentials ParseCredentialsConfig(std::string_view type, const Json* config,
                                             ValidationErrors& errors) {
  XdsChannelCredentials credentials;
  credentials.type = std::string(type);
  if (type != XdsChannelCredentials::kTls || config == nullptr) return credentials;
  auto field = errors.Scope(".config");
  const bool has_certificate =
      ReadString(*config, "certificate_file", false, errors, &credentials.certificate_file);
  const bool has_key =
      ReadString(*config, "private_key_file", false, errors, &credentials.private_key_file);
  ReadString(*config, "ca_certificate_file", false, errors, &credentials.ca_certificate_file);
  if (const Json* interval = FindMember(*config, "refresh_interval", false, errors)) {
    // A65: "If unset, defaults to "600s"".
    auto interval_field = errors.Scope(".refresh_interval");
    const std::string text = interval->is_string() ? interval->get<std::string>() : std::string();
    if (auto parsed = ParseRefreshInterval(interval->is_string() ? &text : nullptr, errors,
                                           RefreshClampLog::kLog)) {
      credentials.refresh_interval = *parsed;
    }
  }
  // gRPC C++ checks presence, not emptiness, for this rule.
  bootstrap_internal::CheckTlsCertificatePair(has_certificate, has_key, errors);
  return credentials;
}

// "channel_creds": the first entry of a supported type is used; every entry
// of a supported type is validated; entries of other types are skipped, as
// gRPC does.
std::optional<XdsChannelCredentials> ParseChannelCredsList(const Json& server,
                                                           ValidationErrors& errors) {
  const Json* list = FindMember(server, "channel_creds", true, errors);
  if (list == nullptr) return std::nullopt;
  auto field = errors.Scope(".channel_creds");
  if (!list->is_array()) {
    errors.Add("is not an array");
    return std::nullopt;
  }
  std::optional<XdsChannelCredentials> chosen;
  for (size_t i = 0; i < list->size(); ++i) {
    auto entry_field = errors.Scope("[" + std::to_string(i) + "]");
    const Json& entry = (*list)[i];
    if (!entry.is_object()) {
      errors.Add("is not an object");
      continue;
    }
    std::string type;
    const bool has_type = ReadString(entry, "type", true, errors, &type);
    const Json* config = FindMember(entry, "config", false, errors);
    if (config != nullptr && !config->is_object()) {
      auto config_field = errors.Scope(".config");
      errors.Add("is not an object");
      config = nullptr;
    }
    if (!has_type) continue;
    if (type != XdsChannelCredentials::kInsecure && type != XdsChannelCredentials::kTls) {
      continue;
    }
    XdsChannelCredentials credentials = ParseCredentialsConfig(type, config, errors);
    if (!chosen) chosen = std::move(credentials);
  }
  if (!chosen && !errors.FieldOrSubfieldsHaveErrors()) errors.Add("no known creds type found");
  return chosen;
}

// One element of an "xds_servers" list; `errors` is scoped to it.
XdsServerConfig ParseXdsServer(const Json& json, ValidationErrors& errors) {
  XdsServerConfig server;
  if (!json.is_object()) {
    errors.Add("is not an object");
    return server;
  }
  ReadString(json, "server_uri", true, errors, &server.server_uri);
  if (auto credentials = ParseChannelCredsList(json, errors)) {
    server.channel_credentials = std::move(*credentials);
  }
  if (const Json* features = FindMember(json, "server_features", false, errors)) {
    auto field = errors.Scope(".server_features");
    if (!features->is_array()) {
      errors.Add("is not an array");
    } else {
      // Unknown features and non-string entries are ignored, as in gRPC.
      for (const Json& feature : *features) {
        if (!feature.is_string()) continue;
        const auto& name = feature.get_ref<const std::string&>();
        if (name == "fail_on_data_errors") server.fail_on_data_errors = true;
        if (name == "resource_timer_is_transient_error") {
          server.resource_timer_is_transient_error = true;
        }
        // A88: "ignore_resource_deletion" is deprecated and has no effect.
      }
    }
  }
  if (!errors.FieldOrSubfieldsHaveErrors()) bootstrap_internal::CheckXdsServer(server, errors);
  return server;
}

// An "xds_servers" list; `errors` is scoped to it.
std::vector<XdsServerConfig> ParseXdsServerList(const Json& json, ValidationErrors& errors) {
  std::vector<XdsServerConfig> servers;
  if (!json.is_array()) {
    errors.Add("is not an array");
    return servers;
  }
  servers.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    auto field = errors.Scope("[" + std::to_string(i) + "]");
    servers.push_back(ParseXdsServer(json[i], errors));
  }
  return servers;
}

XdsNode ParseNode(const Json& json, ValidationErrors& errors) {
  XdsNode node;
  if (!json.is_object()) {
    errors.Add("is not an object");
    return node;
  }
  ReadString(json, "id", false, errors, &node.id);
  ReadString(json, "cluster", false, errors, &node.cluster);
  if (const Json* locality = FindMember(json, "locality", false, errors)) {
    auto field = errors.Scope(".locality");
    if (!locality->is_object()) {
      errors.Add("is not an object");
    } else {
      ReadString(*locality, "region", false, errors, &node.locality.region);
      ReadString(*locality, "zone", false, errors, &node.locality.zone);
      ReadString(*locality, "sub_zone", false, errors, &node.locality.sub_zone);
    }
  }
  if (const Json* metadata = FindMember(json, "metadata", false, errors)) {
    auto field = errors.Scope(".metadata");
    if (!metadata->is_object()) {
      errors.Add("is not an object");
    } else {
      node.metadata = std::get<JsonValue::Object>(ToJsonValue(*metadata).value);
    }
  }
  return node;
}

std::string MapKeyScope(const std::string& key) { return "[\"" + key + "\"]"; }

std::map<std::string, XdsAuthority, std::less<>> ParseAuthorities(const Json& json,
                                                                  ValidationErrors& errors) {
  std::map<std::string, XdsAuthority, std::less<>> authorities;
  if (!json.is_object()) {
    errors.Add("is not an object");
    return authorities;
  }
  for (const auto& [name, entry] : json.items()) {
    auto field = errors.Scope(MapKeyScope(name));
    if (!entry.is_object()) {
      errors.Add("is not an object");
      continue;
    }
    XdsAuthority authority;
    if (ReadString(entry, "client_listener_resource_name_template", false, errors,
                   &authority.client_listener_resource_name_template)) {
      auto template_field = errors.Scope(".client_listener_resource_name_template");
      bootstrap_internal::CheckAuthorityListenerTemplate(
          name, authority.client_listener_resource_name_template, errors);
    }
    if (const Json* servers = FindMember(entry, "xds_servers", false, errors)) {
      // A47: an empty list means the top-level servers, so it is allowed.
      auto servers_field = errors.Scope(".xds_servers");
      authority.xds_servers = ParseXdsServerList(*servers, errors);
    }
    authorities.emplace(name, std::move(authority));
  }
  return authorities;
}

std::map<std::string, CertificateProviderConfig, std::less<>> ParseCertificateProviders(
    const Json& json, ValidationErrors& errors) {
  std::map<std::string, CertificateProviderConfig, std::less<>> providers;
  if (!json.is_object()) {
    errors.Add("is not an object");
    return providers;
  }
  for (const auto& [name, entry] : json.items()) {
    auto field = errors.Scope(MapKeyScope(name));
    if (!entry.is_object()) {
      errors.Add("is not an object");
      continue;
    }
    CertificateProviderConfig provider;
    ReadString(entry, "plugin_name", true, errors, &provider.plugin_name);
    if (const Json* config = FindMember(entry, "config", false, errors)) {
      if (!config->is_object()) {
        auto config_field = errors.Scope(".config");
        errors.Add("is not an object");
      } else {
        provider.config_json = config->dump();
      }
    }
    // A29: the plugin and its config are checked now, as gRPC does: a
    // provider that cannot work fails the bootstrap, not a later handshake.
    if (!errors.FieldOrSubfieldsHaveErrors())
      CheckCertificateProvider(provider, errors, RefreshClampLog::kLog);
    providers.emplace(name, std::move(provider));
  }
  return providers;
}

// nlohmann's what() starts with "[json.exception.parse_error.101] "; the
// rest ("parse error at line 1, column 2: ...") is the useful part.
std::string ParseErrorDetail(const char* what) {
  std::string_view text(what);
  if (!text.empty() && text.front() == '[') {
    size_t end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return std::string(text);
}

}  // namespace

StatusOr<Bootstrap> Bootstrap::FromJson(std::string_view text) {
  Json json;
  // gRPC's JSON reader (GRPC_JSON_MAX_DEPTH) rejects documents nested
  // deeper than 255 levels. Beyond some depth the recursive walks below
  // (node metadata into JsonValue, then into a google.protobuf.Struct)
  // would overflow the stack; the parser itself keeps its stack on the heap,
  // and the callback discards every value past the limit.
  constexpr int kMaxDepth = 255;
  bool too_deep = false;
  const auto limit_depth = [&](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxDepth) {
      too_deep = true;
    }
    return !too_deep;
  };
  try {
    json = Json::parse(text.begin(), text.end(), limit_depth);
  } catch (const Json::exception& e) {
    return InvalidArgumentError("not valid JSON: " + ParseErrorDetail(e.what()));
  }
  if (too_deep) {
    return InvalidArgumentError("not valid JSON: nested more than " + std::to_string(kMaxDepth) +
                                " levels deep");
  }
  ValidationErrors errors;
  Bootstrap bootstrap;
  if (!json.is_object()) {
    errors.Add("is not an object");
    return errors.ToStatus("errors validating bootstrap");
  }
  if (const Json* servers = FindMember(json, "xds_servers", true, errors)) {
    auto field = errors.Scope(".xds_servers");
    bootstrap.xds_servers = ParseXdsServerList(*servers, errors);
    if (bootstrap.xds_servers.empty() && !errors.FieldHasErrors()) {
      errors.Add("must be non-empty");
    }
  }
  if (const Json* node = FindMember(json, "node", false, errors)) {
    auto field = errors.Scope(".node");
    bootstrap.node = ParseNode(*node, errors);
  }
  if (const Json* authorities = FindMember(json, "authorities", false, errors)) {
    auto field = errors.Scope(".authorities");
    bootstrap.authorities = ParseAuthorities(*authorities, errors);
  }
  ReadString(json, "client_default_listener_resource_name_template", false, errors,
             &bootstrap.client_default_listener_resource_name_template);
  ReadString(json, "server_listener_resource_name_template", false, errors,
             &bootstrap.server_listener_resource_name_template);
  if (const Json* providers = FindMember(json, "certificate_providers", false, errors)) {
    auto field = errors.Scope(".certificate_providers");
    bootstrap.certificate_providers = ParseCertificateProviders(*providers, errors);
  }
  if (!errors.ok()) return errors.ToStatus("errors validating bootstrap");
  return bootstrap;
}

}  // namespace uxds
