// RBAC (A41): configs compiled from real protos by the decoder's parser, then
// checked against requests: each Permission and Principal kind, A41's header
// rules (missing headers, joined values, binary values, :authority/Host, te),
// the principal_name order (URI SANs, DNS SANs, subject, ""), policy order,
// and no allocation per check.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "envoy/extensions/filters/http/rbac/v3/rbac.pb.h"
#include "support/allocation_counter.h"
#include "xds/resources/rbac_parser.h"

namespace uxds::testing {
namespace {

namespace rbac_v3 = envoy::config::rbac::v3;
using HttpRbac = envoy::extensions::filters::http::rbac::v3::RBAC;
using Metadata = std::vector<std::pair<std::string, std::string>>;

RbacPolicy Compile(const HttpRbac& proto) {
  ValidationErrors errors;
  std::optional<RbacPolicy> policy = ParseRbacConfig(proto.SerializeAsString(), errors);
  EXPECT_TRUE(errors.ok()) << errors.Message("rbac");
  EXPECT_TRUE(policy.has_value());
  return policy.value_or(RbacPolicy{});
}

// An ALLOW policy "p": permission `permission`, principal `principal`.
RbacPolicy Allow(const rbac_v3::Permission& permission, const rbac_v3::Principal& principal) {
  HttpRbac proto;
  auto& policy = (*proto.mutable_rules()->mutable_policies())["p"];
  *policy.add_permissions() = permission;
  *policy.add_principals() = principal;
  return Compile(proto);
}

rbac_v3::Permission AnyPermission() {
  rbac_v3::Permission p;
  p.set_any(true);
  return p;
}

rbac_v3::Principal AnyPrincipal() {
  rbac_v3::Principal p;
  p.set_any(true);
  return p;
}

IpEndpoint Ip4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint16_t port) {
  IpEndpoint endpoint;
  endpoint.ip = {a, b, c, d};
  endpoint.port = port;
  return endpoint;
}

struct Call {
  Metadata metadata;
  ConnectionInfo connection{.local = Ip4(10, 0, 0, 1, 8080), .peer = Ip4(192, 168, 1, 7, 40000)};
  std::string path = "/demo.Echo/Say";
  std::string authority = "echo.example.com";
  std::string content_type = "application/grpc";

  RbacRequest View() const {
    return {.path = path,
            .http_method = "POST",
            .authority = authority,
            .content_type = content_type,
            .metadata = metadata,
            .connection = &connection};
  }
};

bool Allowed(const RbacPolicy& policy, const Call& call) { return policy.Allows(call.View()); }

rbac_v3::Permission HeaderPermission(const std::string& name, const std::string& exact) {
  rbac_v3::Permission p;
  p.mutable_header()->set_name(name);
  p.mutable_header()->set_exact_match(exact);
  return p;
}

TEST(RbacPolicyTest, AllowAdmitsOnlyMatchingCallsAndDenyTheRest) {
  rbac_v3::Permission path;
  path.mutable_url_path()->mutable_path()->set_prefix("/demo.Echo/");
  RbacPolicy allow = Allow(path, AnyPrincipal());
  Call call;
  EXPECT_TRUE(Allowed(allow, call));
  call.path = "/other.Service/Get";
  EXPECT_FALSE(Allowed(allow, call));

  HttpRbac proto;
  proto.mutable_rules()->set_action(rbac_v3::RBAC::DENY);
  auto& policy = (*proto.mutable_rules()->mutable_policies())["p"];
  *policy.add_permissions() = path;
  *policy.add_principals() = AnyPrincipal();
  RbacPolicy deny = Compile(proto);
  EXPECT_TRUE(Allowed(deny, call));
  call.path = "/demo.Echo/Say";
  EXPECT_FALSE(Allowed(deny, call));
}

TEST(RbacPolicyTest, AllowWithoutPoliciesDeniesEverythingAndDenyWithoutPoliciesNothing) {
  HttpRbac proto;
  proto.mutable_rules();
  EXPECT_FALSE(Allowed(Compile(proto), Call{}));
  proto.mutable_rules()->set_action(rbac_v3::RBAC::DENY);
  EXPECT_TRUE(Allowed(Compile(proto), Call{}));
}

TEST(RbacPolicyTest, LogActionAndAbsentRulesEnforceNothing) {
  ValidationErrors errors;
  HttpRbac proto;
  EXPECT_FALSE(ParseRbacConfig(proto.SerializeAsString(), errors).has_value());
  proto.mutable_rules()->set_action(rbac_v3::RBAC::LOG);
  EXPECT_FALSE(ParseRbacConfig(proto.SerializeAsString(), errors).has_value());
  EXPECT_TRUE(errors.ok());
}

TEST(RbacPolicyTest, PoliciesAreTriedInNameOrder) {
  HttpRbac proto;
  for (const char* name : {"zeta", "alpha", "mid"}) {
    auto& policy = (*proto.mutable_rules()->mutable_policies())[name];
    *policy.add_permissions() = AnyPermission();
    *policy.add_principals() = AnyPrincipal();
  }
  RbacPolicy policy = Compile(proto);
  const RbacPolicy::Policy* first = policy.FirstMatch(Call{}.View());
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->name, "alpha");
}

