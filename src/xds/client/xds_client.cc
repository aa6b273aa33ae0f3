// The public XdsClient (include/uxds/xds_client.h): argument checks and
// forwarding to XdsClientImpl.
#include "uxds/xds_client.h"

#include <cassert>
#include <utility>

#include "xds/client/xds_client_impl.h"
#include "xds/protobuf_log.h"

namespace uxds {

std::string_view XdsCacheStateName(XdsCacheState state) {
  switch (state) {
    case XdsCacheState::kRequested:
      return "REQUESTED";
    case XdsCacheState::kDoesNotExist:
      return "DOES_NOT_EXIST";
    case XdsCacheState::kAcked:
      return "ACKED";
    case XdsCacheState::kNacked:
      return "NACKED";
    case XdsCacheState::kReceivedError:
      return "RECEIVED_ERROR";
    case XdsCacheState::kTimeout:
      return "TIMEOUT";
  }
  return "UNKNOWN";
}

uint64_t XdsClientMetrics::ResourceCount(std::string_view authority, std::string_view resource_type,
                                         std::string_view cache_state) const {
  for (const ResourceGauge& gauge : resources) {
    if (gauge.authority == authority && gauge.resource_type == resource_type &&
        gauge.cache_state == cache_state) {
      return gauge.count;
    }
  }
  return 0;
}

const XdsClientMetrics::ServerStats* XdsClientMetrics::FindServer(
    std::string_view server_uri) const {
  for (const ServerStats& server : servers) {
    if (server.server_uri == server_uri) return &server;
  }
  return nullptr;
}

uint64_t XdsClientMetrics::ValidUpdates(std::string_view server_uri,
                                        std::string_view resource_type) const {
  for (const ResourceUpdateCounters& counters : resource_updates) {
    if (counters.server_uri == server_uri && counters.resource_type == resource_type) {
      return counters.valid;
    }
  }
  return 0;
}

uint64_t XdsClientMetrics::InvalidUpdates(std::string_view server_uri,
                                          std::string_view resource_type) const {
  for (const ResourceUpdateCounters& counters : resource_updates) {
    if (counters.server_uri == server_uri && counters.resource_type == resource_type) {
      return counters.invalid;
    }
  }
  return 0;
}

StatusOr<std::unique_ptr<XdsClient>> XdsClient::Create(Loop& loop, Bootstrap bootstrap,
                                                       XdsClientOptions options) {
  xds_internal::RouteProtobufLogsToUxdsLog();
  UXDS_RETURN_IF_ERROR(bootstrap.Validate());
  if (options.resource_does_not_exist_timeout.count() <= 0 ||
      options.resource_transient_error_timeout.count() <= 0) {
    return InvalidArgumentError("XdsClientOptions: resource timer durations must be positive");
  }
  if (options.backoff_initial.count() <= 0 || options.backoff_max < options.backoff_initial ||
      options.backoff_multiplier < 1.0 || options.backoff_jitter < 0.0 ||
      options.backoff_jitter >= 1.0) {
    return InvalidArgumentError(
        "XdsClientOptions: backoff needs initial > 0, max >= initial, multiplier >= 1 and "
        "jitter in [0, 1)");
  }
  if (options.connect_timeout.count() <= 0) {
    return InvalidArgumentError("XdsClientOptions: connect_timeout must be positive");
  }
  return std::unique_ptr<XdsClient>(new XdsClient(std::make_unique<xds_internal::XdsClientImpl>(
      loop, std::move(bootstrap), std::move(options))));
}

XdsClient::XdsClient(std::unique_ptr<xds_internal::XdsClientImpl> impl) : impl_(std::move(impl)) {}

XdsClient::~XdsClient() {
  assert(impl_->loop().InLoopThread());
  xds_internal::XdsClientImpl::DestroyAfterShutdown(std::move(impl_));
}

namespace xds_internal {
XdsClientImpl& ImplOf(XdsClient& client) { return *client.impl_; }
}  // namespace xds_internal

Task<void> XdsClient::Shutdown() { return impl_->Shutdown(); }

void XdsClient::ShutdownAndDestroy(std::unique_ptr<XdsClient> client) {
  Loop& loop = client->loop();
  auto shutdown = [](std::unique_ptr<XdsClient> owned) -> Task<void> {
    co_await owned->Shutdown();
  };
  loop.Spawn(shutdown(std::move(client)));
}

void XdsClient::WatchAnyResource(const XdsResourceType& type, std::string_view name,
                                 std::shared_ptr<XdsResourceWatcherInterface> watcher) {
  assert(watcher != nullptr);
  impl_->WatchResource(type, name, std::move(watcher));
}

void XdsClient::CancelWatch(const XdsResourceType& type, std::string_view name,
                            const XdsResourceWatcherInterface* watcher) {
  impl_->CancelWatch(type, name, watcher);
}

std::string XdsClient::DumpClientConfig() const {
  return impl_->DumpClientConfig().SerializeAsString();
}

std::vector<XdsResourceSnapshot> XdsClient::Snapshot() const { return impl_->Snapshot(); }

std::optional<XdsResourceSnapshot> XdsClient::Lookup(const XdsResourceType& type,
                                                     std::string_view name,
                                                     bool with_resource_json) const {
  return impl_->Lookup(type, name, with_resource_json);
}

XdsClientMetrics XdsClient::GetMetrics() const { return impl_->Metrics(); }

Loop& XdsClient::loop() const { return impl_->loop(); }

const Bootstrap& XdsClient::bootstrap() const { return impl_->bootstrap(); }

}  // namespace uxds
