// The State-of-the-World ADS messages: building a DiscoveryRequest and
// applying a DiscoveryResponse to the cache (A46, A88, TP3).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "envoy/config/core/v3/base.pb.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "uxds/status.h"
#include "uxds/xds_resource_type.h"
#include "xds/client/protobuf_wire.h"
#include "xds/client/xds_resource_cache.h"

namespace uxds::xds_internal {

inline constexpr std::string_view kAdsMethod =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
// NOTES: gRPC accepts resources wrapped in envoy.service.discovery.v3.Resource
// and says so with this client feature.
inline constexpr std::string_view kResourceWrapperTypeUrl =
    "type.googleapis.com/envoy.service.discovery.v3.Resource";
inline constexpr std::string_view kClientFeatureResourceInSotw = "xds.config.resource-in-sotw";

// The names subscribed for one resource type, each with the serial number
// of its subscription: which requests carry it is told by comparing serials
// (XdsServerChannel), not by keeping a copy of the names sent.
using SubscribedNames = std::map<std::string, uint64_t, std::less<>>;

struct AdsRequest {
  std::string type_url;
  std::string version_info;    // last accepted version of the type
  std::string response_nonce;  // nonce of the response this request answers
  Status error_detail;         // not OK: a NACK
  const envoy::config::core::v3::Node* node = nullptr;  // first request of a stream only
};
// Every field but resource_names, appended to `out`: protobuf fields may come
// in any order, so the names can be written first, a slice at a time, with
// AppendResourceName, and the rest when the request is decided.
void AppendAdsRequestFields(const AdsRequest& request, std::string& out);
// One DiscoveryRequest.resource_names entry.
void AppendResourceName(std::string_view name, std::string& out);

// A DiscoveryResponse read without copying its resources (100 000 Clusters
// are about 10 MB): each stays a view into the message bytes, which must
// outlive it, and is decoded when it is applied, a slice at a time.
struct AdsResponse {
  // Every field but the resources, decoded as usual.
  envoy::service::discovery::v3::DiscoveryResponse fields;
  std::vector<std::string_view> resources;  // each a serialized google.protobuf.Any
};
// Reads a DiscoveryResponse into an AdsResponse a slice at a time: checking
// 100 000 resources is milliseconds of work. `serialized` must outlive it.
class AdsResponseReader {
 public:
  enum class Progress { kMore, kDone, kInvalid };
  explicit AdsResponseReader(std::string_view serialized) : reader_(serialized) {}
  // Reads up to `max_fields` more fields. kInvalid if `serialized` is not a
  // DiscoveryResponse (the same bytes protobuf would refuse; NOTES: such a
  // response is ignored).
  Progress Read(size_t max_fields);
  AdsResponse& response() { return response_; }

 private:
  ProtobufWireReader reader_;
  AdsResponse response_;
  // Every field but the resources, decoded by protobuf at the end.
  std::string other_fields_;
};

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
  // Once every resource is applied: TP3 resource_errors, then the deletions
  // among `subscribed`, looking at up to `max_count` subscribed names per
  // call; true when done. Names may be (un)subscribed between two calls.
  bool ApplyErrorsAndDeletions(const SubscribedNames& subscribed, size_t max_count);
  // The verdict, once ApplyErrorsAndDeletions returned true.
  const AdsResponseOutcome& outcome() const { return outcome_; }

 private:
  void ApplyResourceErrors();
  // Marks `key` as spoken of by this response; false if it already was
  // (the same name twice). `entry`: its subscribed entry, if any.
  bool MarkSeen(std::string_view key, XdsCacheEntry* entry);
  // A resource's name as read before decoding, parsed, and its subscribed
  // entry: decoding that yields the same name need not look it up again.
  struct NameLookup {
    std::string_view raw_name;
    std::optional<XdsResourceName> parsed;
    XdsCacheEntry* entry = nullptr;
  };
  void ApplyResource(size_t index, const std::string& version);
  // #9: a resource whose bytes equal those of the last accepted or rejected
  // version of its name, decoded for this same server, gets that verdict
  // again without being decoded.
  // `wrapper_name`: the name a Resource wrapper gave, if any. True if the
  // verdict was reused; otherwise `lookup` holds what was found of the name.
  bool ReuseVerdict(size_t index, std::string_view wrapper_name, std::string_view serialized,
                    const std::string& version, NameLookup& lookup);
  XdsCacheEntry* SubscribedEntry(const XdsResourceName& name);

  const AdsResponse& response_;
  const XdsResourceType& type_;
  const XdsDecodeContext context_;
  XdsServerState& server_;
  XdsResourceCache& cache_;
  const std::chrono::system_clock::time_point now_;
  size_t next_resource_ = 0;
  AdsResponseOutcome outcome_;
  // Subscribed entries this response speaks of (valid, invalid or TP3
  // error) carry this stamp and are not deleted; how many do.
  const uint64_t stamp_;
  size_t seen_entries_ = 0;
  // Names of `resources` without a subscribed entry here: a second copy of
  // one is still an error. Usually none.
  std::unordered_set<std::string> unsubscribed_names_;
  bool resource_errors_applied_ = false;
  // The deletion walk: whether it is needed, and the last name it looked at.
  std::optional<bool> walk_deletions_;
  std::optional<std::string> walked_up_to_;
};

}  // namespace uxds::xds_internal
