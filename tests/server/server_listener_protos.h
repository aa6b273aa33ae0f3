// Server Listeners (A36) built as protos and decoded by uxds's own Listener
// decoder, so tests see exactly the FilterChainMap the server would.
#pragma once

#include <memory>
#include <string>

#include "envoy/config/listener/v3/listener.pb.h"
#include "uxds/resources/listener.h"
#include "uxds/status.h"

namespace uxds::testing {

using ListenerProto = envoy::config::listener::v3::Listener;
using FilterChainMatchProto = envoy::config::listener::v3::FilterChainMatch;

// A Listener for 0.0.0.0:8080 with no filter chains yet.
ListenerProto ServerListenerProto();
// Adds a chain named `name` (its HttpConnectionManager gets routes over RDS)
// and returns its filter_chain_match to fill in.
FilterChainMatchProto* AddChain(ListenerProto& listener, const std::string& name);
// Sets the default_filter_chain, named "default".
void SetDefaultChain(ListenerProto& listener);
// "10.0.0.0/8" -> a CidrRange in `match`'s prefix_ranges / source_prefix_ranges.
void AddPrefix(FilterChainMatchProto& match, const std::string& cidr);
void AddSourcePrefix(FilterChainMatchProto& match, const std::string& cidr);

// The decoded server Listener, or the decoder's error (the NACK message).
StatusOr<std::shared_ptr<const ListenerResource>> DecodeServerListener(
    const ListenerProto& listener);

}  // namespace uxds::testing
