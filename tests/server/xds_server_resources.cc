#include "xds_server_resources.h"

#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "envoy/extensions/transport_sockets/tls/v3/tls.pb.h"
#include "support/xds_test_resources.h"

namespace uxds::testing {

namespace {

using envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

google::protobuf::Any AnyOf(const std::pair<std::string, std::string>& type_and_value) {
  google::protobuf::Any any;
  any.set_type_url(type_and_value.first);
  any.set_value(type_and_value.second);
  return any;
}

void FillRoutes(envoy::config::route::v3::RouteConfiguration& config, const std::string& name,
                const ServerRoutes& routes) {
  config.set_name(name);
  auto* vhost = config.add_virtual_hosts();
  vhost->set_name("server");
  // A std::string: g++ 12 warns falsely (-Wrestrict) on the const char* overload.
  vhost->add_domains(std::string("*"));
  for (const auto& [filter, config] : routes.virtual_host_overrides) {
    (*vhost->mutable_typed_per_filter_config())[filter] = AnyOf(config);
  }
  for (const auto& [prefix, action] : routes.routes) {
    auto* route = vhost->add_routes();
    route->mutable_match()->set_prefix(prefix);
    if (auto it = routes.route_overrides.find(prefix); it != routes.route_overrides.end()) {
      for (const auto& [filter, config] : it->second) {
        (*route->mutable_typed_per_filter_config())[filter] = AnyOf(config);
      }
    }
    if (action == ServerRouteAction::kNonForwarding) {
      route->mutable_non_forwarding_action();
    } else {
      route->mutable_route()->set_cluster("some-cluster");
    }
  }
}

void AddCidr(google::protobuf::RepeatedPtrField<envoy::config::core::v3::CidrRange>* ranges,
             const std::string& cidr) {
  auto* range = ranges->Add();
  const size_t slash = cidr.find('/');
  range->set_address_prefix(cidr.substr(0, slash));
  if (slash != std::string::npos) {
    range->mutable_prefix_len()->set_value(std::stoul(cidr.substr(slash + 1)));
  }
}

void FillChain(envoy::config::listener::v3::FilterChain& out, const ServerChain& chain) {
  out.set_name(chain.name);
  auto* match = out.mutable_filter_chain_match();
  for (const std::string& cidr : chain.prefix_ranges) AddCidr(match->mutable_prefix_ranges(), cidr);
  for (const std::string& cidr : chain.source_prefix_ranges) {
    AddCidr(match->mutable_source_prefix_ranges(), cidr);
  }
  match->set_source_type(
      static_cast<envoy::config::listener::v3::FilterChainMatch::ConnectionSourceType>(
          chain.source_type));
  for (uint32_t port : chain.source_ports) match->add_source_ports(port);
  HttpConnectionManager hcm;
  if (chain.rds_name.empty()) {
    FillRoutes(*hcm.mutable_route_config(), "inline", chain.routes);
  } else {
    hcm.mutable_rds()->mutable_config_source()->mutable_ads();
    hcm.mutable_rds()->set_route_config_name(chain.rds_name);
  }
  for (const auto& [name, config] : chain.http_filters) {
    auto* filter = hcm.add_http_filters();
    filter->set_name(name);
    *filter->mutable_typed_config() = AnyOf(config);
  }
  auto* router = hcm.add_http_filters();
  router->set_name("router");
  router->mutable_typed_config()->PackFrom(envoy::extensions::filters::http::router::v3::Router());
  auto* filter = out.add_filters();
  filter->set_name("hcm");
  filter->mutable_typed_config()->PackFrom(hcm);
  if (!chain.tls_identity.empty()) {
    envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext tls;
    auto* common = tls.mutable_common_tls_context();
    common->mutable_tls_certificate_provider_instance()->set_instance_name(chain.tls_identity);
    if (!chain.tls_ca.empty()) {
      common->mutable_validation_context()
          ->mutable_ca_certificate_provider_instance()
          ->set_instance_name(chain.tls_ca);
    }
    if (chain.require_client_certificate) tls.mutable_require_client_certificate()->set_value(true);
    out.mutable_transport_socket()->set_name("envoy.transport_sockets.tls");
    out.mutable_transport_socket()->mutable_typed_config()->PackFrom(tls);
  }
}

}  // namespace

ServerChain Chain(std::string name) {
  ServerChain chain;
  chain.name = std::move(name);
  return chain;
}

ServerListenerSpec Listener(std::string name, std::string address, uint16_t port,
                            std::vector<ServerChain> chains) {
  ServerListenerSpec spec;
  spec.name = std::move(name);
  spec.address = std::move(address);
  spec.port = port;
  spec.chains = std::move(chains);
  return spec;
}

ResponseResource ServerListener(const ServerListenerSpec& spec) {
  envoy::config::listener::v3::Listener listener;
  listener.set_name(spec.name);
  auto* address = listener.mutable_address()->mutable_socket_address();
  address->set_address(spec.address);
  address->set_port_value(spec.port);
  for (const ServerChain& chain : spec.chains) FillChain(*listener.add_filter_chains(), chain);
  if (spec.default_chain.has_value()) {
    FillChain(*listener.mutable_default_filter_chain(), *spec.default_chain);
  }
  return ResponseResource(kLdsType, listener.SerializeAsString());
}

ResponseResource ServerRouteConfig(const std::string& name, const ServerRoutes& routes) {
  envoy::config::route::v3::RouteConfiguration config;
  FillRoutes(config, name, routes);
  return ResponseResource(kRdsType, config.SerializeAsString());
}

}  // namespace uxds::testing
