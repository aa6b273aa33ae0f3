// A29 "server authorization": whether a peer certificate's SANs satisfy a
// validation context's match_subject_alt_names.
#pragma once

#include <string_view>
#include <vector>

#include "tls/tls_context.h"
#include "uxds/resources/matchers.h"

namespace uxds {

// A29: true if `matchers` is empty, or if one SAN matches one matcher. An
// exact matcher compares a DNS SAN by DNS rules: case-insensitive, a
// trailing dot ignored, and a "*." wildcard SAN standing for exactly one
// leftmost label ("*.example.com" holds "api.example.com", not
// "example.com" or "a.b.example.com"). Other SANs, and every other matcher
// type, use the StringMatcher as it is. Empty SANs match nothing.
bool MatchesSubjectAltNames(const std::vector<SubjectAltName>& sans,
                            const std::vector<StringMatcher>& matchers);

// The DNS rule for one SAN against an exact matcher's value.
bool DnsSanMatches(std::string_view san, std::string_view name);

}  // namespace uxds
