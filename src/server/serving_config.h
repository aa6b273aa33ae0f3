// ServingConfig: one applied version of an xDS-enabled server's Listener,
// frozen for the serving loop: the Listener, its filter chain lookup, and for
// every chain the registry that routes its RPCs (A36). Built on the control
// thread, handed to the serving loop through Loop::Post, never changed; a
// connection keeps the config it was accepted under until it is drained.
#pragma once

#include <memory>
#include <vector>

#include "http2/service_registry.h"
#include "server/downstream_tls.h"
#include "server/filter_chain_matcher.h"
#include "uxds/resources/listener.h"

namespace uxds::server {

struct ServingConfig {
  // Holds the TcpListener alternative; outlives `matcher`, which refers to it.
  std::shared_ptr<const ListenerResource> listener;
  std::unique_ptr<const FilterChainMatcher> matcher;
  // One per TcpListener::filter_chains entry, same order.
  std::vector<std::shared_ptr<const http2::ServiceRegistry>> chain_registries;
  // For default_filter_chain; null without one.
  std::shared_ptr<const http2::ServiceRegistry> default_chain_registry;
  // A29: how each chain's connections are secured (null: plaintext), in
  // the same order; and the default chain's.
  std::vector<std::shared_ptr<const DownstreamTls>> chain_tls;
  std::shared_ptr<const DownstreamTls> default_chain_tls;

  const ListenerResource::TcpListener& tcp_listener() const {
    return std::get<ListenerResource::TcpListener>(listener->listener);
  }
  // The registry and the security of a chain Select() returned.
  std::shared_ptr<const http2::ServiceRegistry> RegistryFor(const FilterChain& chain) const {
    const std::optional<size_t> index = IndexOf(chain);
    return index.has_value() ? chain_registries[*index] : default_chain_registry;
  }
  std::shared_ptr<const DownstreamTls> TlsFor(const FilterChain& chain) const {
    const std::optional<size_t> index = IndexOf(chain);
    return index.has_value() ? chain_tls[*index] : default_chain_tls;
  }

 private:
  // Its place in filter_chains; nullopt for the default chain.
  std::optional<size_t> IndexOf(const FilterChain& chain) const {
    const ListenerResource::TcpListener& tcp = tcp_listener();
    if (tcp.default_filter_chain.has_value() && &chain == &*tcp.default_filter_chain) {
      return std::nullopt;
    }
    return static_cast<size_t>(&chain - tcp.filter_chains.data());
  }
};

}  // namespace uxds::server
