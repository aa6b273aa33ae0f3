// A36 filter chain match: the cost of FilterChainMatcher::Select per
// accepted connection with 1, 10, 100 and 1000 filter chains, and the cost
// of a Listener update with 1000 chains: decoding + validating it (the
// Listener decoder, duplicate detection included) and building the matcher.
//
// Chains come in pairs per destination /24 (10.<g/256>.<g%256>.0/24): one
// for sources in 172.16.0.0/12, one more specific for sources in
// 172.16.<g%256>.0/24 on port 9000; a default chain takes the rest, so a
// connection walks every level. The connections cycle through
// 4096 precomputed addresses spread over all chains (and a few misses), so a
// run does not hit one cached path.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "envoy/config/listener/v3/listener.pb.h"
#include "envoy/extensions/filters/http/router/v3/router.pb.h"
#include "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.pb.h"
#include "server/filter_chain_matcher.h"
#include "uxds/xds_resources.h"

namespace uxds {
namespace {

using envoy::config::listener::v3::FilterChain;
using envoy::config::listener::v3::FilterChainMatch;
using envoy::config::listener::v3::Listener;

void SetRange(envoy::config::core::v3::CidrRange* range, const std::string& address,
              uint32_t prefix_len) {
  range->set_address_prefix(address);
  range->mutable_prefix_len()->set_value(prefix_len);
}

void AddHttpConnectionManager(FilterChain* chain) {
  envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager hcm;
  hcm.mutable_rds()->mutable_config_source()->mutable_ads();
  hcm.mutable_rds()->set_route_config_name("routes");
  auto* router = hcm.add_http_filters();
  router->set_name("router");
  router->mutable_typed_config()->PackFrom(envoy::extensions::filters::http::router::v3::Router());
  auto* filter = chain->add_filters();
  filter->set_name("hcm");
  filter->mutable_typed_config()->PackFrom(hcm);
}

// "10.<group / 256>.<group % 256>"
std::string DestinationSubnet(int group) {
  return "10." + std::to_string(group / 256) + "." + std::to_string(group % 256);
}

std::string SerializedListener(int chains) {
  Listener listener;
  listener.set_name("bench");
  auto* socket_address = listener.mutable_address()->mutable_socket_address();
  socket_address->set_address("0.0.0.0");
  socket_address->set_port_value(8080);
  for (int i = 0; i < chains; ++i) {
    // Chains come in pairs on one destination /24: a wide one, then a
    // narrow one (one source /24, port 9000).
    const int group = i / 2;
    FilterChain* chain = listener.add_filter_chains();
    chain->set_name("chain-" + std::to_string(i));
    FilterChainMatch* match = chain->mutable_filter_chain_match();
    SetRange(match->add_prefix_ranges(), DestinationSubnet(group) + ".0", 24);
    if (i % 2 == 0) {
      SetRange(match->add_source_prefix_ranges(), "172.16.0.0", 12);
    } else {
      SetRange(match->add_source_prefix_ranges(), "172.16." + std::to_string(group % 256) + ".0",
               24);
      match->add_source_ports(9000);
    }
    AddHttpConnectionManager(chain);
  }
  AddHttpConnectionManager(listener.mutable_default_filter_chain());
  return listener.SerializeAsString();
}

std::shared_ptr<const ListenerResource> Decode(const std::string& serialized) {
  auto decoded = ListenerResourceType::Get().Decode(StandaloneDecodeContext(), serialized);
  if (!decoded.resource.ok()) std::abort();
  return std::static_pointer_cast<const ListenerResource>(*decoded.resource);
}

std::vector<ConnectionAddresses> Connections(int chains) {
  std::mt19937 random(42);
  std::vector<ConnectionAddresses> connections;
  for (int n = 0; n < 4096; ++n) {
    // One in 16 connections goes to an address no chain names.
    const int group = static_cast<int>(random() % static_cast<uint32_t>((chains + 1) / 2));
    const std::string dest = random() % 16 == 0
                                 ? "192.0.2.1"
                                 : DestinationSubnet(group) + "." + std::to_string(random() % 256);
    const std::string source =
        "172.16." + std::to_string(random() % 256) + "." + std::to_string(random() % 256);
    const uint16_t port =
        random() % 2 == 0 ? 9000 : static_cast<uint16_t>(10000 + random() % 50000);
    connections.push_back(
        {*SocketAddress::FromIpAndPort(dest, 8080), *SocketAddress::FromIpAndPort(source, port)});
  }
  return connections;
}

void BM_SelectFilterChain(benchmark::State& state) {
  const int chains = static_cast<int>(state.range(0));
  const auto resource = Decode(SerializedListener(chains));
  const FilterChainMatcher matcher(std::get<ListenerResource::TcpListener>(resource->listener));
  const std::vector<ConnectionAddresses> connections = Connections(chains);
  size_t next = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(matcher.Select(connections[next]));
    next = (next + 1) % connections.size();
  }
}
BENCHMARK(BM_SelectFilterChain)->ArgName("chains")->Arg(1)->Arg(10)->Arg(100)->Arg(1000);

void BM_DecodeListener(benchmark::State& state) {
  const std::string serialized = SerializedListener(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto decoded = ListenerResourceType::Get().Decode(StandaloneDecodeContext(), serialized);
    benchmark::DoNotOptimize(decoded);
  }
  state.counters["bytes"] = static_cast<double>(serialized.size());
}
BENCHMARK(BM_DecodeListener)->ArgName("chains")->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_BuildMatcher(benchmark::State& state) {
  const auto resource = Decode(SerializedListener(static_cast<int>(state.range(0))));
  const auto& listener = std::get<ListenerResource::TcpListener>(resource->listener);
  for (auto _ : state) {
    FilterChainMatcher matcher(listener);
    benchmark::DoNotOptimize(&matcher);
  }
}
BENCHMARK(BM_BuildMatcher)->ArgName("chains")->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace uxds

BENCHMARK_MAIN();
