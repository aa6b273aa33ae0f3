// RbacPolicy: the RBAC HTTP filter's rules (envoy.config.rbac.v3.RBAC) as an
// xDS-enabled server enforces them (A41), compiled when the Listener or
// RouteConfiguration is decoded: every Permission and Principal tree is
// flattened into one array of rules whose children are index ranges, and
// every matcher (header, string, CIDR) is built once. A check walks those
// arrays and allocates nothing itself (a header with several values is
// joined in a buffer the calling thread keeps); a safe_regex matcher runs
// RE2, whose DFA cache may allocate the first times. Plain values with deep
// equality, like the resources that hold them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "uxds/connection_info.h"
#include "uxds/resources/cidr_range.h"
#include "uxds/resources/matchers.h"

namespace uxds {

// Where a header matcher's value comes from, decided once per matcher when
// the policy is compiled (no name comparisons per call).
enum class RbacHeaderSource : uint8_t {
  kPath,            // :path
  kMethod,          // :method
  kAuthority,       // :authority or host
  kContentType,     // content-type
  kAbsent,          // te (hop-by-hop) and other pseudo-headers: never present
  kMetadata,        // custom metadata and user-agent
  kBinaryMetadata,  // "-bin" metadata, matched in base64
};

RbacHeaderSource RbacHeaderSourceOf(std::string_view name);

// What RBAC reads of one RPC, borrowed from the call for one check.
struct RbacRequest {
  std::string_view path;          // :path, e.g. "/pkg.Service/Method"
  std::string_view http_method;   // :method
  std::string_view authority;     // :authority (or Host: A41 treats them alike)
  std::string_view content_type;  // as the client sent it
  // Custom metadata and user-agent, "-bin" values decoded (RBAC matches
  // their base64 form, A41).
  std::span<const std::pair<std::string, std::string>> metadata;
  const ConnectionInfo* connection = nullptr;

  // A41: the value a header matcher sees: several values joined with ','
  // (in `scratch`), binary values in base64, `te` and unknown pseudo-headers
  // absent. nullopt: not present.
  std::optional<std::string_view> Header(std::string_view name, std::string& scratch) const;
  std::optional<std::string_view> Header(RbacHeaderSource source, std::string_view name,
                                         std::string& scratch) const;
};

// The state of one check (rbac_policy.cc).
struct RbacCheck;

struct RbacPolicy {
  enum class Action { kAllow, kDeny };

  // One node of a Permission or Principal tree.
  struct Rule {
    enum class Kind : uint8_t {
      kAny,
      kAnd,                   // children[first, first + count) all match
      kOr,                    // one of children[first, first + count) matches
      kNot,                   // children[first] does not match
      kHeader,                // headers[index], read from RbacHeaderSource(first); its
                              // value is looked up once per check (slot `count`)
      kUrlPath,               // strings[index] on :path
      kDestinationIp,         // ranges[index] on the local address
      kDestinationPort,       // port == first
      kDestinationPortRange,  // first <= port < count
      kRequestedServerName,   // strings[index] on "" (A41: hard-coded empty)
      kMetadata,              // A41: Envoy metadata is empty: matches iff `invert`
      kAuthenticated,         // TLS; strings[index] on the peer's identity
      kAuthenticatedAny,      // any TLS connection (principal_name unset)
      kSourceIp,              // ranges[index] on the peer address (source_ip,
                              // direct_remote_ip and remote_ip alike, A41)
    };
    Kind kind = Kind::kAny;
    bool invert = false;  // kMetadata
    uint32_t first = 0;
    uint32_t count = 0;
    uint32_t index = 0;
    friend bool operator==(const Rule&, const Rule&) = default;
  };

  struct Policy {
    std::string name;
    uint32_t permissions = 0;  // a kOr rule over the policy's permissions
    uint32_t principals = 0;   // a kOr rule over its principals
    friend bool operator==(const Policy&, const Policy&) = default;
  };

  Action action = Action::kAllow;
  // In lexicographic order of name (Envoy evaluates them so).
  std::vector<Policy> policies;
  std::vector<Rule> rules;
  std::vector<uint32_t> children;  // rule indices, see Rule::first/count
  std::vector<HeaderMatcher> headers;
  std::vector<StringMatcher> strings;
  std::vector<CidrRange> ranges;

  // The first policy that matches `request`, or nullptr.
  const Policy* FirstMatch(const RbacRequest& request) const;
  // ALLOW: some policy matches; DENY: none does.
  bool Allows(const RbacRequest& request) const;
  // Whether rules[rule] matches the request `check` is about.
  bool Matches(uint32_t rule, RbacCheck& check) const;

  // A rule as an expression: "and(url_path(prefix:/svc/), authenticated)".
  std::string RuleText(uint32_t rule) const;
  // One-line JSON for `uxds watch`: the action and each policy's
  // permissions and principals as expressions.
  std::string ToJson() const;

  friend bool operator==(const RbacPolicy&, const RbacPolicy&) = default;
};

}  // namespace uxds
