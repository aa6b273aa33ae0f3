// cluster_impl (A27 drops, A32 circuit breaking): the top of a cluster's
// policy tree. Its picker drops a share of calls per drop category, fails
// calls over the cluster's max_requests, and hands the rest to the
// priority policy's picker.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lb/call_counter.h"
#include "lb/lb_policy.h"
#include "uxds/resources/endpoint.h"

namespace uxds {

class ClusterImplPicker final : public Picker {
 public:
  ClusterImplPicker(const std::vector<EndpointResource::DropCategory>& drops,
                    std::shared_ptr<CallCounter> counter, uint32_t max_requests,
                    std::shared_ptr<const Picker> child);
  PickResult Pick(const PickArgs& args) const override;

 private:
  struct Drop {
    uint32_t requests_per_million;
    Status status;
  };
  std::vector<Drop> drops_;
  std::shared_ptr<CallCounter> counter_;
  uint32_t max_requests_;
  std::shared_ptr<const Picker> child_;
  Status circuit_breaker_drop_;
};

}  // namespace uxds
