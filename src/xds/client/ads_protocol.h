// The State-of-the-World ADS messages: building a DiscoveryRequest and
// applying a DiscoveryResponse to the cache (A46, A88, TP3).
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_set>
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
// Written by hand so that 100 000 names go straight from `request` to the
// bytes, not through 100 000 strings of a message first.
std::string SerializeAdsRequest(const AdsRequest& request);

// A DiscoveryResponse read without copying its resources (100 000 Clusters
// are about 10 MB): each stays a view into the message bytes, which must
// outlive it, and is decoded when it is applied, a slice at a time.
struct AdsResponse {
  // Every field but the resources, decoded as usual.
  envoy::service::discovery::v3::DiscoveryResponse fields;
  std::vector<std::string_view> resources;  // each a serialized google.protobuf.Any
};
// False if `serialized` is not a DiscoveryResponse (the same bytes protobuf
// would refuse; NOTES: such a response is ignored).
bool ParseAdsResponse(std::string_view serialized, AdsResponse& response);

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
// set RECEIVED_ERROR, and for LDS/CDS the cached names of the subscribed
// names missing from the response are deletions. Names that are not
// subscribed on this server are ignored. Resources are applied in slices
// (ApplyResources) so that a huge response need not hold the control loop
// for its whole length; `response` must outlive the applier.
class AdsResponseApplier {
 public:
  AdsResponseApplier(const AdsResponse& response, const XdsResourceType& type,
                     const XdsDecodeContext& context, XdsServerState& server,
                     XdsResourceCache& cache);
  // Decodes and applies up to `max_count` more resources; true once every
  // resource has been.
  bool ApplyResources(size_t max_count);
  // The rest of the resources, then resource_errors and deletions (against
  // the names subscribed now); the verdict.
  AdsResponseOutcome Finish(const std::set<std::string>& subscribed_names);

 private:
  void ApplyResource(size_t index, const std::string& version);
  // #9: a resource whose bytes equal those of the last accepted or rejected
  // version of its name gets that verdict again without being decoded.
  // `wrapper_name`: the name a Resource wrapper gave, if any. True if the
  // verdict was reused.
  bool ReuseVerdict(size_t index, std::string_view wrapper_name, std::string_view serialized,
                    const std::string& version);
  XdsCacheEntry* SubscribedEntry(const XdsResourceName& name);

  const AdsResponse& response_;
  const XdsResourceType& type_;
  const XdsDecodeContext context_;
  XdsServerState& server_;
  XdsResourceCache& cache_;
  const std::chrono::system_clock::time_point now_;
  size_t next_resource_ = 0;
  AdsResponseOutcome outcome_;
  // Names this response speaks about (valid, invalid or TP3 error): not
  // deleted.
  std::unordered_set<std::string> seen_;
  // Every name of `resources`, subscribed or not.
  std::unordered_set<std::string> names_in_response_;
};

}  // namespace uxds::xds_internal
