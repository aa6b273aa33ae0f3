// A36 FilterChainMatch normalization: duplicate detection over the cross
// product of every matcher's lists (always-failing fields included), and the
// lookup tables of the chains that can match.
#pragma once

#include <vector>

#include "uxds/resources/listener.h"
#include "xds/validation_errors.h"

namespace uxds {

// `chains` are the Listener's valid filter chains; `proto_indices[i]` is the
// index of chains[i] in Listener.filter_chains, for messages. A duplicate is
// reported at "filter_chains[<index>].filter_chain_match" under the current
// field of `errors`.
FilterChainMap BuildFilterChainMap(const std::vector<FilterChain>& chains,
                                   const std::vector<int>& proto_indices, ValidationErrors& errors);

}  // namespace uxds
