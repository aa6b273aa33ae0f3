// RbacPolicy's JSON summary: each policy's permissions and principals as one
// expression, e.g. "or(and(url_path(prefix:/svc/), destination_port(443)))".
#include <string>

#include "uxds/resources/rbac.h"
#include "xds/resources/resource_json.h"

namespace uxds {
namespace {

std::string HeaderText(const HeaderMatcher& header) {
  std::string text = header.name + " ";
  switch (header.type) {
    case HeaderMatcher::Type::kRange:
      text += "range:[" + std::to_string(header.range_start) + "," +
              std::to_string(header.range_end) + ")";
      break;
    case HeaderMatcher::Type::kPresent:
      text += header.present_match ? "present" : "absent";
      break;
    default:
      text += header.string_matcher.ToString();
      break;
  }
  if (header.invert_match) text += " (invert)";
  if (header.treat_missing_as_empty) text += " (missing as empty)";
  return text;
}

}  // namespace

std::string RbacPolicy::RuleText(uint32_t rule_index) const {
  const Rule& rule = rules[rule_index];
  auto set = [&](std::string_view name) {
    std::string text(name);
    text += "(";
    for (uint32_t i = rule.first; i < rule.first + rule.count; ++i) {
      if (i != rule.first) text += ", ";
      text += RuleText(children[i]);
    }
    return text + ")";
  };
  switch (rule.kind) {
    case Rule::Kind::kAny:
      return "any";
    case Rule::Kind::kAnd:
      return set("and");
    case Rule::Kind::kOr:
      return set("or");
    case Rule::Kind::kNot:
      return set("not");
    case Rule::Kind::kHeader:
      return "header(" + HeaderText(headers[rule.index]) + ")";
    case Rule::Kind::kUrlPath:
      return "url_path(" + strings[rule.index].ToString() + ")";
    case Rule::Kind::kDestinationIp:
      return "destination_ip(" + ranges[rule.index].ToString() + ")";
    case Rule::Kind::kDestinationPort:
      return "destination_port(" + std::to_string(rule.first) + ")";
    case Rule::Kind::kDestinationPortRange:
      return "destination_port_range([" + std::to_string(rule.first) + "," +
             std::to_string(rule.count) + "))";
    case Rule::Kind::kRequestedServerName:
      return "requested_server_name(" + strings[rule.index].ToString() + ")";
    case Rule::Kind::kMetadata:
      return rule.invert ? "metadata(invert)" : "metadata";
    case Rule::Kind::kAuthenticatedAny:
      return "authenticated";
    case Rule::Kind::kAuthenticated:
      return "authenticated(" + strings[rule.index].ToString() + ")";
    case Rule::Kind::kSourceIp:
      return "source_ip(" + ranges[rule.index].ToString() + ")";
  }
  return "?";
}

std::string RbacPolicy::ToJson() const {
  ResourceJson list = ResourceJson::array();
  for (const Policy& policy : policies) {
    list.push_back({{"name", policy.name},
                    {"permissions", RuleText(policy.permissions)},
                    {"principals", RuleText(policy.principals)}});
  }
  ResourceJson json;
  json["action"] = action == Action::kAllow ? "ALLOW" : "DENY";
  json["policies"] = std::move(list);
  return json.dump();
}

}  // namespace uxds
