// The xDS resource types uxds understands, for XdsClient::WatchResource():
//
//   client.WatchResource(ClusterResourceType::Get(), "c1", watcher);
//   // watcher: XdsResourceWatcher<ClusterResource>
//
// Each decodes and validates its resources with gRPC's rules into the plain
// structs of uxds/resources/ (no protobuf downstream); an invalid resource is
// NACKed with every bad field named.
#pragma once

#include <string>
#include <string_view>

#include "uxds/resources/cluster.h"
#include "uxds/resources/endpoint.h"
#include "uxds/resources/listener.h"
#include "uxds/resources/route_config.h"
#include "uxds/xds_resource_type.h"

namespace uxds {

// CDS: envoy.config.cluster.v3.Cluster.
class ClusterResourceType final : public XdsResourceTypeImpl<ClusterResource> {
 public:
  static const ClusterResourceType& Get();
  std::string_view type_url() const override {
    return "type.googleapis.com/envoy.config.cluster.v3.Cluster";
  }
  bool all_resources_required_in_sotw() const override { return true; }
  DecodeResult Decode(const XdsDecodeContext& context, std::string_view serialized) const override;
  std::string ToJson(const ClusterResource& resource) const override { return resource.ToJson(); }
};

// EDS: envoy.config.endpoint.v3.ClusterLoadAssignment, named by cluster_name.
class EndpointResourceType final : public XdsResourceTypeImpl<EndpointResource> {
 public:
  static const EndpointResourceType& Get();
  std::string_view type_url() const override {
    return "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
  }
  bool all_resources_required_in_sotw() const override { return false; }
  DecodeResult Decode(const XdsDecodeContext& context, std::string_view serialized) const override;
  std::string ToJson(const EndpointResource& resource) const override { return resource.ToJson(); }
};

// LDS: envoy.config.listener.v3.Listener (client API listeners and
// xDS-enabled server listeners).
class ListenerResourceType final : public XdsResourceTypeImpl<ListenerResource> {
 public:
  static const ListenerResourceType& Get();
  std::string_view type_url() const override {
    return "type.googleapis.com/envoy.config.listener.v3.Listener";
  }
  bool all_resources_required_in_sotw() const override { return true; }
  DecodeResult Decode(const XdsDecodeContext& context, std::string_view serialized) const override;
  std::string ToJson(const ListenerResource& resource) const override { return resource.ToJson(); }
};

// RDS: envoy.config.route.v3.RouteConfiguration.
class RouteConfigResourceType final : public XdsResourceTypeImpl<RouteConfigResource> {
 public:
  static const RouteConfigResourceType& Get();
  std::string_view type_url() const override {
    return "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
  }
  bool all_resources_required_in_sotw() const override { return false; }
  DecodeResult Decode(const XdsDecodeContext& context, std::string_view serialized) const override;
  std::string ToJson(const RouteConfigResource& resource) const override {
    return resource.ToJson();
  }
};

// A decode context for resources read outside an XdsClient (tools, tests,
// benches): a bootstrap with one placeholder server and nothing else.
const XdsDecodeContext& StandaloneDecodeContext();

}  // namespace uxds
