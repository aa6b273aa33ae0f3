// Readers for the matchers several xDS resources share (route header
// matchers, string matchers, CIDR ranges), reporting problems at the current
// field of a ValidationErrors with gRPC's texts.
#pragma once

#include <optional>

#include "envoy/config/core/v3/address.pb.h"
#include "envoy/config/route/v3/route_components.pb.h"
#include "envoy/type/matcher/v3/string.pb.h"
#include "uxds/resources/cidr_range.h"
#include "uxds/resources/matchers.h"
#include "xds/validation_errors.h"

namespace uxds {

// envoy.config.route.v3.HeaderMatcher (A28); regexes compiled.
std::optional<HeaderMatcher> ParseHeaderMatcher(
    const envoy::config::route::v3::HeaderMatcher& proto, ValidationErrors& errors);

// envoy.type.matcher.v3.StringMatcher (A29 SAN matchers, A41); a regex is
// compiled and never case-folded.
std::optional<StringMatcher> ParseStringMatcher(
    const envoy::type::matcher::v3::StringMatcher& proto, ValidationErrors& errors);

// A36 CIDR normalization: prefix_len clamped (absent = 0), host bits zeroed.
std::optional<CidrRange> ParseCidrRange(const envoy::config::core::v3::CidrRange& proto,
                                        ValidationErrors& errors);

}  // namespace uxds
