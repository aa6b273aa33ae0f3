// FilterChainSelector: the filter chain an xDS-enabled server gives a
// connection (A36 FilterChainMatch), through the server's own matcher: what
// `uxds fcm` answers, for tools and tests that ask "where does this
// connection go".
//
//   uxds::FilterChainSelector selector(tcp_listener);  // a validated server Listener
//   auto chain = selector.Select({"10.0.0.1", 8080}, {"192.168.1.7", 40000});
//   // *chain: the FilterChain, or nullptr (closed without a byte)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "uxds/resources/listener.h"
#include "uxds/status.h"

namespace uxds {

class FilterChainMatcher;

class FilterChainSelector {
 public:
  // One end of a connection.
  struct Endpoint {
    std::string ip;  // IPv4 or IPv6 (::ffff:a.b.c.d counts as IPv4)
    uint16_t port = 0;
  };

  // INVALID_ARGUMENT saying why `ip` is not an IPv4 or IPv6 address.
  static Status CheckIp(std::string_view ip);

  // `listener` must outlive the selector.
  explicit FilterChainSelector(const ListenerResource::TcpListener& listener);
  ~FilterChainSelector();
  FilterChainSelector(const FilterChainSelector&) = delete;
  FilterChainSelector& operator=(const FilterChainSelector&) = delete;

  // A36: the most specific chain for a connection from `source` to
  // `destination` (the destination port is never matched on), else the
  // default_filter_chain, else nullptr: the server closes the connection
  // without sending a byte. INVALID_ARGUMENT naming "destination" or
  // "source" when its ip is not an IP address.
  StatusOr<const FilterChain*> Select(const Endpoint& destination, const Endpoint& source) const;

 private:
  std::unique_ptr<FilterChainMatcher> matcher_;
};

}  // namespace uxds