// A41: "If a header is not present, HeaderMatch will not match except for
// present_match when present_match == invert_match".
TEST(RbacPolicyTest, MissingHeaderMatchesOnlyPresentMatchEqualToInvert) {
  struct Row {
    bool present_match;
    bool invert;
    bool want_when_missing;
    bool want_when_present;
  };
  for (const Row& row : {Row{true, false, false, true}, Row{true, true, true, false},
                         Row{false, false, true, false}, Row{false, true, false, true}}) {
    rbac_v3::Permission p;
    p.mutable_header()->set_name("x-user");
    p.mutable_header()->set_present_match(row.present_match);
    p.mutable_header()->set_invert_match(row.invert);
    RbacPolicy policy = Allow(p, AnyPrincipal());
    Call call;
    EXPECT_EQ(Allowed(policy, call), row.want_when_missing)
        << row.present_match << " " << row.invert;
    call.metadata = {{"x-user", "ann"}};
    EXPECT_EQ(Allowed(policy, call), row.want_when_present)
        << row.present_match << " " << row.invert;
  }
  // Every other matcher fails on a missing header, inverted or not.
  rbac_v3::Permission inverted = HeaderPermission("x-user", "ann");
  inverted.mutable_header()->set_invert_match(true);
  RbacPolicy policy = Allow(inverted, AnyPrincipal());
  EXPECT_FALSE(Allowed(policy, Call{}));
  Call other;
  other.metadata = {{"x-user", "bob"}};
  EXPECT_TRUE(Allowed(policy, other));
}

TEST(RbacPolicyTest, SeveralValuesAreJoinedWithCommas) {
  RbacPolicy policy = Allow(HeaderPermission("x-tag", "a,b,c"), AnyPrincipal());
  Call call;
  call.metadata = {{"x-tag", "a"}, {"x-other", "z"}, {"x-tag", "b"}, {"x-tag", "c"}};
  EXPECT_TRUE(Allowed(policy, call));
  call.metadata = {{"x-tag", "a"}};
  EXPECT_FALSE(Allowed(policy, call));
}

