// RBAC filter config parsing and compilation (A41; the field rules of gRPC
// C++ xds_http_rbac_filter.cc, with the proto's own field names in paths).
#include "xds/resources/rbac_parser.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "envoy/config/rbac/v3/rbac.pb.h"
#include "envoy/extensions/filters/http/rbac/v3/rbac.pb.h"
#include "xds/resources/field_parsers.h"
#include "xds/resources/matcher_parsers.h"

namespace uxds {
namespace {

namespace rbac_v3 = envoy::config::rbac::v3;
namespace http_rbac_v3 = envoy::extensions::filters::http::rbac::v3;
using Rule = RbacPolicy::Rule;

// Builds one policy's flat rule arrays. A rule that fails validation is
// recorded as kAny so the rest is still checked; the policy is dropped
// with the resource.
class RbacCompiler {
 public:
  RbacCompiler(RbacPolicy& policy, ValidationErrors& errors) : policy_(policy), errors_(errors) {}

  // A list of Permissions or Principals (a policy's, or a set's) at
  // `field_name`: or-ed for a policy and or_rules/or_ids, and-ed for
  // and_rules/and_ids.
  template <typename Item>
  uint32_t Set(Rule::Kind kind, const google::protobuf::RepeatedPtrField<Item>& items,
               std::string_view field_name) {
    RequireMembers(items.size(), field_name);
    std::vector<uint32_t> members;
    for (int i = 0; i < items.size(); ++i) {
      auto field = errors_.Scope(std::string(field_name) + "[" + std::to_string(i) + "]");
      members.push_back(Compile(items.Get(i)));
    }
    return AddSet(kind, members);
  }

 private:
  // What a Permission and a Principal both have (the same fields under the
  // same names, in two proto types); nullopt for anything else.
  template <typename Proto, typename Case>
  std::optional<uint32_t> SharedRule(const Proto& proto, Case which) {
    if (which == Proto::kAny) return AnyRule(proto.any());
    if (which == Proto::kHeader) {
      auto field = errors_.Scope(".header");
      return Header(proto.header());
    }
    if (which == Proto::kUrlPath) {
      auto field = errors_.Scope(".url_path");
      return UrlPath(proto.url_path());
    }
    if (which == Proto::kMetadata) {
      return AddRule({.kind = Rule::Kind::kMetadata, .invert = proto.metadata().invert()});
    }
    return std::nullopt;
  }

  uint32_t Compile(const rbac_v3::Permission& proto) {
    using P = rbac_v3::Permission;
    if (std::optional<uint32_t> shared = SharedRule(proto, proto.rule_case())) return *shared;
    switch (proto.rule_case()) {
      case P::kAndRules: {
        auto field = errors_.Scope(".and_rules");
        return Set(Rule::Kind::kAnd, proto.and_rules().rules(), ".rules");
      }
      case P::kOrRules: {
        auto field = errors_.Scope(".or_rules");
        return Set(Rule::Kind::kOr, proto.or_rules().rules(), ".rules");
      }
      case P::kDestinationIp: {
        auto field = errors_.Scope(".destination_ip");
        return Range(Rule::Kind::kDestinationIp, proto.destination_ip());
      }
      case P::kDestinationPort:
        if (proto.destination_port() > 65535) {
          auto field = errors_.Scope(".destination_port");
          errors_.Add("must be at most 65535");
        }
        return AddRule({.kind = Rule::Kind::kDestinationPort, .first = proto.destination_port()});
      case P::kDestinationPortRange: {
        // Int32Range: [start, end), clamped to the port numbers.
        const auto clamp = [](int32_t port) {
          return static_cast<uint32_t>(std::clamp<int32_t>(port, 0, 65536));
        };
        const auto& range = proto.destination_port_range();
        if (range.start() > range.end()) {
          auto field = errors_.Scope(".destination_port_range");
          errors_.Add("start must not be greater than end");
        }
        return AddRule({.kind = Rule::Kind::kDestinationPortRange,
                        .first = clamp(range.start()),
                        .count = clamp(range.end())});
      }
      case P::kNotRule: {
        auto field = errors_.Scope(".not_rule");
        return Not(Compile(proto.not_rule()));
      }
      case P::kRequestedServerName: {
        auto field = errors_.Scope(".requested_server_name");
        return StringRule(Rule::Kind::kRequestedServerName, proto.requested_server_name());
      }
      case P::kMatcher: {
        auto field = errors_.Scope(".matcher");
        errors_.Add("custom matcher extensions are not supported");
        return AddRule({});
      }
      default:
        errors_.Add("invalid rule");
        return AddRule({});
    }
  }

