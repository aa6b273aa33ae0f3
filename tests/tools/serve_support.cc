#include "serve_support.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/config/route/v3/route.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "support/xds_test_resources.h"

namespace uxds::testing {

using json = nlohmann::json;
using envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), size);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

ResponseResource ServingListener(const std::string& name, uint16_t port, bool with_router) {
  HttpConnectionManager hcm;
  auto* vhost = hcm.mutable_route_config()->add_virtual_hosts();
  vhost->add_domains(std::string("*"));
  auto* route = vhost->add_routes();
  route->mutable_match()->set_prefix(std::string("/"));
  route->mutable_non_forwarding_action();
  if (with_router) {
    auto* router = hcm.add_http_filters();
    router->set_name(std::string("router"));
    router->mutable_typed_config()->PackFrom(
        envoy::extensions::filters::http::router::v3::Router());
  }
  envoy::config::listener::v3::Listener listener;
  listener.set_name(name);
  listener.mutable_address()->mutable_socket_address()->set_address(std::string("127.0.0.1"));
  listener.mutable_address()->mutable_socket_address()->set_port_value(port);
  auto* filter = listener.add_filter_chains()->add_filters();
  filter->set_name(std::string("hcm"));
  filter->mutable_typed_config()->PackFrom(hcm);
  return ResponseResource(kLdsType, listener.SerializeAsString());
}

void WriteServeBootstrap(const std::string& path, const FakeControlPlane& cp,
                         const std::string& node_id, bool fail_on_data_errors) {
  json server = {{"server_uri", cp.target()},
                 {"channel_creds", json::array({{{"type", "insecure"}}})}};
  if (fail_on_data_errors) server["server_features"] = json::array({"fail_on_data_errors"});
  json bootstrap = {{"xds_servers", json::array({server})},
                    {"node", {{"id", node_id}}},
                    {"server_listener_resource_name_template", kServerListenerTemplate}};
  WriteFile(path, bootstrap.dump());
}

std::optional<json> NextJson(Subprocess& process) {
  std::optional<std::string> line = process.ReadLine(std::chrono::seconds(30));
  if (!line) return std::nullopt;
  json parsed = json::parse(*line, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << *line;
  return parsed;
}

}  // namespace uxds::testing