// A header's value is looked up once per check and reused by the policies
// after; joined values live in one buffer that the next joined header
// reuses, so those are not reused: each policy still sees its own header.
TEST(RbacPolicyTest, PoliciesReadingTheSameAndOtherJoinedHeadersSeeTheirOwnValues) {
  HttpRbac proto;
  auto add = [&](const std::string& name, const rbac_v3::Permission& permission) {
    auto& policy = (*proto.mutable_rules()->mutable_policies())[name];
    *policy.add_permissions() = permission;
    *policy.add_principals() = AnyPrincipal();
  };
  add("a", HeaderPermission("x-a", "no"));
  add("b", HeaderPermission("x-b", "no"));
  add("c", HeaderPermission("x-single", "no"));
  add("d", HeaderPermission("x-a", "1,2"));
  RbacPolicy policy = Compile(proto);
  Call call;
  call.metadata = {{"x-a", "1"}, {"x-b", "3"}, {"x-a", "2"}, {"x-b", "4"}, {"x-single", "s"}};
  const RbacPolicy::Policy* first = policy.FirstMatch(call.View());
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->name, "d");
  // A single value is reused from the first look-up.
  add("e", HeaderPermission("x-single", "s"));
  policy = Compile(proto);
  first = policy.FirstMatch(call.View());
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->name, "d");
  call.metadata.erase(call.metadata.begin() + 2);  // x-a is "1" now
  first = policy.FirstMatch(call.View());
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->name, "e");
}

TEST(RbacPolicyTest, BinaryHeadersAreMatchedInBase64) {
  RbacPolicy one = Allow(HeaderPermission("x-id-bin", "AQID"), AnyPrincipal());
  Call call;
  call.metadata = {{"x-id-bin", std::string("\x01\x02\x03", 3)}};
  EXPECT_TRUE(Allowed(one, call));
  RbacPolicy padded = Allow(HeaderPermission("x-id-bin", "AQ==,AQI="), AnyPrincipal());
  call.metadata = {{"x-id-bin", std::string("\x01", 1)}, {"x-id-bin", std::string("\x01\x02", 2)}};
  EXPECT_TRUE(Allowed(padded, call));
}

TEST(RbacPolicyTest, PseudoHeadersHostAndTe) {
  Call call;
  EXPECT_TRUE(Allowed(Allow(HeaderPermission(":method", "POST"), AnyPrincipal()), call));
  EXPECT_TRUE(Allowed(Allow(HeaderPermission(":path", "/demo.Echo/Say"), AnyPrincipal()), call));
  // A41: :authority and Host are one header, whichever the policy names.
  EXPECT_TRUE(
      Allowed(Allow(HeaderPermission(":authority", "echo.example.com"), AnyPrincipal()), call));
  EXPECT_TRUE(Allowed(Allow(HeaderPermission("Host", "echo.example.com"), AnyPrincipal()), call));
  // The client's content-type, not a fixed one.
  call.content_type = "application/grpc+proto";
  EXPECT_TRUE(Allowed(
      Allow(HeaderPermission("content-type", "application/grpc+proto"), AnyPrincipal()), call));
  // te is hop-by-hop: never present.
  rbac_v3::Permission te;
  te.mutable_header()->set_name("te");
  te.mutable_header()->set_present_match(true);
  call.metadata = {{"te", "trailers"}};
  EXPECT_FALSE(Allowed(Allow(te, AnyPrincipal()), call));
  // Metadata names are lowercase on the wire; a policy's are folded.
  call.metadata = {{"x-user", "ann"}};
  EXPECT_TRUE(Allowed(Allow(HeaderPermission("X-User", "ann"), AnyPrincipal()), call));
}

rbac_v3::Principal Authenticated(const std::string& exact) {
  rbac_v3::Principal p;
  p.mutable_authenticated()->mutable_principal_name()->set_exact(exact);
  return p;
}

