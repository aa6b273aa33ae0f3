#include "xds/client/ads_protocol.h"

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

AdsResponseOutcome ApplyAdsResponse(const discovery::DiscoveryResponse& response,
                                    const XdsResourceType& type, const XdsDecodeContext& context,
                                    const std::set<std::string>& subscribed_names,
                                    XdsServerState& server, XdsResourceCache& cache) {
  AdsResponseOutcome outcome;
  const auto now = std::chrono::system_clock::now();
  const std::string& version = response.version_info();
  // Names this response speaks about (valid, invalid or TP3 error): not
  // deleted.
  std::set<std::string, std::less<>> seen;
  // Every name of `resources`, subscribed or not.
  std::set<std::string, std::less<>> names_in_response;
  auto subscribed_entry = [&](const XdsResourceName& name) -> XdsCacheEntry* {
    XdsCacheEntry* entry = cache.Find(type, name.key);
    // A47: a name whose authority uses another server is not ours to update.
    return entry != nullptr && &entry->server == &server ? entry : nullptr;
  };

  for (int i = 0; i < response.resources_size(); ++i) {
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
        continue;
      }
      if (!wrapper.has_resource()) {
        outcome.errors.push_back(prefix + "no resource in the Resource wrapper");
        ++outcome.invalid_resources;
        continue;
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
      continue;
    }
    XdsResourceType::DecodeResult decoded = type.Decode(context, serialized);
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
        continue;
      }
      name = *decoded.name;
      prefix += name + ": ";
    }
    StatusOr<XdsResourceName> parsed = ParseXdsResourceName(name, type);
    // A name twice in one response: the second copy is an error of its own
    // (gRPC's "duplicate resource name") and the first copy's verdict stands.
    if (!names_in_response.insert(parsed.ok() ? parsed->key : name).second) {
      outcome.errors.push_back(prefix + "duplicate resource name");
      ++outcome.invalid_resources;
      continue;
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
      continue;
    }
    XdsCacheEntry* entry = subscribed_entry(*parsed);
    if (entry == nullptr) continue;  // not subscribed: ignored
    seen.insert(parsed->key);
    if (!decoded.resource.ok()) {
      cache.OnInvalidResource(*entry, decoded.resource.status().message(), version, now);
    } else {
      cache.OnValidResource(*entry, *std::move(decoded.resource), std::string(serialized), version,
                            now);
    }
  }

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
    StatusOr<XdsResourceName> parsed = ParseXdsResourceName(name, type);
    if (!parsed.ok()) {
      outcome.errors.push_back(prefix + parsed.status().message());
      continue;
    }
    XdsCacheEntry* entry = subscribed_entry(*parsed);
    if (entry == nullptr) continue;  // NOTES: "entries for unsubscribed names are skipped"
    seen.insert(parsed->key);
    cache.OnResourceError(*entry, error, version, now);
  }

  // A88: "LDS and CDS resource deletions" -- every subscribed resource is in
  // every LDS/CDS response, so a missing one was deleted.
  if (type.all_resources_required_in_sotw()) {
    for (const std::string& key : subscribed_names) {
      if (seen.contains(key)) continue;
      XdsCacheEntry* entry = cache.Find(type, key);
      if (entry != nullptr && &entry->server == &server) {
        cache.OnResourceMissing(*entry, version, now);
      }
    }
  }
  return outcome;
}

}  // namespace uxds::xds_internal
