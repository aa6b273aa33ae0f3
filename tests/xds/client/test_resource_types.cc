#include "test_resource_types.h"

#include <string>

#include "google/protobuf/any.pb.h"
#include "test_resources.pb.h"
#include "xds/validation_errors.h"

namespace uxds::testing {

const TestClusterType& TestClusterType::Get() {
  static const TestClusterType* const type = new TestClusterType();
  return *type;
}

XdsResourceType::DecodeResult TestClusterType::Decode(const XdsDecodeContext& /*context*/,
                                                      std::string_view serialized) const {
  xds_client_test::TestCluster proto;
  if (!proto.ParseFromString(std::string(serialized))) {
    return Invalid(std::nullopt, InvalidArgumentError("Can't parse Cluster resource."));
  }
  if (proto.name().empty()) {
    return Invalid(std::nullopt, InvalidArgumentError("Cluster resource has no name"));
  }
  ValidationErrors errors;
  TestClusterResource resource;
  resource.name = proto.name();
  resource.alt_stat_name = proto.alt_stat_name();
  if (proto.has_connect_timeout()) {
    auto field = errors.Scope(".connect_timeout");
    const int64_t ms =
        proto.connect_timeout().seconds() * 1000 + proto.connect_timeout().nanos() / 1'000'000;
    if (ms <= 0) errors.Add("must be positive");
    resource.connect_timeout_ms = ms;
  }
  if (!errors.ok()) {
    return Invalid(proto.name(), errors.ToStatus("errors validating Cluster resource"));
  }
  return Valid(proto.name(), std::move(resource));
}

std::string TestClusterType::ToJson(const TestClusterResource& resource) const {
  return "{\"name\":\"" + resource.name +
         "\",\"connect_timeout_ms\":" + std::to_string(resource.connect_timeout_ms) + "}";
}

const TestEndpointsType& TestEndpointsType::Get() {
  static const TestEndpointsType* const type = new TestEndpointsType();
  return *type;
}

XdsResourceType::DecodeResult TestEndpointsType::Decode(const XdsDecodeContext& /*context*/,
                                                        std::string_view serialized) const {
  xds_client_test::TestEndpoints proto;
  if (!proto.ParseFromString(std::string(serialized)) || proto.cluster_name().empty()) {
    return Invalid(std::nullopt,
                   InvalidArgumentError("Can't parse ClusterLoadAssignment resource."));
  }
  ValidationErrors errors;
  TestEndpointsResource resource;
  resource.cluster_name = proto.cluster_name();
  for (int i = 0; i < proto.endpoints_size(); ++i) {
    auto field = errors.Scope(".endpoints[" + std::to_string(i) + "].priority");
    if (proto.endpoints(i).priority() > 100) errors.Add("must be <= 100");
    resource.priorities.push_back(proto.endpoints(i).priority());
  }
  if (!errors.ok()) {
    return Invalid(proto.cluster_name(),
                   errors.ToStatus("errors validating ClusterLoadAssignment resource"));
  }
  return Valid(proto.cluster_name(), std::move(resource));
}

std::string TestEndpointsType::ToJson(const TestEndpointsResource& resource) const {
  return "{\"cluster_name\":\"" + resource.cluster_name +
         "\",\"localities\":" + std::to_string(resource.priorities.size()) + "}";
}

std::string ClusterBytes(const std::string& name, int64_t connect_timeout_ms,
                         const std::string& alt_stat_name) {
  xds_client_test::TestCluster proto;
  proto.set_name(name);
  if (connect_timeout_ms != 0) {
    proto.mutable_connect_timeout()->set_seconds(connect_timeout_ms / 1000);
    proto.mutable_connect_timeout()->set_nanos(
        static_cast<int32_t>((connect_timeout_ms % 1000) * 1'000'000));
  }
  proto.set_alt_stat_name(alt_stat_name);
  return proto.SerializeAsString();
}

std::string ClusterAny(const std::string& name, int64_t connect_timeout_ms,
                       const std::string& alt_stat_name) {
  google::protobuf::Any any;
  any.set_type_url(kClusterTypeUrl);
  any.set_value(ClusterBytes(name, connect_timeout_ms, alt_stat_name));
  return any.SerializeAsString();
}

std::string EndpointsAny(const std::string& cluster_name, std::vector<uint32_t> priorities) {
  xds_client_test::TestEndpoints proto;
  proto.set_cluster_name(cluster_name);
  for (uint32_t priority : priorities) proto.add_endpoints()->set_priority(priority);
  google::protobuf::Any any;
  any.set_type_url(kEndpointsTypeUrl);
  any.set_value(proto.SerializeAsString());
  return any.SerializeAsString();
}

}  // namespace uxds::testing