  uint32_t Compile(const rbac_v3::Principal& proto) {
    using P = rbac_v3::Principal;
    if (std::optional<uint32_t> shared = SharedRule(proto, proto.identifier_case())) {
      return *shared;
    }
    switch (proto.identifier_case()) {
      case P::kAndIds: {
        auto field = errors_.Scope(".and_ids");
        return Set(Rule::Kind::kAnd, proto.and_ids().ids(), ".ids");
      }
      case P::kOrIds: {
        auto field = errors_.Scope(".or_ids");
        return Set(Rule::Kind::kOr, proto.or_ids().ids(), ".ids");
      }
      case P::kAuthenticated: {
        if (!proto.authenticated().has_principal_name()) {
          // A41: unset matches any TLS connection, certificate or not.
          return AddRule({.kind = Rule::Kind::kAuthenticatedAny});
        }
        auto field = errors_.Scope(".authenticated.principal_name");
        return StringRule(Rule::Kind::kAuthenticated, proto.authenticated().principal_name());
      }
      // A41: without proxy protocol and xff_num_trusted_hops, all three are
      // the connection's peer address.
      case P::kSourceIp: {
        auto field = errors_.Scope(".source_ip");
        return Range(Rule::Kind::kSourceIp, proto.source_ip());
      }
      case P::kDirectRemoteIp: {
        auto field = errors_.Scope(".direct_remote_ip");
        return Range(Rule::Kind::kSourceIp, proto.direct_remote_ip());
      }
      case P::kRemoteIp: {
        auto field = errors_.Scope(".remote_ip");
        return Range(Rule::Kind::kSourceIp, proto.remote_ip());
      }
      case P::kNotId: {
        auto field = errors_.Scope(".not_id");
        return Not(Compile(proto.not_id()));
      }
      case P::kFilterState: {
        auto field = errors_.Scope(".filter_state");
        errors_.Add("filter_state is not supported");
        return AddRule({});
      }
      default:
        errors_.Add("invalid rule");
        return AddRule({});
    }
  }

  // Envoy's config validation: `any` must be true (false would read as
  // "matches anything" here), sets and lists must not be empty (an empty
  // `and` would match everything, an empty policy list nothing).
  uint32_t AnyRule(bool any) {
    if (!any) {
      auto field = errors_.Scope(".any");
      errors_.Add("must be true");
    }
    return AddRule({.kind = Rule::Kind::kAny});
  }

  void RequireMembers(int size, std::string_view field_name) {
    if (size > 0) return;
    auto field = errors_.Scope(field_name);
    errors_.Add("must be non-empty");
  }

  uint32_t Header(const envoy::config::route::v3::HeaderMatcher& proto) {
    std::string name = proto.name();
    // HTTP/2 header names are lowercase; Envoy matches names so.
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    {
      auto field = errors_.Scope(".name");
      // A41: gRPC's own headers and :scheme are not the application's to
      // authorize on.
      if (name == ":scheme") {
        errors_.Add("':scheme' not allowed in header");
      } else if (name.starts_with("grpc-")) {
        errors_.Add("'grpc-' prefixes not allowed in header");
      }
    }
    std::optional<HeaderMatcher> matcher = ParseHeaderMatcher(proto, errors_);
    if (!matcher.has_value()) return AddRule({});
    matcher->name = std::move(name);
    matcher->treat_missing_as_empty = proto.treat_missing_header_as_empty();
    const RbacHeaderSource source = RbacHeaderSourceOf(matcher->name);
    // Matchers of one header name share a slot: its value is looked up once
    // per check, however many policies read it.
    const auto slot = static_cast<uint32_t>(
        header_slots_.try_emplace(matcher->name, header_slots_.size()).first->second);
    policy_.headers.push_back(*std::move(matcher));
    return AddRule({.kind = Rule::Kind::kHeader,
                    .first = static_cast<uint32_t>(source),
                    .count = slot,
                    .index = Last(policy_.headers)});
  }

  uint32_t UrlPath(const envoy::type::matcher::v3::PathMatcher& proto) {
    auto field = errors_.Scope(".path");
    if (!proto.has_path()) {
      errors_.Add("field not present");
      return AddRule({});
    }
    return StringRule(Rule::Kind::kUrlPath, proto.path());
  }

  uint32_t StringRule(Rule::Kind kind, const envoy::type::matcher::v3::StringMatcher& proto) {
    std::optional<StringMatcher> matcher = ParseStringMatcher(proto, errors_);
    if (!matcher.has_value()) return AddRule({});
    policy_.strings.push_back(*std::move(matcher));
    return AddRule({.kind = kind, .index = Last(policy_.strings)});
  }

  uint32_t Range(Rule::Kind kind, const envoy::config::core::v3::CidrRange& proto) {
    std::optional<CidrRange> range = ParseCidrRange(proto, errors_);
    if (!range.has_value()) return AddRule({});
    // Peers on a dual-stack listener are seen as IPv4 (IpEndpoint), so an
    // IPv4-mapped range (::ffff:10.0.0.0/104) is kept as the IPv4 range it
    // stands for, as FilterChainMatch does (A36).
    static constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (range->is_ipv6 && range->prefix_len >= 96 &&
        std::equal(std::begin(kMappedPrefix), std::end(kMappedPrefix), range->address.begin())) {
      CidrRange v4;
      std::copy(range->address.begin() + 12, range->address.end(), v4.address.begin());
      v4.prefix_len = range->prefix_len - 96;
      range = v4;
    }
    policy_.ranges.push_back(*range);
    return AddRule({.kind = kind, .index = Last(policy_.ranges)});
  }

