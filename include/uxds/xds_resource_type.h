// Pluggable xDS resource types and the typed watcher interface (A88).
//
// The XdsClient knows nothing about Listeners or Clusters: each resource type
// is an XdsResourceType that turns the serialized bytes of one resource into
// a plain C++ struct (no protobuf downstream). A type is usually written as
//
//   struct ClusterResource { ...; friend bool operator==(...) = default; };
//
//   class ClusterResourceType final : public XdsResourceTypeImpl<ClusterResource> {
//    public:
//     static const ClusterResourceType& Get();  // one instance, lives forever
//     std::string_view type_url() const override {
//       return "type.googleapis.com/envoy.config.cluster.v3.Cluster";
//     }
//     bool all_resources_required_in_sotw() const override { return true; }
//     DecodeResult Decode(const XdsDecodeContext& context,
//                         std::string_view serialized) const override;
//     std::string ToJson(const ClusterResource& resource) const override;
//   };
//
// and watched with
//
//   class MyWatcher : public XdsResourceWatcher<ClusterResource> {
//     void OnResourceChanged(StatusOr<std::shared_ptr<const ClusterResource>> r) override;
//     void OnAmbientError(Status status) override;
//   };
//   client.WatchResource(ClusterResourceType::Get(), "c1", std::make_shared<MyWatcher>());
//
// (a ListenerResource watcher with ClusterResourceType::Get() does not compile).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "uxds/bootstrap.h"
#include "uxds/status.h"

namespace uxds {

// A parsed resource, type-erased. The XdsResourceType that made it knows its
// real type; it is immutable once decoded and may be handed to other threads.
using XdsResourceData = std::shared_ptr<const void>;

// What a decoder may need besides the bytes.
struct XdsDecodeContext {
  const Bootstrap& bootstrap;
  // The server the resource came from (e.g. a Cluster's LRS "self" config
  // source means this server).
  const XdsServerConfig& server;
};

class XdsResourceType {
 public:
  // A46: one bad resource is NACKed without losing its siblings, which needs
  // the resource name even when the rest of the resource is invalid.
  struct DecodeResult {
    // The resource name, if the bytes could be read that far. Without a name
    // an invalid resource can only be reported in the NACK.
    std::optional<std::string> name;
    // The parsed resource, or INVALID_ARGUMENT listing every problem (see
    // ValidationErrors), e.g. "errors validating Cluster resource: [field:...]".
    StatusOr<XdsResourceData> resource = XdsResourceData();
  };

  virtual ~XdsResourceType() = default;

  // "type.googleapis.com/envoy.config.cluster.v3.Cluster": the type_url of
  // DiscoveryRequest/Response and of each resource's Any.
  virtual std::string_view type_url() const = 0;
  // The message name without "type.googleapis.com/": the resource type in
  // xdstp:// names (A47) and the grpc.xds.resource_type metric label (A78).
  std::string_view type_name() const {
    std::string_view url = type_url();
    const size_t slash = url.rfind('/');
    return slash == std::string_view::npos ? url : url.substr(slash + 1);
  }
  // True for LDS and CDS: every State-of-the-World response carries every
  // subscribed resource, so a cached resource missing from a response has been
  // deleted (a data error, A88). False for RDS and EDS.
  virtual bool all_resources_required_in_sotw() const = 0;

  // Decodes and validates one resource (the Any's value bytes). Runs on the
  // control thread.
  virtual DecodeResult Decode(const XdsDecodeContext& context,
                              std::string_view serialized) const = 0;
  // Deep equality of two resources this type decoded: an identical re-sent
  // resource notifies nobody.
  virtual bool ResourcesEqual(const XdsResourceData& a, const XdsResourceData& b) const = 0;
  // A readable JSON summary of a resource this type decoded, for `uxds watch`
  // and cache snapshots (one JSON value, compact or indented).
  virtual std::string ResourceToJson(const XdsResourceData& resource) const = 0;
};

// What the XdsClient stores for one watch. Applications implement one of its
// two subclasses: XdsResourceWatcher<T> (the resource as a T, tied to its
// type at compile time) or XdsUntypedResourceWatcher (the type-erased
// resource, for code that handles every type alike, e.g. `uxds watch`).
// Callbacks run on the XdsClient's loop thread, one at a time, never from
// inside WatchResource()/CancelWatch() or a cache update: they are queued and
// delivered on a later loop turn, in order. No callback arrives after
// CancelWatch() returned.
class XdsResourceWatcherInterface {
 public:
  virtual ~XdsResourceWatcherInterface() = default;

  // A88: a new version of the resource, or an error explaining why it cannot
  // be had. After an error the watcher stops using any resource it got
  // before (the XdsClient dropped it from its cache too). Called by the
  // XdsClient; the subclasses turn it into their OnResourceChanged().
  virtual void OnGenericResourceChanged(StatusOr<XdsResourceData> resource) = 0;
  // A88: an error that does not change which resource the watcher uses (a
  // transient failure, or a data error ignored without fail_on_data_errors).
  // OK clears the previous ambient error.
  virtual void OnAmbientError(Status status) = 0;

 private:
  // Only the two subclasses below derive from it, so a watcher registered
  // with the XdsClient is always one of them.
  template <typename T>
  friend class XdsResourceWatcher;
  friend class XdsUntypedResourceWatcher;
  XdsResourceWatcherInterface() = default;
};

// A88's watcher for resources of type T. XdsClient::WatchResource() takes it
// only with an XdsResourceTypeImpl<T>, so the cast below always holds: a
// watch of the wrong type does not compile.
template <typename T>
class XdsResourceWatcher : public XdsResourceWatcherInterface {
 public:
  virtual void OnResourceChanged(StatusOr<std::shared_ptr<const T>> resource) = 0;

 private:
  void OnGenericResourceChanged(StatusOr<XdsResourceData> resource) final {
    if (!resource.ok()) {
      OnResourceChanged(resource.status());
      return;
    }
    OnResourceChanged(std::static_pointer_cast<const T>(*std::move(resource)));
  }
};

// A watcher of any type that never looks inside the resource itself: it
// hands it back to the XdsResourceType it watched (ResourceToJson, ...).
class XdsUntypedResourceWatcher : public XdsResourceWatcherInterface {
 public:
  virtual void OnResourceChanged(StatusOr<XdsResourceData> resource) = 0;

 private:
  void OnGenericResourceChanged(StatusOr<XdsResourceData> resource) final {
    OnResourceChanged(std::move(resource));
  }
};

// Base for a resource type whose parsed form is T (T has operator==).
template <typename T>
class XdsResourceTypeImpl : public XdsResourceType {
 public:
  using Resource = T;
  using Watcher = XdsResourceWatcher<T>;

  bool ResourcesEqual(const XdsResourceData& a, const XdsResourceData& b) const override {
    return *static_cast<const T*>(a.get()) == *static_cast<const T*>(b.get());
  }
  std::string ResourceToJson(const XdsResourceData& resource) const final {
    return ToJson(*static_cast<const T*>(resource.get()));
  }
  virtual std::string ToJson(const T& resource) const = 0;

 protected:
  // Helpers for Decode().
  static DecodeResult Valid(std::string name, T resource) {
    return {std::move(name), XdsResourceData(std::make_shared<const T>(std::move(resource)))};
  }
  static DecodeResult Invalid(std::optional<std::string> name, Status error) {
    return {std::move(name), std::move(error)};
  }
};

}  // namespace uxds