TEST(RbacPolicyTest, PrincipalNameIsUriSansThenDnsSansThenSubjectThenEmpty) {
  Call call;
  call.connection.tls = TlsPeer{.uri_sans = {"spiffe://demo/client"},
                                .dns_sans = {"client.demo"},
                                .subject = "CN=client",
                                .has_certificate = true};
  EXPECT_TRUE(Allowed(Allow(AnyPermission(), Authenticated("spiffe://demo/client")), call));
  // A certificate with URI SANs is never matched on its DNS SANs or subject.
  EXPECT_FALSE(Allowed(Allow(AnyPermission(), Authenticated("client.demo")), call));
  EXPECT_FALSE(Allowed(Allow(AnyPermission(), Authenticated("CN=client")), call));
  call.connection.tls->uri_sans.clear();
  EXPECT_TRUE(Allowed(Allow(AnyPermission(), Authenticated("client.demo")), call));
  EXPECT_FALSE(Allowed(Allow(AnyPermission(), Authenticated("CN=client")), call));
  call.connection.tls->dns_sans.clear();
  EXPECT_TRUE(Allowed(Allow(AnyPermission(), Authenticated("CN=client")), call));
  // TLS without a client certificate: the name is "".
  call.connection.tls = TlsPeer{};
  EXPECT_TRUE(Allowed(Allow(AnyPermission(), Authenticated("")), call));
  EXPECT_FALSE(Allowed(Allow(AnyPermission(), Authenticated("CN=client")), call));
  // Plaintext is never authenticated, even for "".
  call.connection.tls.reset();
  EXPECT_FALSE(Allowed(Allow(AnyPermission(), Authenticated("")), call));
}

TEST(RbacPolicyTest, AuthenticatedWithoutNameMatchesAnyTlsConnection) {
  rbac_v3::Principal any_tls;
  any_tls.mutable_authenticated();
  RbacPolicy policy = Allow(AnyPermission(), any_tls);
  Call call;
  EXPECT_FALSE(Allowed(policy, call));
  call.connection.tls = TlsPeer{};  // no client certificate
  EXPECT_TRUE(Allowed(policy, call));
}

TEST(RbacPolicyTest, AddressesAndPorts) {
  Call call;
  auto cidr = [](const std::string& prefix, uint32_t length) {
    envoy::config::core::v3::CidrRange range;
    range.set_address_prefix(prefix);
    range.mutable_prefix_len()->set_value(length);
    return range;
  };
  // A41: source_ip, direct_remote_ip and remote_ip are all the peer.
  rbac_v3::Principal source;
  *source.mutable_source_ip() = cidr("192.168.0.0", 16);
  rbac_v3::Principal direct;
  *direct.mutable_direct_remote_ip() = cidr("192.168.1.0", 24);
  rbac_v3::Principal remote;
  *remote.mutable_remote_ip() = cidr("192.168.2.0", 24);
  EXPECT_TRUE(Allowed(Allow(AnyPermission(), source), call));
  EXPECT_TRUE(Allowed(Allow(AnyPermission(), direct), call));
  EXPECT_FALSE(Allowed(Allow(AnyPermission(), remote), call));
  // destination_ip and destination_port are the local end.
  rbac_v3::Permission destination;
  *destination.mutable_destination_ip() = cidr("10.0.0.0", 8);
  EXPECT_TRUE(Allowed(Allow(destination, AnyPrincipal()), call));
  rbac_v3::Permission port;
  port.set_destination_port(8080);
  EXPECT_TRUE(Allowed(Allow(port, AnyPrincipal()), call));
  port.set_destination_port(40000);  // the peer's port
  EXPECT_FALSE(Allowed(Allow(port, AnyPrincipal()), call));
  rbac_v3::Permission ports;
  ports.mutable_destination_port_range()->set_start(8000);
  ports.mutable_destination_port_range()->set_end(8080);  // end excluded
  EXPECT_FALSE(Allowed(Allow(ports, AnyPrincipal()), call));
  ports.mutable_destination_port_range()->set_end(8081);
  EXPECT_TRUE(Allowed(Allow(ports, AnyPrincipal()), call));
  // An IPv6 range does not hold IPv4 peers.
  rbac_v3::Principal v6;
  *v6.mutable_source_ip() = cidr("::", 0);
  EXPECT_FALSE(Allowed(Allow(AnyPermission(), v6), call));
}

