// `uxds fcm`: which filter chain an xDS-enabled server gives each connection
// (A36 FilterChainMatch). One JSON object per input line, one JSON line out:
//
//   echo '{"listener":{...},"connections":[{"dest_ip":"10.0.0.1",...}]}' | uxds fcm
//
// The Listener goes through the server's own validation (the Listener
// decoder, so a Listener the server would NACK gives the NACK message) and
// the connections through its own FilterChainMatcher. The proto3 JSON is
// turned into bytes by Debian's python3-protobuf (tools/proto/), because uxds
// links protobuf-lite, which cannot read JSON.
#include <signal.h>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "commands.h"
#include "json_converter.h"
#include "json_lines.h"
#include "uxds/filter_chain_selector.h"
#include "uxds/status.h"
#include "uxds/xds_resources.h"

namespace uxds::tool {
namespace {

constexpr const char* kFcmSummary =
    "Prints the filter chain an xDS-enabled server's Listener gives each connection.";
constexpr const char* kFcmDetails =
    "Reads one JSON object per line (from FILE, else stdin):\n"
    "  {\"listener\": <an xDS-enabled server's Listener in proto3 JSON>,\n"
    "   \"connections\": [{\"dest_ip\":\"127.0.0.1\",\"dest_port\":8080,\n"
    "                    \"source_ip\":\"127.0.0.1\",\"source_port\":40000}, ...]}\n"
    "validates the Listener as the uxds server does and prints, for each\n"
    "connection, the filter chain the server gives it (A36 FilterChainMatch):\n"
    "  {\"accepted\":true,\"selections\":[\"<chain name>\", \"default\", null, ...]}\n"
    "(\"default\": the default_filter_chain; null: the connection is closed\n"
    "without a byte sent), or, for a Listener the server would NACK,\n"
    "  {\"accepted\":false,\"error\":\"<the NACK message>\"}\n"
    "or {\"error\":\"...\"} for a line that is not valid. Blank lines are skipped.\n"
    "\n"
    "  dest_ip, source_ip    IPv4 or IPv6 address (::ffff:a.b.c.d counts as IPv4)\n"
    "  source_port           0 to 65535\n"
    "  dest_port             0 to 65535, optional (A36: never used for matching)\n"
    "\n"
    "Reads the proto3 JSON with uxds-json-to-proto (installed with uxds).\n"
    "Exit status: 0 after the last line (a bad line does not stop it), 1 if FILE\n"
    "cannot be read or the JSON converter failed (each line then gets an error),\n"
    "2 on a usage error.\n";

constexpr std::string_view kListenerTypeUrl =
    "type.googleapis.com/envoy.config.listener.v3.Listener";

// Proto3 JSON -> serialized Listener, through uxds-json-to-proto
// (json_converter.h), a child that lives as long as the command.
class ListenerJsonConverter {
 public:
  // True once the converter could not be started or stopped answering.
  bool failed() const { return failed_; }

  StatusOr<std::string> ToBytes(const Json& listener) {
    if (failed_) return failed_status_;
    StatusOr<JsonConverter::Result> result =
        converter_.Convert(listener.dump(-1, ' ', false, Json::error_handler_t::replace));
    if (!result.ok()) {
      failed_ = true;
      failed_status_ = result.status();
      return failed_status_;
    }
    if (const auto* error = std::get_if<JsonTextError>(&*result)) {
      return InvalidArgumentError("listener: not a Listener in proto3 JSON: " + error->message);
    }
    return std::get<ConvertedMessage>(*std::move(result)).value;
  }

