// PriorityNames: the names of one cluster's priorities across updates
// (A37: "each discovery instance will also separately track the priority
// names it generates and the corresponding localities, to preserve them
// across updates"). A priority takes the name an earlier update gave one
// of its localities (the first such name not taken yet), else a new
// "<cluster>[child<N>]". So a priority that moves (an aggregate's earlier
// leaf lost its endpoints, or a priority was added above it) keeps its
// child in the priority policy, with its connections and failover timer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "uxds/resources/endpoint.h"

namespace uxds {

class PriorityNames {
 public:
  explicit PriorityNames(std::string cluster) : cluster_(std::move(cluster)) {}

  // One name per priority of `endpoints`, unique, in order.
  std::vector<std::string> Assign(const EndpointResource& endpoints);

 private:
  std::string cluster_;
  std::map<LocalityName, std::string> by_locality_;
  uint64_t next_child_ = 0;
};

}  // namespace uxds