TEST(RbacPolicyTest, MetadataRequestedServerNameAndSets) {
  Call call;
  rbac_v3::Permission metadata;
  metadata.mutable_metadata();
  EXPECT_FALSE(Allowed(Allow(metadata, AnyPrincipal()), call));
  metadata.mutable_metadata()->set_invert(true);
  EXPECT_TRUE(Allowed(Allow(metadata, AnyPrincipal()), call));
  rbac_v3::Permission sni;
  sni.mutable_requested_server_name()->set_exact("");
  EXPECT_TRUE(Allowed(Allow(sni, AnyPrincipal()), call));
  sni.mutable_requested_server_name()->set_exact("echo.example.com");
  EXPECT_FALSE(Allowed(Allow(sni, AnyPrincipal()), call));

  // and(path, not(header x-blocked present)), or(port 1, port 8080)
  rbac_v3::Permission both;
  auto* rules = both.mutable_and_rules();
  rules->add_rules()->mutable_url_path()->mutable_path()->set_exact("/demo.Echo/Say");
  auto* blocked = rules->add_rules()->mutable_not_rule()->mutable_header();
  blocked->set_name("x-blocked");
  blocked->set_present_match(true);
  auto* either = rules->add_rules()->mutable_or_rules();
  either->add_rules()->set_destination_port(1);
  either->add_rules()->set_destination_port(8080);
  RbacPolicy policy = Allow(both, AnyPrincipal());
  EXPECT_TRUE(Allowed(policy, call));
  call.metadata = {{"x-blocked", "1"}};
  EXPECT_FALSE(Allowed(policy, call));
  EXPECT_EQ(policy.RuleText(policy.policies[0].permissions),
            "and(url_path(exact:/demo.Echo/Say), not(header(x-blocked present)), "
            "or(destination_port(1), destination_port(8080)))");
}

TEST(RbacPolicyTest, PerRouteOverrideWithoutRbacEnforcesNothing) {
  ValidationErrors errors;
  envoy::extensions::filters::http::rbac::v3::RBACPerRoute per_route;
  EXPECT_FALSE(ParseRbacPerRoute(per_route.SerializeAsString(), errors).has_value());
  per_route.mutable_rbac()->mutable_rules()->set_action(rbac_v3::RBAC::DENY);
  EXPECT_TRUE(ParseRbacPerRoute(per_route.SerializeAsString(), errors).has_value());
  EXPECT_TRUE(errors.ok());
}

// Envoy's config validation, which gRPC skips: `any: false`, empty sets and
// empty permission or principal lists would silently allow everything or
// nothing. A config with errors is also a policy that denies everything,
// should anything use it.
TEST(RbacPolicyTest, ConfigsEnvoyRejectsAreErrorsAndFailClosed) {
  HttpRbac proto;
  auto& policy = (*proto.mutable_rules()->mutable_policies())["p"];
  policy.add_permissions()->set_any(false);
  policy.add_permissions()->mutable_and_rules();
  policy.add_principals()->mutable_or_ids();
  (*proto.mutable_rules()->mutable_policies())["q"];
  ValidationErrors errors;
  std::optional<RbacPolicy> compiled = ParseRbacConfig(proto.SerializeAsString(), errors);
  EXPECT_EQ(errors.Message("rbac"),
            "rbac: [field:rules.policies[p].permissions[0].any error:must be true; "
            "field:rules.policies[p].permissions[1].and_rules.rules error:must be non-empty; "
            "field:rules.policies[p].principals[0].or_ids.ids error:must be non-empty; "
            "field:rules.policies[q].permissions error:must be non-empty; "
            "field:rules.policies[q].principals error:must be non-empty]");
  ASSERT_TRUE(compiled.has_value());
  EXPECT_FALSE(Allowed(*compiled, Call{}));

  HttpRbac unknown_action;
  unknown_action.mutable_rules()->set_action(static_cast<rbac_v3::RBAC::Action>(7));
  ValidationErrors action_errors;
  compiled = ParseRbacConfig(unknown_action.SerializeAsString(), action_errors);
  EXPECT_EQ(action_errors.Message("rbac"), "rbac: [field:rules.action error:unknown action 7]");
  ASSERT_TRUE(compiled.has_value());
  EXPECT_FALSE(Allowed(*compiled, Call{}));
}