 private:
  JsonConverter converter_{{"envoy.config.listener.v3.Listener"}};
  bool failed_ = false;
  Status failed_status_;
};

StatusOr<uint16_t> GetPort(const Json& connection, const char* key) {
  uint64_t port = 0;
  if (!GetUnsigned(connection[key], &port) || port > 65535) {
    return InvalidArgumentError(std::string(key) + ": must be an integer from 0 to 65535");
  }
  return static_cast<uint16_t>(port);
}

using Endpoint = FilterChainSelector::Endpoint;

struct Connection {
  Endpoint destination;
  Endpoint source;
};

StatusOr<Endpoint> GetEndpoint(const Json& connection, const char* ip_key, const char* port_key) {
  if (!connection.contains(ip_key)) {
    return InvalidArgumentError(std::string(ip_key) + ": field not present");
  }
  if (!connection[ip_key].is_string()) {
    return InvalidArgumentError(std::string(ip_key) + ": must be a string");
  }
  Endpoint endpoint{connection[ip_key].get<std::string>(), 0};
  if (connection.contains(port_key)) {
    StatusOr<uint16_t> parsed = GetPort(connection, port_key);
    if (!parsed.ok()) return parsed.status();
    endpoint.port = *parsed;
  } else if (std::string_view(port_key) == "source_port") {
    return InvalidArgumentError("source_port: field not present");
  }
  if (Status ip = FilterChainSelector::CheckIp(endpoint.ip); !ip.ok()) {
    return ip.WithContext(ip_key);
  }
  return endpoint;
}

StatusOr<Connection> ParseConnection(const Json& connection) {
  if (!connection.is_object()) return InvalidArgumentError("must be an object");
  for (const auto& [key, value] : connection.items()) {
    if (key != "dest_ip" && key != "dest_port" && key != "source_ip" && key != "source_port") {
      return InvalidArgumentError("unknown field \"" + key + "\"");
    }
  }
  StatusOr<Endpoint> destination = GetEndpoint(connection, "dest_ip", "dest_port");
  if (!destination.ok()) return destination.status();
  StatusOr<Endpoint> source = GetEndpoint(connection, "source_ip", "source_port");
  if (!source.ok()) return source.status();
  return Connection{*std::move(destination), *std::move(source)};
}

class FcmCommand {
 public:
  Json Answer(std::string_view line) {
    const Json request = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded()) return Error(InvalidArgumentError("invalid JSON"));
    if (!request.is_object()) return Error(InvalidArgumentError("not a JSON object"));
    for (const auto& [key, value] : request.items()) {
      if (key != "listener" && key != "connections") {
        return Error(InvalidArgumentError("unknown field \"" + key + "\""));
      }
    }
    if (!request.contains("listener")) {
      return Error(InvalidArgumentError("listener: field not present"));
    }
    Json listener = request["listener"];
    if (!listener.is_object()) return Error(InvalidArgumentError("listener: must be an object"));
    // A Listener copied out of a DiscoveryResponse carries its Any's @type.
    if (listener.contains("@type")) {
      if (listener["@type"] != std::string(kListenerTypeUrl)) {
        return Error(
            InvalidArgumentError("listener.@type: must be " + std::string(kListenerTypeUrl)));
      }
      listener.erase("@type");
    }
    std::vector<Connection> connections;
    if (request.contains("connections")) {
      const Json& list = request["connections"];
      if (!list.is_array()) return Error(InvalidArgumentError("connections: must be an array"));
      for (size_t i = 0; i < list.size(); ++i) {
        StatusOr<Connection> connection = ParseConnection(list[i]);
        if (!connection.ok()) {
          return Error(connection.status().WithContext("connections[" + std::to_string(i) + "]"));
        }
        connections.push_back(*connection);
      }
    }
    StatusOr<std::string> bytes = converter_.ToBytes(listener);
    if (!bytes.ok()) return Error(bytes.status());
    XdsResourceType::DecodeResult decoded =
        ListenerResourceType::Get().Decode(StandaloneDecodeContext(), *bytes);
    if (!decoded.resource.ok()) {
      return Json{{"accepted", false}, {"error", decoded.resource.status().message()}};
    }
    auto resource = std::static_pointer_cast<const ListenerResource>(*decoded.resource);
    const auto* server = std::get_if<ListenerResource::TcpListener>(&resource->listener);
    if (server == nullptr) {
      return Error(InvalidArgumentError(
          "listener: a client Listener (api_listener), not an xDS-enabled server's"));
    }
    const FilterChainSelector selector(*server);
    Json selections = Json::array();
    for (const Connection& connection : connections) {
      StatusOr<const FilterChain*> selected =
          selector.Select(connection.destination, connection.source);
      if (!selected.ok()) return Error(selected.status());  // checked while parsing
      const FilterChain* chain = *selected;
      if (chain == nullptr) {
        selections.push_back(nullptr);
      } else if (server->default_filter_chain.has_value() &&
                 chain == &*server->default_filter_chain) {
        selections.push_back("default");
      } else {
        selections.push_back(chain->name);
      }
    }
    return Json{{"accepted", true}, {"selections", std::move(selections)}};
  }

  bool converter_failed() const { return converter_.failed(); }

 private:
  static Json Error(const Status& status) { return Json{{"error", status.message()}}; }

  ListenerJsonConverter converter_;
};

}  // namespace

int RunFcm(const std::vector<std::string>& args) {
  // A converter that died shows up as a failed write, not as SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  FcmCommand command;
  CLI::App app{kFcmSummary, "uxds fcm"};
  app.footer(kFcmDetails);
  const int exit_code =
      RunJsonLines(app, args, [&command](std::string_view line) { return command.Answer(line); });
  return exit_code == kExitOk && command.converter_failed() ? kExitRuntimeError : exit_code;
}

}  // namespace uxds::tool
