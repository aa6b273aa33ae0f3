// RBAC evaluation (A41) over a compiled RbacPolicy: no allocation, no lock.
#include <algorithm>
#include <array>
#include <string>

#include "uxds/resources/rbac.h"

namespace uxds {
namespace {

// RFC 4648 base64 with padding, appended to `out`: A41 matches binary
// headers in their base64 form.
void AppendBase64(std::string_view bytes, std::string& out) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{static_cast<uint8_t>(bytes[i])} << 16) |
                       (uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8) |
                       uint32_t{static_cast<uint8_t>(bytes[i + 2])};
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(kAlphabet[(n >> 6) & 63]);
    out.push_back(kAlphabet[n & 63]);
  }
  const size_t rest = bytes.size() - i;
  if (rest == 0) return;
  uint32_t n = uint32_t{static_cast<uint8_t>(bytes[i])} << 16;
  if (rest == 2) n |= uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8;
  out.push_back(kAlphabet[(n >> 18) & 63]);
  out.push_back(kAlphabet[(n >> 12) & 63]);
  out.push_back(rest == 2 ? kAlphabet[(n >> 6) & 63] : '=');
  out.push_back('=');
}

bool IsBinaryHeader(std::string_view name) {
  return name.size() >= 4 && name.substr(name.size() - 4) == "-bin";
}

// A41 authenticated.principal_name: URI SANs if the certificate has any,
// else DNS SANs, else the subject ("" without a certificate).
bool PrincipalNameMatches(const StringMatcher& matcher, const TlsPeer& peer) {
  if (!peer.uri_sans.empty()) {
    return std::any_of(peer.uri_sans.begin(), peer.uri_sans.end(),
                       [&](const std::string& san) { return matcher.Matches(san); });
  }
  if (!peer.dns_sans.empty()) {
    return std::any_of(peer.dns_sans.begin(), peer.dns_sans.end(),
                       [&](const std::string& san) { return matcher.Matches(san); });
  }
  return matcher.Matches(peer.subject);
}

}  // namespace

RbacHeaderSource RbacHeaderSourceOf(std::string_view name) {
  // A41: :authority and Host are one header; `te` is hop-by-hop, so absent.
  if (name == ":path") return RbacHeaderSource::kPath;
  if (name == ":method") return RbacHeaderSource::kMethod;
  if (name == ":authority" || name == "host") return RbacHeaderSource::kAuthority;
  if (name == "content-type") return RbacHeaderSource::kContentType;
  if (name == "te" || (!name.empty() && name.front() == ':')) return RbacHeaderSource::kAbsent;
  return IsBinaryHeader(name) ? RbacHeaderSource::kBinaryMetadata : RbacHeaderSource::kMetadata;
}

std::optional<std::string_view> RbacRequest::Header(std::string_view name,
                                                    std::string& scratch) const {
  return Header(RbacHeaderSourceOf(name), name, scratch);
}

std::optional<std::string_view> RbacRequest::Header(RbacHeaderSource source, std::string_view name,
                                                    std::string& scratch) const {
  switch (source) {
    case RbacHeaderSource::kPath:
      return path;
    case RbacHeaderSource::kMethod:
      return http_method;
    case RbacHeaderSource::kAuthority:
      return authority;
    case RbacHeaderSource::kContentType:
      return content_type;
    case RbacHeaderSource::kAbsent:
      return std::nullopt;
    case RbacHeaderSource::kMetadata:
    case RbacHeaderSource::kBinaryMetadata:
      break;
  }
  const bool binary = source == RbacHeaderSource::kBinaryMetadata;
  const std::string* single = nullptr;
  size_t found = 0;
  for (const auto& [key, value] : metadata) {
    if (key != name) continue;
    if (found == 0) {
      single = &value;
    } else {
      // A41: several values are one, joined with ',' (no spaces).
      if (found == 1) {
        scratch.clear();
        if (binary) {
          AppendBase64(*single, scratch);
        } else {
          scratch.append(*single);
        }
      }
      scratch.push_back(',');
      if (binary) {
        AppendBase64(value, scratch);
      } else {
        scratch.append(value);
      }
    }
    ++found;
  }
  if (found == 0) return std::nullopt;
  if (found > 1) return std::string_view(scratch);
  if (!binary) return std::string_view(*single);
  scratch.clear();
  AppendBase64(*single, scratch);
  return std::string_view(scratch);
}

