// libFuzzer target: Bootstrap::FromJson() on arbitrary text. Checked for
// every input: no crash; an error is INVALID_ARGUMENT and is either the JSON
// parser's or names the bootstrap field it is about (a top-level key, or the
// one top-level error "is not an object"); a bootstrap that parses passes
// Validate() (the checks a bootstrap built in code gets), has servers, parses
// the same twice, and its listener name templates and node expand without
// crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "envoy/config/core/v3/base.pb.h"
#include "uxds/bootstrap.h"
#include "xds/bootstrap.h"

namespace {

void Require(bool property) {
  if (!property) __builtin_trap();
}

// The top-level bootstrap keys an error can be about.
bool NamesBootstrapField(std::string_view message) {
  constexpr std::string_view kPrefix = "errors validating bootstrap: [";
  if (!message.starts_with(kPrefix)) return false;
  message.remove_prefix(kPrefix.size());
  if (message == "error:is not an object]") return true;
  if (!message.starts_with("field:")) return false;
  message.remove_prefix(6);
  for (std::string_view key :
       {"xds_servers", "node", "authorities", "client_default_listener_resource_name_template",
        "server_listener_resource_name_template", "certificate_providers"}) {
    if (message.starts_with(key) && message.size() > key.size() &&
        (message[key.size()] == ' ' || message[key.size()] == '.' || message[key.size()] == '[')) {
      return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto bootstrap = uxds::Bootstrap::FromJson(text);
  if (!bootstrap.ok()) {
    const uxds::Status& status = bootstrap.status();
    Require(status.code() == uxds::StatusCode::kInvalidArgument);
    const std::string& message = status.message();
    Require(message.starts_with("not valid JSON: ") || NamesBootstrapField(message));
    return 0;
  }
  Require(!bootstrap->xds_servers.empty());
  Require(bootstrap->Validate().ok());
  auto again = uxds::Bootstrap::FromJson(text);
  Require(again.ok() && *again == *bootstrap);
  for (const auto& [name, authority] : bootstrap->authorities) {
    Require(bootstrap->FindAuthority(name) == &authority);
    auto listener = bootstrap->ClientListenerResourceName(name, "target/%s/x");
    Require(listener.ok() && !listener->empty());
  }
  Require(bootstrap->ClientListenerResourceName("", "t").ok());
  auto server_listener = bootstrap->ServerListenerResourceName("[::]:8080");
  Require(server_listener.ok() == !bootstrap->server_listener_resource_name_template.empty());
  envoy::config::core::v3::Node node;
  uxds::PopulateNodeProto(bootstrap->node, "uxds", "0", &node);
  Require(node.id() == bootstrap->node.id);
  return 0;
}
