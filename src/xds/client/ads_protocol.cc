#include "xds/client/ads_protocol.h"

#include <algorithm>

#include <chrono>
#include <iterator>
#include <string_view>
#include <utility>

#include "google/protobuf/any.pb.h"
#include "xds/client/protobuf_wire.h"
#include "xds/client/xds_resource_name.h"

namespace uxds::xds_internal {

namespace discovery = envoy::service::discovery::v3;

namespace {

// DiscoveryRequest.resource_names.
constexpr uint32_t kResourceNamesField = 3;
// DiscoveryResponse.resources, and google.protobuf.Any's two fields.
constexpr uint32_t kResourcesField = 2;
constexpr uint32_t kAnyTypeUrlField = 1;
constexpr uint32_t kAnyValueField = 2;
// Cluster.name, Listener.name, RouteConfiguration.name and
// ClusterLoadAssignment.cluster_name are all field 1.
constexpr uint32_t kResourceNameField = 1;

// The type_url and value of a serialized Any, as protobuf would read them
// (the last occurrence of each; a field of the wrong wire type is unknown).
struct AnyView {
  std::string_view type_url;
  std::string_view value;
};
bool ReadAny(std::string_view serialized, AnyView& any) {
  ProtobufWireReader reader(serialized);
  ProtobufWireReader::Field field;
  any = {};
  while (reader.Next(field)) {
    if (field.wire_type != WireType::kLengthDelimited) continue;
    if (field.number == kAnyTypeUrlField) any.type_url = field.payload;
    if (field.number == kAnyValueField) any.value = field.payload;
  }
  // proto3 strings must be UTF-8, or protobuf refuses the message.
  return !reader.failed() && FindInvalidUtf8(any.type_url) == std::string_view::npos;
}

// "resource index <i>: <name>: " (NOTES "ACK / NACK"), built only for an
// error: most resources have none.
std::string ErrorPrefix(size_t index, std::string_view name) {
  std::string prefix = "resource index " + std::to_string(index) + ": ";
  if (!name.empty()) prefix.append(name).append(": ");
  return prefix;
}

}  // namespace

void AppendAdsRequestFields(const AdsRequest& request, std::string& out) {
  discovery::DiscoveryRequest proto;
  proto.set_type_url(request.type_url);
  proto.set_version_info(request.version_info);
  proto.set_response_nonce(request.response_nonce);
  if (!request.error_detail.ok()) {
    proto.mutable_error_detail()->set_code(static_cast<int32_t>(request.error_detail.code()));
    proto.mutable_error_detail()->set_message(request.error_detail.message());
  }
  if (request.node != nullptr) *proto.mutable_node() = *request.node;
  proto.AppendToString(&out);
}

void AppendResourceName(std::string_view name, std::string& out) {
  AppendLengthDelimited(out, kResourceNamesField, name);
}

AdsResponseReader::Progress AdsResponseReader::Read(size_t max_fields) {
  // The resources stay where they are; every other field is decoded by
  // protobuf, from a copy of just those fields.
  ProtobufWireReader::Field field;
  AnyView any;
  for (size_t read = 0; read < max_fields; ++read) {
    if (!reader_.Next(field)) {
      if (reader_.failed() || !response_.fields.ParseFromString(other_fields_)) {
        return Progress::kInvalid;
      }
      return Progress::kDone;
    }
    if (field.number == kResourcesField && field.wire_type == WireType::kLengthDelimited) {
      if (!ReadAny(field.payload, any)) return Progress::kInvalid;
      response_.resources.push_back(field.payload);
    } else {
      other_fields_.append(field.encoded);
    }
  }
  return Progress::kMore;
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

AdsResponseApplier::AdsResponseApplier(const AdsResponse& response, const XdsResourceType& type,
                                       const XdsDecodeContext& context, XdsServerState& server,
                                       XdsResourceCache& cache)
    : response_(response),
      type_(type),
      context_(context),
      server_(server),
      cache_(cache),
      now_(std::chrono::system_clock::now()),
      stamp_(cache.NextResponseStamp()) {}

bool AdsResponseApplier::MarkSeen(std::string_view key, XdsCacheEntry* entry) {
  // Names nobody here watches are rare: those few are kept by name.
  if (entry == nullptr) return unsubscribed_names_.emplace(key).second;
  // A copy that came before a watch of the name started, between two slices.
  if (!unsubscribed_names_.empty() && unsubscribed_names_.contains(std::string(key))) return false;
  if (entry->response_stamp == stamp_) return false;
  entry->response_stamp = stamp_;
  ++seen_entries_;
  return true;
}

XdsCacheEntry* AdsResponseApplier::SubscribedEntry(const XdsResourceName& name) {
  XdsCacheEntry* entry = cache_.Find(type_, name.key);
  // A47: a name whose authority uses another server is not ours to update.
  // A71: nor is one whose data must come from a higher-priority server.
  return entry != nullptr && entry->TakesDataFrom(server_) ? entry : nullptr;
}

bool AdsResponseApplier::ApplyResources(size_t max_count) {
  const std::string& version = response_.fields.version_info();
  const size_t end = std::min(response_.resources.size(), next_resource_ + max_count);
  for (; next_resource_ < end; ++next_resource_) ApplyResource(next_resource_, version);
  return next_resource_ >= response_.resources.size();
}

void AdsResponseApplier::ApplyResource(size_t i, const std::string& version) {
  AdsResponseOutcome& outcome = outcome_;
  const XdsResourceType& type = type_;
  AnyView any;
  ReadAny(response_.resources[i], any);  // checked by ParseAdsResponse
  std::string_view resource_type_url = any.type_url;
  std::string_view serialized = any.value;
  std::string name;
  discovery::Resource wrapper;
  if (resource_type_url == kResourceWrapperTypeUrl) {
    if (!wrapper.ParseFromArray(any.value.data(), static_cast<int>(any.value.size()))) {
      outcome.errors.push_back(ErrorPrefix(i, name) + "cannot decode Resource wrapper");
      ++outcome.invalid_resources;
      return;
    }
    if (!wrapper.has_resource()) {
      outcome.errors.push_back(ErrorPrefix(i, name) + "no resource in the Resource wrapper");
      ++outcome.invalid_resources;
      return;
    }
    resource_type_url = wrapper.resource().type_url();
    serialized = wrapper.resource().value();
    name = wrapper.name();
  }
  // NOTES: "A resource's type_url must equal the response's".
  if (resource_type_url != response_.fields.type_url()) {
    outcome.errors.push_back(ErrorPrefix(i, name) + "incorrect resource type \"" +
                             std::string(resource_type_url) + "\" (should be \"" +
                             response_.fields.type_url() + "\")");
    ++outcome.invalid_resources;
    return;
  }
  NameLookup lookup;
  if (ReuseVerdict(i, name, serialized, version, lookup)) return;
  const bool named_by_wrapper = !name.empty();
  XdsResourceType::DecodeResult decoded = type.Decode(context_, serialized);
  if (decoded.resource.ok() && *decoded.resource == nullptr) {
    // A decoder bug, not the server's: still reported, never cached.
    decoded.resource = InternalError("resource type " + std::string(type.type_name()) +
                                     " decoded no resource and no error");
  }
  if (name.empty()) {
    if (!decoded.name.has_value()) {
      // A46: without a name the error can only go into the NACK.
      outcome.errors.push_back(ErrorPrefix(i, name) + decoded.resource.status().message());
      ++outcome.invalid_resources;
      return;
    }
    name = *decoded.name;
  }
  StatusOr<XdsResourceName> parsed = InvalidArgumentError("");
  XdsCacheEntry* entry = nullptr;
  if (lookup.parsed.has_value() && lookup.raw_name == name) {
    parsed = *std::move(lookup.parsed);
    entry = lookup.entry;
  } else {
    parsed = ParseXdsResourceName(name, type);
    if (parsed.ok()) entry = SubscribedEntry(*parsed);
  }
  // A name twice in one response: the second copy is an error of its own
  // (gRPC's "duplicate resource name") and the first copy's verdict stands.
  if (!MarkSeen(parsed.ok() ? std::string_view(parsed->key) : std::string_view(name), entry)) {
    outcome.errors.push_back(ErrorPrefix(i, name) + "duplicate resource name");
    ++outcome.invalid_resources;
    return;
  }
  if (!decoded.resource.ok()) {
    outcome.errors.push_back(ErrorPrefix(i, name) + decoded.resource.status().message());
    ++outcome.invalid_resources;
  } else {
    ++outcome.valid_resources;
  }
  if (!parsed.ok()) {
    if (decoded.resource.ok()) {
      outcome.errors.push_back(ErrorPrefix(i, name) + parsed.status().message());
      --outcome.valid_resources;
      ++outcome.invalid_resources;
    }
    return;
  }
  if (entry == nullptr) return;  // not subscribed: ignored
  if (!decoded.resource.ok()) {
    cache_.OnInvalidResource(*entry, decoded.resource.status().message(), std::string(serialized),
                             named_by_wrapper, version, now_);
  } else {
    cache_.OnValidResource(*entry, *std::move(decoded.resource), std::string(serialized),
                           named_by_wrapper, version, now_);
  }
}

bool AdsResponseApplier::ReuseVerdict(size_t index, std::string_view wrapper_name,
                                      std::string_view serialized, const std::string& version,
                                      NameLookup& lookup) {
  // Without a wrapper the name is in the bytes. Reading it without decoding
  // is only a guess at which entry to look in: the verdict is reused only if
  // that entry decoded these very bytes, named the same way, and so got
  // exactly this name from them.
  const bool named_by_wrapper = !wrapper_name.empty();
  std::string_view name = wrapper_name;
  if (!named_by_wrapper && !LastLengthDelimitedField(serialized, kResourceNameField, name)) {
    return false;
  }
  StatusOr<XdsResourceName> parsed = ParseXdsResourceName(name, type_);
  if (!parsed.ok()) return false;
  XdsCacheEntry* entry = SubscribedEntry(*parsed);
  lookup.raw_name = name;
  lookup.entry = entry;
  lookup.parsed = *std::move(parsed);
  if (entry == nullptr) return false;
  // The same bytes decode differently on another server (the decode context
  // names the server: a Cluster's lrs_server `self`), so a verdict is only
  // reused for the server that gave it. A71: after a switch back the
  // primary's identical copy of a fallback's Cluster reports load to the
  // primary.
  const bool accepted = entry->resource != nullptr && entry->decoded_from == &server_ &&
                        entry->named_by_wrapper == named_by_wrapper &&
                        entry->serialized == serialized;
  const bool rejected = !accepted && entry->rejected.has_value() &&
                        entry->rejected->decoded_from == &server_ &&
                        entry->rejected->named_by_wrapper == named_by_wrapper &&
                        entry->rejected->serialized == serialized;
  if (!accepted && !rejected) return false;
  // As after decoding: a second copy in one response is an error of its own.
  if (!MarkSeen(lookup.parsed->key, entry)) {
    outcome_.errors.push_back(ErrorPrefix(index, name) + "duplicate resource name");
    ++outcome_.invalid_resources;
    return true;
  }
  if (accepted) {
    ++outcome_.valid_resources;
    cache_.OnAcceptedVersionResent(*entry, version, now_);
  } else {
    outcome_.errors.push_back(ErrorPrefix(index, name) + entry->rejected->details);
    ++outcome_.invalid_resources;
    cache_.OnRejectedVersionResent(*entry, version, now_);
  }
  return true;
}

void AdsResponseApplier::ApplyResourceErrors() {
  AdsResponseOutcome& outcome = outcome_;
  const discovery::DiscoveryResponse& response = response_.fields;
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
    MarkSeen(parsed->key, entry);    // a name may have a resource and an error
    cache_.OnResourceError(*entry, error, version, now_);
  }
}

bool AdsResponseApplier::ApplyErrorsAndDeletions(const SubscribedNames& subscribed,
                                                 size_t max_count) {
  if (!std::exchange(resource_errors_applied_, true)) ApplyResourceErrors();
  // A88: "LDS and CDS resource deletions" -- every subscribed resource is in
  // every LDS/CDS response, so a missing one was deleted.
  // Only names with an entry of this server are seen, and those are exactly
  // the names subscribed here: when as many were seen as are subscribed,
  // none is missing, and 10 000 names need not be walked again.
  if (!walk_deletions_.has_value()) {
    walk_deletions_ = type_.all_resources_required_in_sotw() && seen_entries_ != subscribed.size();
  }
  if (!*walk_deletions_) return true;
  const std::string& version = response_.fields.version_info();
  // Resumed after the last name looked at: names (un)subscribed meanwhile
  // keep the walk's place valid. One subscribed since has no resource, so
  // it is not deleted.
  auto it = walked_up_to_.has_value() ? subscribed.upper_bound(*walked_up_to_) : subscribed.begin();
  for (size_t looked_at = 0; it != subscribed.end(); ++it) {
    if (looked_at++ == max_count) {
      walked_up_to_ = std::prev(it)->first;
      return false;
    }
    XdsCacheEntry* entry = cache_.Find(type_, it->first);
    if (entry != nullptr && entry->response_stamp != stamp_ && entry->TakesDataFrom(server_)) {
      cache_.OnResourceMissing(*entry, version, now_);
    }
  }
  return true;
}

}  // namespace uxds::xds_internal
