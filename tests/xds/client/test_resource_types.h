// Two small resource types for XdsClient tests, plugged in exactly as the
// real ones are:
//  - TestClusterType reads envoy.config.cluster.v3.Cluster (name,
//    connect_timeout, alt_stat_name); SotW responses carry every resource
//    (CDS). connect_timeout must be positive when set.
//  - TestEndpointsType reads envoy.config.endpoint.v3.ClusterLoadAssignment
//    (cluster_name, the priorities of endpoints); never all resources (EDS).
//    Every priority must be <= 100.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "uxds/xds_resource_type.h"

namespace uxds::testing {

inline constexpr char kClusterTypeUrl[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
inline constexpr char kEndpointsTypeUrl[] =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

struct TestClusterResource {
  std::string name;
  int64_t connect_timeout_ms = 0;
  std::string alt_stat_name;
  friend bool operator==(const TestClusterResource&, const TestClusterResource&) = default;
};

struct TestEndpointsResource {
  std::string cluster_name;
  std::vector<uint32_t> priorities;
  friend bool operator==(const TestEndpointsResource&, const TestEndpointsResource&) = default;
};

class TestClusterType final : public XdsResourceTypeImpl<TestClusterResource> {
 public:
  static const TestClusterType& Get();
  std::string_view type_url() const override { return kClusterTypeUrl; }
  bool all_resources_required_in_sotw() const override { return true; }
  DecodeResult Decode(const XdsDecodeContext& context, std::string_view serialized) const override;
  std::string ToJson(const TestClusterResource& resource) const override;
};

class TestEndpointsType final : public XdsResourceTypeImpl<TestEndpointsResource> {
 public:
  static const TestEndpointsType& Get();
  std::string_view type_url() const override { return kEndpointsTypeUrl; }
  bool all_resources_required_in_sotw() const override { return false; }
  DecodeResult Decode(const XdsDecodeContext& context, std::string_view serialized) const override;
  std::string ToJson(const TestEndpointsResource& resource) const override;
};

// Serialized google.protobuf.Any of a Cluster. connect_timeout_ms < 0 makes
// it invalid; 0 leaves the field unset.
std::string ClusterAny(const std::string& name, int64_t connect_timeout_ms = 1000,
                       const std::string& alt_stat_name = "");
// The Cluster message bytes alone (for wrapped or hand-built Anys).
std::string ClusterBytes(const std::string& name, int64_t connect_timeout_ms = 1000,
                         const std::string& alt_stat_name = "");
// Serialized Any of a ClusterLoadAssignment; a priority > 100 makes it invalid.
std::string EndpointsAny(const std::string& cluster_name, std::vector<uint32_t> priorities = {0});

}  // namespace uxds::testing
