// ServerConfigWatcher: the control-thread half of an xDS-enabled server. It
// watches the server's Listener and the RouteConfigurations its
// HttpConnectionManagers name (RDS), and turns what arrives into serving
// decisions (A36):
//  - a Listener is applied only once every RouteConfiguration it names has
//    been attempted (received, or known missing or broken);
//  - a Listener that is not a server listener, or whose address is not the
//    listening address, means "not serving";
//  - a Listener error delivered through OnResourceChanged (A88: a data error
//    the client dropped the resource for, or none was ever received) means
//    "not serving"; ambient errors keep the configuration in use;
//  - an RDS update goes to the live route table, without draining;
//  - configuration error logging: a warning per update while RPCs are bound
//    to fail (broken RDS, a route without non_forwarding_action), one more
//    once that is fixed.
//
// Control thread only (the XdsClient's loop).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "http2/service_registry.h"
#include "server/server_routing.h"
#include "server/serving_config.h"
#include "uxds/xds_client.h"
#include "uxds/xds_resources.h"

namespace uxds::server {

class ServerConfigWatcher {
 public:
  struct Callbacks {
    // A complete configuration to serve with.
    std::function<void(std::shared_ptr<const ServingConfig> config)> apply;
    // A new value for a route table that connections may be using.
    std::function<void(std::shared_ptr<RouteTable> table,
                       StatusOr<std::shared_ptr<const RouteConfigResource>> routes)>
        update_routes;
    // Stop serving (drain what is open, accept and close the rest).
    std::function<void(Status reason)> not_serving;
    // A29: how a chain's connections are secured (null, or none set:
    // plaintext).
    std::function<std::shared_ptr<const DownstreamTls>(const FilterChain& chain)> tls_for;
  };

  // Starts the Listener watch.
  ServerConfigWatcher(XdsClient& client, std::string listener_name, std::string listening_address,
                      std::shared_ptr<const http2::ServiceRegistry> registry, Callbacks callbacks);
  // Cancels every watch; no callback after this.
  ~ServerConfigWatcher();
  ServerConfigWatcher(const ServerConfigWatcher&) = delete;
  ServerConfigWatcher& operator=(const ServerConfigWatcher&) = delete;

 private:
  template <typename T>
  class Watcher;
  struct RdsState {
    std::shared_ptr<Watcher<RouteConfigResource>> watcher;
    // nullopt: nothing yet.
    std::optional<StatusOr<std::shared_ptr<const RouteConfigResource>>> update;
    // What connections read, on every serving loop (update_routes sets it).
    std::shared_ptr<RouteTable> table = std::make_shared<RouteTable>();
  };

  void OnListener(StatusOr<std::shared_ptr<const ListenerResource>> listener);
  void OnListenerAmbientError(const Status& status);
  void OnRouteConfig(const std::string& name,
                     StatusOr<std::shared_ptr<const RouteConfigResource>> routes);
  void OnRouteConfigAmbientError(const std::string& name, const Status& status);
  // Fails with the reason a Listener cannot be served.
  Status CheckListener(const ListenerResource& listener) const;
  // Applies `pending_` if every RDS name it uses has a result.
  void TryApply();
  std::shared_ptr<const ServingConfig> BuildConfig(
      std::shared_ptr<const ListenerResource> listener);
  // Watches exactly the RDS names of `pending_` and `current_`.
  void UpdateRdsWatches();
  void StopServing(Status reason);
  void LogConfigurationErrors();

  XdsClient& client_;
  const std::string listener_name_;
  const std::string listening_address_;
  const std::shared_ptr<const http2::ServiceRegistry> registry_;
  Callbacks callbacks_;
  std::shared_ptr<Watcher<ListenerResource>> listener_watcher_;
  // Waiting for its RouteConfigurations.
  std::shared_ptr<const ListenerResource> pending_;
  // Being served.
  std::shared_ptr<const ListenerResource> current_;
  std::map<std::string, RdsState, std::less<>> rds_;
  bool logged_configuration_errors_ = false;
};

// The RDS names a server Listener's chains use (default chain included).
std::set<std::string> RdsNamesOf(const ListenerResource::TcpListener& listener);

}  // namespace uxds::server
