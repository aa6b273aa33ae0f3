// libFuzzer target: DecodeCluster() on arbitrary bytes (see resource_fuzz_support.h
// for the properties checked), plus what validation promises for this type.
#include "resource_fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return uxds::fuzzing::FuzzDecode(
      [](const uxds::XdsDecodeContext& context, std::string_view bytes) {
        return uxds::DecodeCluster(context, bytes);
      },
      [](const uxds::ClusterResource& cluster) {
        using LbPolicy = uxds::ClusterResource::LbPolicy;
        const LbPolicy& policy = cluster.lb_policy;
        if (policy.endpoint_picking == LbPolicy::EndpointPicking::kRingHash) {
          uxds::fuzzing::Require(policy.min_ring_size >= 1 &&
                                 policy.min_ring_size <= policy.max_ring_size &&
                                 policy.max_ring_size <= LbPolicy::kMaxRingSizeLimit);
        }
        if (const auto* aggregate = std::get_if<uxds::ClusterResource::Aggregate>(&cluster.type)) {
          uxds::fuzzing::Require(!aggregate->prioritized_cluster_names.empty());
        }
      },
      data, size);
}