// One check: the request, the buffer joined values are built in, and the
// header values already looked up, by slot (RbacPolicy::Rule::count), so
// ten policies reading one header scan the metadata once.
struct RbacCheck {
  static constexpr uint32_t kSlots = 32;
  // Trivial, so that the array is not cleared per check (a slot is read
  // only once its bit in `known` is set).
  struct Value {
    const char* data;
    size_t size;
  };

  RbacCheck(const RbacRequest& checked, std::string& buffer) : request(checked), scratch(buffer) {}

  const RbacRequest& request;
  std::string& scratch;
  uint32_t known = 0;   // bit s: values[s] (or its absence) is looked up
  uint32_t absent = 0;  // bit s: the header is not present
  std::array<Value, kSlots> values;

  std::optional<std::string_view> HeaderValue(const RbacPolicy::Rule& rule, std::string_view name) {
    const uint32_t slot = rule.count;
    const uint32_t bit = slot < kSlots ? 1u << slot : 0;
    if ((known & bit) != 0) {
      if ((absent & bit) != 0) return std::nullopt;
      return std::string_view(values[slot].data, values[slot].size);
    }
    std::optional<std::string_view> value =
        request.Header(static_cast<RbacHeaderSource>(rule.first), name, scratch);
    // A value built in `scratch` (joined, base64) is not kept: the next
    // joined header reuses the buffer.
    const bool in_scratch = value.has_value() && !scratch.empty() &&
                            value->data() >= scratch.data() &&
                            value->data() < scratch.data() + scratch.size();
    if (bit != 0 && !in_scratch) {
      known |= bit;
      if (value.has_value()) {
        values[slot] = {value->data(), value->size()};
      } else {
        absent |= bit;
      }
    }
    return value;
  }
};

bool RbacPolicy::Matches(uint32_t rule_index, RbacCheck& check) const {
  const Rule& rule = rules[rule_index];
  const RbacRequest& request = check.request;
  const ConnectionInfo* connection = request.connection;
  switch (rule.kind) {
    case Rule::Kind::kAny:
      return true;
    case Rule::Kind::kAnd:
      for (uint32_t i = rule.first; i < rule.first + rule.count; ++i) {
        if (!Matches(children[i], check)) return false;
      }
      return true;
    case Rule::Kind::kOr:
      for (uint32_t i = rule.first; i < rule.first + rule.count; ++i) {
        if (Matches(children[i], check)) return true;
      }
      return false;
    case Rule::Kind::kNot:
      return !Matches(children[rule.first], check);
    case Rule::Kind::kHeader: {
      const HeaderMatcher& header = headers[rule.index];
      const std::optional<std::string_view> value = check.HeaderValue(rule, header.name);
      return header.Matches(value.value_or(std::string_view()), value.has_value());
    }
    case Rule::Kind::kUrlPath:
      return strings[rule.index].Matches(request.path);
    case Rule::Kind::kDestinationIp:
      return connection != nullptr && ranges[rule.index].Contains(connection->local.bytes());
    case Rule::Kind::kDestinationPort:
      return connection != nullptr && connection->local.port == rule.first;
    case Rule::Kind::kDestinationPortRange:
      return connection != nullptr && connection->local.port >= rule.first &&
             connection->local.port < rule.count;
    case Rule::Kind::kRequestedServerName:
      // A41: "Hard-coded as empty string".
      return strings[rule.index].Matches("");
    case Rule::Kind::kMetadata:
      // A41: Envoy metadata is an empty map, which no ValueMatcher matches.
      return rule.invert;
    case Rule::Kind::kAuthenticatedAny:
      return connection != nullptr && connection->tls.has_value();
    case Rule::Kind::kAuthenticated:
      return connection != nullptr && connection->tls.has_value() &&
             PrincipalNameMatches(strings[rule.index], *connection->tls);
    case Rule::Kind::kSourceIp:
      return connection != nullptr && ranges[rule.index].Contains(connection->peer.bytes());
  }
  return false;
}

const RbacPolicy::Policy* RbacPolicy::FirstMatch(const RbacRequest& request) const {
  // Reused by every check on this thread: joined header values need room,
  // and after the first checks it has enough.
  thread_local std::string scratch;
  RbacCheck check(request, scratch);
  for (const Policy& policy : policies) {
    if (Matches(policy.permissions, check) && Matches(policy.principals, check)) {
      return &policy;
    }
  }
  return nullptr;
}

bool RbacPolicy::Allows(const RbacRequest& request) const {
  const bool matched = FirstMatch(request) != nullptr;
  return action == Action::kAllow ? matched : !matched;
}

}  // namespace uxds