  uint32_t Not(uint32_t child) { return AddSet(Rule::Kind::kNot, {child}); }

  uint32_t AddSet(Rule::Kind kind, const std::vector<uint32_t>& members) {
    // and(x) and or(x) are x: one level less to walk per check.
    if (members.size() == 1 && kind != Rule::Kind::kNot) return members.front();
    const auto first = static_cast<uint32_t>(policy_.children.size());
    policy_.children.insert(policy_.children.end(), members.begin(), members.end());
    return AddRule({.kind = kind, .first = first, .count = static_cast<uint32_t>(members.size())});
  }

  uint32_t AddRule(const Rule& rule) {
    policy_.rules.push_back(rule);
    return Last(policy_.rules);
  }

  template <typename T>
  static uint32_t Last(const std::vector<T>& list) {
    return static_cast<uint32_t>(list.size() - 1);
  }

  RbacPolicy& policy_;
  ValidationErrors& errors_;
  std::map<std::string, size_t, std::less<>> header_slots_;
};

// With errors the resource is NACKed; should a caller use the result
// anyway, it denies every RPC rather than enforce part of the rules.
RbacPolicy DenyAll() {
  RbacPolicy policy;  // ALLOW, no policies
  policy.action = RbacPolicy::Action::kAllow;
  return policy;
}

std::optional<RbacPolicy> CompileRbac(const http_rbac_v3::RBAC& proto, ValidationErrors& errors) {
  const size_t errors_before = errors.size();
  if (proto.has_matcher()) {
    // Envoy enforces the matcher tree in place of `rules`; ignoring it would
    // let through what the control plane means to deny.
    auto field = errors.Scope(".matcher");
    errors.Add("matcher trees are not supported");
  }
  if (!proto.has_rules()) {
    // "If absent, no enforcing RBAC policy will be applied."
    if (errors.size() != errors_before) return DenyAll();
    return std::nullopt;
  }
  auto field = errors.Scope(".rules");
  const rbac_v3::RBAC& rules = proto.rules();
  RbacPolicy policy;
  switch (rules.action()) {
    case rbac_v3::RBAC::ALLOW:
      policy.action = RbacPolicy::Action::kAllow;
      break;
    case rbac_v3::RBAC::DENY:
      policy.action = RbacPolicy::Action::kDeny;
      break;
    case rbac_v3::RBAC::LOG:
      // A41: "the policy will be completely ignored, as if RBAC was not
      // configured".
      if (errors.size() != errors_before) return DenyAll();
      return std::nullopt;
    default: {
      auto action_field = errors.Scope(".action");
      errors.Add("unknown action " + std::to_string(rules.action()));
      return DenyAll();
    }
  }
  // Evaluated in lexicographic order of the names, as Envoy does.
  std::vector<const std::string*> names;
  for (const auto& [name, unused] : rules.policies()) names.push_back(&name);
  std::sort(names.begin(), names.end(), [](auto* a, auto* b) { return *a < *b; });
  RbacCompiler compiler(policy, errors);
  for (const std::string* name : names) {
    auto policy_field = errors.Scope(".policies[" + *name + "]");
    const rbac_v3::Policy& proto_policy = rules.policies().at(*name);
    RbacPolicy::Policy compiled{.name = *name};
    compiled.permissions =
        compiler.Set(RbacPolicy::Rule::Kind::kOr, proto_policy.permissions(), ".permissions");
    compiled.principals =
        compiler.Set(RbacPolicy::Rule::Kind::kOr, proto_policy.principals(), ".principals");
    // A41: CEL is not supported.
    if (proto_policy.has_condition()) {
      auto condition_field = errors.Scope(".condition");
      errors.Add("condition not supported");
    }
    if (proto_policy.has_checked_condition()) {
      auto condition_field = errors.Scope(".checked_condition");
      errors.Add("checked condition not supported");
    }
    policy.policies.push_back(std::move(compiled));
  }
  if (errors.size() != errors_before) return DenyAll();
  return policy;
}

}  // namespace

std::optional<RbacPolicy> ParseRbacConfig(std::string_view serialized, ValidationErrors& errors) {
  http_rbac_v3::RBAC proto;
  if (!ParseProto(serialized, proto)) {
    errors.Add("could not parse HTTP RBAC filter config");
    return DenyAll();
  }
  return CompileRbac(proto, errors);
}

std::optional<RbacPolicy> ParseRbacPerRoute(std::string_view serialized, ValidationErrors& errors) {
  http_rbac_v3::RBACPerRoute proto;
  if (!ParseProto(serialized, proto)) {
    errors.Add("could not parse RBACPerRoute");
    return DenyAll();
  }
  // "If absent, the global RBAC policy will be disabled for this route."
  if (!proto.has_rbac()) return std::nullopt;
  auto field = errors.Scope(".rbac");
  return CompileRbac(proto.rbac(), errors);
}

}  // namespace uxds
