#include "lb/priority_names.h"

#include <set>

namespace uxds {

std::vector<std::string> PriorityNames::Assign(const EndpointResource& endpoints) {
  std::vector<std::string> names;
  std::set<std::string> taken;
  std::map<LocalityName, std::string> by_locality;
  for (const EndpointResource::Priority& priority : endpoints.priorities) {
    std::string name;
    for (const EndpointResource::Locality& locality : priority.localities) {
      auto it = by_locality_.find(locality.name);
      if (it != by_locality_.end() && !taken.contains(it->second)) {
        name = it->second;
        break;
      }
    }
    if (name.empty()) name = cluster_ + "[child" + std::to_string(next_child_++) + "]";
    taken.insert(name);
    for (const EndpointResource::Locality& locality : priority.localities) {
      by_locality.emplace(locality.name, name);
    }
    names.push_back(std::move(name));
  }
  by_locality_ = std::move(by_locality);
  return names;
}

}  // namespace uxds
