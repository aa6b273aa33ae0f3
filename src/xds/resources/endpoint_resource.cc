// EndpointResource's JSON summary.
#include "uxds/resources/endpoint.h"
#include "xds/resources/resource_json.h"

namespace uxds {
namespace {

const char* HealthStatusName(EndpointResource::HealthStatus status) {
  switch (status) {
    case EndpointResource::HealthStatus::kUnknown:
      return "UNKNOWN";
    case EndpointResource::HealthStatus::kHealthy:
      return "HEALTHY";
    case EndpointResource::HealthStatus::kUnhealthy:
      return "UNHEALTHY";
    case EndpointResource::HealthStatus::kDraining:
      return "DRAINING";
    case EndpointResource::HealthStatus::kTimeout:
      return "TIMEOUT";
    case EndpointResource::HealthStatus::kDegraded:
      return "DEGRADED";
  }
  return "UNKNOWN";
}

ResourceJson EndpointJson(const EndpointResource::Endpoint& endpoint) {
  ResourceJson json;
  json["addresses"] = endpoint.addresses;
  json["weight"] = endpoint.weight;
  json["health_status"] = HealthStatusName(endpoint.health_status);
  if (!endpoint.hostname.empty()) json["hostname"] = endpoint.hostname;
  if (!endpoint.hash_key.empty()) json["hash_key"] = endpoint.hash_key;
  return json;
}

}  // namespace

std::string EndpointResource::ToJson() const {
  ResourceJson json;
  ResourceJson priorities_json = ResourceJson::array();
  for (const auto& priority : priorities) {
    ResourceJson localities = ResourceJson::array();
    for (const auto& locality : priority.localities) {
      ResourceJson endpoints = ResourceJson::array();
      for (const auto& endpoint : locality.endpoints) endpoints.push_back(EndpointJson(endpoint));
      localities.push_back({{"region", locality.name.region},
                            {"zone", locality.name.zone},
                            {"sub_zone", locality.name.sub_zone},
                            {"weight", locality.weight},
                            {"endpoints", std::move(endpoints)}});
    }
    priorities_json.push_back(std::move(localities));
  }
  json["priorities"] = std::move(priorities_json);
  if (!drop_overloads.empty()) {
    ResourceJson drops = ResourceJson::array();
    for (const auto& drop : drop_overloads) {
      drops.push_back(
          {{"category", drop.category}, {"requests_per_million", drop.requests_per_million}});
    }
    json["drop_overloads"] = std::move(drops);
  }
  return json.dump();
}

}  // namespace uxds