// A dual-stack listener's IPv4 peers are IPv4 (IpEndpoint), so an
// IPv4-mapped range is the IPv4 range it stands for.
TEST(RbacPolicyTest, Ipv4MappedRangesMatchIpv4Peers) {
  rbac_v3::Principal mapped;
  mapped.mutable_source_ip()->set_address_prefix("::ffff:192.168.0.0");
  mapped.mutable_source_ip()->mutable_prefix_len()->set_value(112);
  RbacPolicy policy = Allow(AnyPermission(), mapped);
  EXPECT_EQ(policy.RuleText(policy.policies[0].principals), "source_ip(192.168.0.0/16)");
  EXPECT_TRUE(Allowed(policy, Call{}));  // peer 192.168.1.7
}

TEST(RbacPolicyTest, TreatMissingHeaderAsEmpty) {
  rbac_v3::Permission empty = HeaderPermission("x-user", "");
  empty.mutable_header()->set_treat_missing_header_as_empty(true);
  RbacPolicy policy = Allow(empty, AnyPrincipal());
  EXPECT_TRUE(Allowed(policy, Call{}));
  // Without the flag a missing header fails the exact matcher.
  EXPECT_FALSE(Allowed(Allow(HeaderPermission("x-user", ""), AnyPrincipal()), Call{}));
  // A DENY of a missing-or-empty header refuses a call without it.
  HttpRbac deny;
  deny.mutable_rules()->set_action(rbac_v3::RBAC::DENY);
  auto& entry = (*deny.mutable_rules()->mutable_policies())["no_user"];
  *entry.add_permissions() = empty;
  *entry.add_principals() = AnyPrincipal();
  EXPECT_FALSE(Allowed(Compile(deny), Call{}));
}

// The per-call check allocates nothing once the thread's join buffer has
// grown, with ten policies over headers, paths, addresses and identities.
TEST(RbacPolicyTest, ChecksDoNotAllocate) {
  HttpRbac proto;
  proto.mutable_rules()->set_action(rbac_v3::RBAC::ALLOW);
  for (int i = 0; i < 10; ++i) {
    auto& policy = (*proto.mutable_rules()->mutable_policies())["p" + std::to_string(i)];
    auto* rules = policy.add_permissions()->mutable_and_rules();
    rules->add_rules()->mutable_url_path()->mutable_path()->set_prefix("/svc" + std::to_string(i) +
                                                                       ".");
    *rules->add_rules() = HeaderPermission("x-tag", "a,b");
    *rules->add_rules() = HeaderPermission("x-id-bin", "AQI=");  // base64 on each check
    auto* principal = policy.add_principals();
    principal->mutable_authenticated()->mutable_principal_name()->set_exact("spiffe://demo/" +
                                                                            std::to_string(i));
  }
  RbacPolicy policy = Compile(proto);
  Call call;
  call.path = "/svc9.Echo/Say";
  call.metadata = {{"x-tag", "a"}, {"x-tag", "b"}, {"x-id-bin", "\x01\x02"}};
  call.connection.tls = TlsPeer{.uri_sans = {"spiffe://demo/9"}, .has_certificate = true};
  ASSERT_TRUE(Allowed(policy, call));  // warms the join buffer
  StartCountingAllocations();
  bool all = true;
  for (int i = 0; i < 1000; ++i) all = all && Allowed(policy, call);
  EXPECT_EQ(StopCountingAllocations(), 0u);
  EXPECT_TRUE(all);
}

}  // namespace
}  // namespace uxds::testing
