#include "server_listener_protos.h"

#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "uxds/xds_resources.h"

namespace uxds::testing {
namespace {

using envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

void FillChain(envoy::config::listener::v3::FilterChain& chain, const std::string& name) {
  chain.set_name(name);
  HttpConnectionManager hcm;
  hcm.mutable_rds()->mutable_config_source()->mutable_ads();
  hcm.mutable_rds()->set_route_config_name("routes-" + name);
  auto* router = hcm.add_http_filters();
  router->set_name("router");
  router->mutable_typed_config()->PackFrom(envoy::extensions::filters::http::router::v3::Router());
  auto* filter = chain.add_filters();
  filter->set_name("hcm");
  filter->mutable_typed_config()->PackFrom(hcm);
}

void SetCidr(envoy::config::core::v3::CidrRange& range, const std::string& cidr) {
  const size_t slash = cidr.find('/');
  range.set_address_prefix(cidr.substr(0, slash));
  if (slash != std::string::npos) {
    range.mutable_prefix_len()->set_value(
        static_cast<uint32_t>(std::stoul(cidr.substr(slash + 1))));
  }
}

}  // namespace

ListenerProto ServerListenerProto() {
  ListenerProto listener;
  listener.set_name("grpc/server?xds.resource.listening_address=0.0.0.0:8080");
  auto* socket_address = listener.mutable_address()->mutable_socket_address();
  socket_address->set_address("0.0.0.0");
  socket_address->set_port_value(8080);
  return listener;
}

FilterChainMatchProto* AddChain(ListenerProto& listener, const std::string& name) {
  auto* chain = listener.add_filter_chains();
  FillChain(*chain, name);
  return chain->mutable_filter_chain_match();
}

void SetDefaultChain(ListenerProto& listener) {
  FillChain(*listener.mutable_default_filter_chain(), "default");
}

void AddPrefix(FilterChainMatchProto& match, const std::string& cidr) {
  SetCidr(*match.add_prefix_ranges(), cidr);
}

void AddSourcePrefix(FilterChainMatchProto& match, const std::string& cidr) {
  SetCidr(*match.add_source_prefix_ranges(), cidr);
}

StatusOr<std::shared_ptr<const ListenerResource>> DecodeServerListener(
    const ListenerProto& listener) {
  XdsResourceType::DecodeResult decoded =
      ListenerResourceType::Get().Decode(StandaloneDecodeContext(), listener.SerializeAsString());
  if (!decoded.resource.ok()) return decoded.resource.status();
  return std::static_pointer_cast<const ListenerResource>(*decoded.resource);
}

}  // namespace uxds::testing
