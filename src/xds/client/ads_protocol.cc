#include "xds/client/ads_protocol.h"

#include <algorithm>

#include <chrono>
#include <string_view>

#include "google/protobuf/any.pb.h"
#include "xds/client/xds_resource_name.h"

namespace uxds::xds_internal {

namespace discovery = envoy::service::discovery::v3;

std::string SerializeAdsRequest(const AdsRequest& request) {
  discovery::DiscoveryRequest proto;
  proto.set_type_url(request.type_url);
  proto.set_version_info(request.version_info);
  proto.set_response_nonce(request.response_nonce);
  for (const std::string& name : request.resource_names) proto.add_resource_names(name);
  if (!request.error_detail.ok()) {
    proto.mutable_error_detail()->set_code(static_cast<int32_t>(request.error_detail.code()));
    proto.mutable_error_detail()->set_message(request.error_detail.message());
  }
  if (request.node != nullptr) *proto.mutable_node() = *request.node;
  return proto.SerializeAsString();
}

Status AdsResponseOutcome::NackStatus() const {
  if (errors.empty()) return Status();
  std::string message = "xDS response validation errors: [";
  for (size_t i = 0; i < errors.size(); ++i) {
    if (i > 0) message += "; ";
    message += errors[i];
  }
  message += "]";
  return InvalidArgumentError(std::move(message));
}

AdsResponseApplier::AdsResponseApplier(const discovery::DiscoveryResponse& response,
                                       const XdsResourceType& type, const XdsDecodeContext& context,
                                       XdsServerState& server, XdsResourceCache& cache)
    : response_(response),
      type_(type),
      context_(context),
      server_(server),
      cache_(cache),
      now_(std::chrono::system_clock::now()) {}

XdsCacheEntry* AdsResponseApplier::SubscribedEntry(const XdsResourceName& name) {
  XdsCacheEntry* entry = cache_.Find(type_, name.key);
  // A47: a name whose authority uses another server is not ours to update.
  // A71: nor is one whose data must come from a higher-priority server.
  return entry != nullptr && entry->TakesDataFrom(server_) ? entry : nullptr;
}

bool AdsResponseApplier::ApplyResources(size_t max_count) {
  const std::string& version = response_.version_info();
  const size_t end =
      std::min<size_t>(static_cast<size_t>(response_.resources_size()), next_resource_ + max_count);
  for (; next_resource_ < end; ++next_resource_) {
    const int i = static_cast<int>(next_resource_);
    ApplyResource(i, version);
  }
  return next_resource_ >= static_cast<size_t>(response_.resources_size());
}

void AdsResponseApplier::ApplyResource(int i, const std::string& version) {
  AdsResponseOutcome& outcome = outcome_;
  const discovery::DiscoveryResponse& response = response_;
  const XdsResourceType& type = type_;
  const google::protobuf::Any& any = response.resources(i);
  std::string prefix = "resource index " + std::to_string(i) + ": ";
  std::string_view resource_type_url = any.type_url();
  std::string_view serialized = any.value();
  std::string name;
  discovery::Resource wrapper;
  if (resource_type_url == kResourceWrapperTypeUrl) {
    if (!wrapper.ParseFromString(any.value())) {
      outcome.errors.push_back(prefix + "cannot decode Resource wrapper");
      ++outcome.invalid_resources;
      return;
    }
    if (!wrapper.has_resource()) {
      outcome.errors.push_back(prefix + "no resource in the Resource wrapper");
      ++outcome.invalid_resources;
      return;
    }
    resource_type_url = wrapper.resource().type_url();
    serialized = wrapper.resource().value();
    name = wrapper.name();
  }
  if (!name.empty()) prefix += name + ": ";
  // NOTES: "A resource's type_url must equal the response's".
  if (resource_type_url != response.type_url()) {
    outcome.errors.push_back(prefix + "incorrect resource type \"" +
                             std::string(resource_type_url) + "\" (should be \"" +
                             response.type_url() + "\")");
    ++outcome.invalid_resources;
    return;
  }
  XdsResourceType::DecodeResult decoded = type.Decode(context_, serialized);
  if (decoded.resource.ok() && *decoded.resource == nullptr) {
    // A decoder bug, not the server's: still reported, never cached.
    decoded.resource = InternalError("resource type " + std::string(type.type_name()) +
                                     " decoded no resource and no error");
  }
  if (name.empty()) {
    if (!decoded.name.has_value()) {
      // A46: without a name the error can only go into the NACK.
      outcome.errors.push_back(prefix + decoded.resource.status().message());
      ++outcome.invalid_resources;
      return;
    }
    name = *decoded.name;
    prefix += name + ": ";
  }
  StatusOr<XdsResourceName> parsed = ParseXdsResourceName(name, type);
  // A name twice in one response: the second copy is an error of its own
  // (gRPC's "duplicate resource name") and the first copy's verdict stands.
  if (!names_in_response_.insert(parsed.ok() ? parsed->key : name).second) {
    outcome.errors.push_back(prefix + "duplicate resource name");
    ++outcome.invalid_resources;
    return;
  }
  if (!decoded.resource.ok()) {
    outcome.errors.push_back(prefix + decoded.resource.status().message());
    ++outcome.invalid_resources;
  } else {
    ++outcome.valid_resources;
  }
  if (!parsed.ok()) {
    if (decoded.resource.ok()) {
      outcome.errors.push_back(prefix + parsed.status().message());
      --outcome.valid_resources;
      ++outcome.invalid_resources;
    }
    return;
  }
  XdsCacheEntry* entry = SubscribedEntry(*parsed);
  if (entry == nullptr) return;  // not subscribed: ignored
  seen_.insert(parsed->key);
  if (!decoded.resource.ok()) {
    cache_.OnInvalidResource(*entry, decoded.resource.status().message(), version, now_);
  } else {
    cache_.OnValidResource(*entry, *std::move(decoded.resource), std::string(serialized), version,
                           now_);
  }
}

AdsResponseOutcome AdsResponseApplier::Finish(const std::set<std::string>& subscribed_names) {
  ApplyResources(static_cast<size_t>(response_.resources_size()));
  AdsResponseOutcome& outcome = outcome_;
  const discovery::DiscoveryResponse& response = response_;
  const std::string& version = response.version_info();
  // TP3 resource_errors.
  for (int i = 0; i < response.resource_errors_size(); ++i) {
    const discovery::ResourceError& resource_error = response.resource_errors(i);
    std::string prefix = "resource_errors index " + std::to_string(i) + ": ";
    const std::string& name = resource_error.resource_name().name();
    // NOTES: "TP3 entries with an empty name or an OK status are errors (NACK)".
    if (name.empty()) {
      outcome.errors.push_back(prefix + "resource_name.name is empty");
      continue;
    }
    prefix += name + ": ";
    const Status error(StatusCodeFromInt(resource_error.error_detail().code()),
                       resource_error.error_detail().message());
    if (error.ok()) {
      outcome.errors.push_back(prefix + "error_detail.code is OK");
      continue;
    }
    StatusOr<XdsResourceName> parsed = ParseXdsResourceName(name, type_);
    if (!parsed.ok()) {
      outcome.errors.push_back(prefix + parsed.status().message());
      continue;
    }
    XdsCacheEntry* entry = SubscribedEntry(*parsed);
    if (entry == nullptr) continue;  // NOTES: "entries for unsubscribed names are skipped"
    seen_.insert(parsed->key);
    cache_.OnResourceError(*entry, error, version, now_);
  }

  // A88: "LDS and CDS resource deletions" -- every subscribed resource is in
  // every LDS/CDS response, so a missing one was deleted.
  if (type_.all_resources_required_in_sotw()) {
    for (const std::string& key : subscribed_names) {
      if (seen_.contains(key)) continue;
      XdsCacheEntry* entry = cache_.Find(type_, key);
      if (entry != nullptr && entry->TakesDataFrom(server_)) {
        cache_.OnResourceMissing(*entry, version, now_);
      }
    }
  }
  return outcome;
}

}  // namespace uxds::xds_internal
