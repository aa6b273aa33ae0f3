// The State-of-the-World ADS messages: building a DiscoveryRequest and
// applying a DiscoveryResponse to the cache (A46, A88, TP3).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "envoy/config/core/v3/base.pb.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "uxds/status.h"
#include "uxds/xds_resource_type.h"
#include "xds/client/xds_resource_cache.h"

namespace uxds::xds_internal {

inline constexpr std::string_view kAdsMethod =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
// NOTES: gRPC accepts resources wrapped in envoy.service.discovery.v3.Resource
// and says so with this client feature.
inline constexpr std::string_view kResourceWrapperTypeUrl =
    "type.googleapis.com/envoy.service.discovery.v3.Resource";
inline constexpr std::string_view kClientFeatureResourceInSotw = "xds.config.resource-in-sotw";

struct AdsRequest {
  std::string type_url;
  std::string version_info;    // last accepted version of the type
  std::string response_nonce;  // nonce of the response this request answers
  std::vector<std::string> resource_names;
  Status error_detail;                                  // not OK: a NACK
  const envoy::config::core::v3::Node* node = nullptr;  // first request of a stream only
};
std::string SerializeAdsRequest(const AdsRequest& request);

struct AdsResponseOutcome {
  // One entry per problem, "resource index <i>: <name>: <error>"; any entry
  // makes the answer a NACK.
  std::vector<std::string> errors;
  uint64_t valid_resources = 0;
  uint64_t invalid_resources = 0;

  // NOTES (A46): the version is accepted when the response has a valid
  // resource or no error at all.
  bool accept_version() const { return valid_resources > 0 || errors.empty(); }
  // The NACK's error_detail: INVALID_ARGUMENT listing every error.
  Status NackStatus() const;
};

// Applies `response` (whose type_url is `type`'s) from `server` to the cache:
// valid resources are used even when others fail (A46), TP3 resource_errors
// set RECEIVED_ERROR, and for LDS/CDS the cached names of `subscribed_names`
// missing from the response are deletions. Names that are not subscribed on
// this server are ignored.
AdsResponseOutcome ApplyAdsResponse(
    const envoy::service::discovery::v3::DiscoveryResponse& response, const XdsResourceType& type,
    const XdsDecodeContext& context, const std::set<std::string>& subscribed_names,
    XdsServerState& server, XdsResourceCache& cache);

}  // namespace uxds::xds_internal
