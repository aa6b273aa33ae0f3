// Listener (LDS) decoding with gRPC's validation rules and error texts: client
// API listeners (A27) and xDS-enabled server listeners (A36); gRPC C++
// xds_listener_parser.cc.
#include <arpa/inet.h>

#include <algorithm>
#include <string>

#include "envoy/config/listener/v3/listener.pb.h"
#include "xds/resources/field_parsers.h"
#include "xds/resources/filter_chain_map.h"
#include "xds/resources/http_connection_manager_parser.h"
#include "xds/resources/matcher_parsers.h"
#include "xds/resources/resource_decoders.h"
#include "xds/resources/tls_context_parser.h"
#include "xds/resources/xds_extension.h"

namespace uxds {
namespace {

namespace listener_v3 = envoy::config::listener::v3;

std::optional<FilterChainMatch> ParseFilterChainMatch(const listener_v3::FilterChainMatch& proto,
                                                      ValidationErrors& errors) {
  const size_t errors_before = errors.size();
  FilterChainMatch match;
  if (proto.has_destination_port()) match.destination_port = proto.destination_port().value();
  for (int i = 0; i < proto.prefix_ranges_size(); ++i) {
    auto field = errors.Scope(".prefix_ranges[" + std::to_string(i) + "]");
    auto range = ParseCidrRange(proto.prefix_ranges(i), errors);
    if (range.has_value()) match.prefix_ranges.push_back(*range);
  }
  match.source_type = static_cast<FilterChainMatch::SourceType>(proto.source_type());
  if (proto.source_type() < 0 || proto.source_type() > 2) {
    auto field = errors.Scope(".source_type");
    errors.Add("unknown source type " + std::to_string(proto.source_type()));
    match.source_type = FilterChainMatch::SourceType::kAny;
  }
  for (int i = 0; i < proto.source_prefix_ranges_size(); ++i) {
    auto field = errors.Scope(".source_prefix_ranges[" + std::to_string(i) + "]");
    auto range = ParseCidrRange(proto.source_prefix_ranges(i), errors);
    if (range.has_value()) match.source_prefix_ranges.push_back(*range);
  }
  match.source_ports.assign(proto.source_ports().begin(), proto.source_ports().end());
  match.server_names.assign(proto.server_names().begin(), proto.server_names().end());
  match.transport_protocol = proto.transport_protocol();
  match.application_protocols.assign(proto.application_protocols().begin(),
                                     proto.application_protocols().end());
  if (errors.size() != errors_before) return std::nullopt;
  return match;
}

std::optional<FilterChain> ParseFilterChain(const XdsDecodeContext& context,
                                            const listener_v3::FilterChain& proto,
                                            ValidationErrors& errors) {
  const size_t errors_before = errors.size();
  FilterChain chain;
  chain.name = proto.name();
  if (proto.has_filter_chain_match()) {
    auto field = errors.Scope(".filter_chain_match");
    auto match = ParseFilterChainMatch(proto.filter_chain_match(), errors);
    if (match.has_value()) chain.filter_chain_match = std::move(*match);
  }
  {
    auto field = errors.Scope(".filters");
    // A36: exactly one network filter, an HttpConnectionManager (so the
    // filter names are unique, and it is the last one).
    if (proto.filters_size() != 1) {
      errors.Add(
          "must have exactly one filter (HttpConnectionManager -- no other filter is supported "
          "at the moment)");
    }
    for (int i = 0; i < proto.filters_size(); ++i) {
      auto filter_field = errors.Scope("[" + std::to_string(i) + "].typed_config");
      const auto& filter = proto.filters(i);
      XdsExtension extension;
      if (!ExtractXdsExtension(filter.has_typed_config() ? &filter.typed_config() : nullptr, errors,
                               extension)) {
        continue;
      }
      chain.http_connection_manager =
          ParseHttpConnectionManager(extension, /*is_client=*/false, errors);
    }
  }
  if (proto.has_transport_socket()) {
    // A29: the chain's connections are TLS as its DownstreamTlsContext says
    // (on a server with xDS credentials).
    auto field = errors.Scope(".transport_socket");
    chain.downstream_tls_context =
        ParseDownstreamTlsContext(context, proto.transport_socket(), errors);
  }
  if (errors.size() != errors_before) return std::nullopt;
  return chain;
}

std::optional<std::string> ParseListenerAddress(const listener_v3::Listener& listener,
                                                ValidationErrors& errors) {
  auto field = errors.Scope("address");
  if (!listener.has_address()) {
    errors.Add("field not present");
    return std::nullopt;
  }
  auto socket_field = errors.Scope(".socket_address");
  if (!listener.address().has_socket_address()) {
    errors.Add("field not present");
    return std::nullopt;
  }
  const auto& socket_address = listener.address().socket_address();
  if (socket_address.protocol() != envoy::config::core::v3::SocketAddress::TCP) {
    auto protocol_field = errors.Scope(".protocol");
    errors.Add("value must be TCP");
  }
  if (socket_address.port_value() > 65535) {
    auto port_field = errors.Scope(".port_value");
    errors.Add("invalid port");
    return std::nullopt;
  }
  return JoinHostPort(socket_address.address(), socket_address.port_value());
}

StatusOr<ListenerResource> ParseServerListener(const XdsDecodeContext& context,
                                               const listener_v3::Listener& listener) {
  ValidationErrors errors;
  ListenerResource::TcpListener tcp;
  auto address = ParseListenerAddress(listener, errors);
  if (address.has_value()) tcp.address = std::move(*address);
  // A36: features gRPC lacks must not be silently ignored.
  if (listener.listener_filters_size() > 0) {
    auto field = errors.Scope("listener_filters");
    errors.Add("field not supported");
  }
  if (listener.has_use_original_dst() && listener.use_original_dst().value()) {
    auto field = errors.Scope("use_original_dst");
    errors.Add("field not supported");
  }
  std::vector<int> proto_indices;
  for (int i = 0; i < listener.filter_chains_size(); ++i) {
    auto field = errors.Scope("filter_chains[" + std::to_string(i) + "]");
    auto chain = ParseFilterChain(context, listener.filter_chains(i), errors);
    if (!chain.has_value()) continue;
    tcp.filter_chains.push_back(std::move(*chain));
    proto_indices.push_back(i);
  }
  tcp.filter_chain_map = BuildFilterChainMap(tcp.filter_chains, proto_indices, errors);
  {
    auto field = errors.Scope("default_filter_chain");
    if (listener.has_default_filter_chain()) {
      tcp.default_filter_chain = ParseFilterChain(context, listener.default_filter_chain(), errors);
    } else if (listener.filter_chains_size() == 0) {
      errors.Add("must be set if filter_chains is unset");
    }
  }
  if (!errors.ok()) return errors.ToStatus("errors validating server Listener");
  return ListenerResource{.listener = std::move(tcp)};
}

StatusOr<ListenerResource> ParseClientListener(const listener_v3::Listener& listener) {
  ValidationErrors errors;
  ListenerResource::ApiListener api;
  auto field = errors.Scope("api_listener.api_listener");
  const auto& api_listener = listener.api_listener();
  XdsExtension extension;
  if (ExtractXdsExtension(api_listener.has_api_listener() ? &api_listener.api_listener() : nullptr,
                          errors, extension)) {
    api.http_connection_manager = ParseHttpConnectionManager(extension, /*is_client=*/true, errors);
  }
  if (!errors.ok()) return errors.ToStatus("errors validating ApiListener");
  return ListenerResource{.listener = std::move(api)};
}

}  // namespace

DecodedResource<ListenerResource> DecodeListener(const XdsDecodeContext& context,
                                                 std::string_view serialized) {
  listener_v3::Listener listener;
  if (!ParseProto(serialized, listener)) {
    return {std::nullopt, InvalidArgumentError("Can't parse Listener resource.")};
  }
  // A listener with an api_listener is a client's (gRPC C++ accepts an
  // address next to it), one with only an address a server's.
  if (listener.has_api_listener()) return {listener.name(), ParseClientListener(listener)};
  if (listener.has_address()) return {listener.name(), ParseServerListener(context, listener)};
  return {listener.name(), InvalidArgumentError("Listener has neither address nor ApiListener")};
}

}  // namespace uxds
