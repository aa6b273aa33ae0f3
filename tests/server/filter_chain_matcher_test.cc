// FilterChainMatcher::Select over Listeners decoded by the server's own
// Listener decoder: every level of A36's "most specific" rule, its fallbacks,
// and the address forms a real socket reports.
#include "server/filter_chain_matcher.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server_listener_protos.h"

namespace uxds::testing {
namespace {

class FilterChainMatcherTest : public ::testing::Test {
 protected:
  // Decodes `listener_` and builds the matcher over it.
  void Build() {
    auto decoded = DecodeServerListener(listener_);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    resource_ = *decoded;
    matcher_ = std::make_unique<FilterChainMatcher>(
        std::get<ListenerResource::TcpListener>(resource_->listener));
  }

  // The chosen chain's name, "default" for the default chain (named so by
  // SetDefaultChain), "none" when the connection is to be closed.
  std::string Select(const std::string& dest_ip, const std::string& source_ip,
                     uint16_t source_port = 40000) {
    auto local = SocketAddress::FromIpAndPort(dest_ip, 8080);
    auto peer = SocketAddress::FromIpAndPort(source_ip, source_port);
    EXPECT_TRUE(local.ok() && peer.ok());
    const FilterChain* chain = matcher_->Select({*local, *peer});
    return chain == nullptr ? "none" : chain->name;
  }

  ListenerProto listener_ = ServerListenerProto();
  std::shared_ptr<const ListenerResource> resource_;
  std::unique_ptr<FilterChainMatcher> matcher_;
};

TEST_F(FilterChainMatcherTest, LongestDestinationPrefixWins) {
  AddPrefix(*AddChain(listener_, "wide"), "10.0.0.0/8");
  AddPrefix(*AddChain(listener_, "mid"), "10.1.0.0/16");
  AddPrefix(*AddChain(listener_, "narrow"), "10.1.2.0/24");
  AddPrefix(*AddChain(listener_, "host"), "10.1.2.3/32");
  Build();
  EXPECT_EQ(Select("10.1.2.3", "192.0.2.1"), "host");
  EXPECT_EQ(Select("10.1.2.4", "192.0.2.1"), "narrow");
  EXPECT_EQ(Select("10.1.3.0", "192.0.2.1"), "mid");
  EXPECT_EQ(Select("10.200.0.1", "192.0.2.1"), "wide");
  EXPECT_EQ(Select("11.0.0.1", "192.0.2.1"), "none");  // no match, no default
  EXPECT_EQ(Select("9.255.255.255", "192.0.2.1"), "none");
}

TEST_F(FilterChainMatcherTest, NoMatchTakesTheDefaultChain) {
  AddPrefix(*AddChain(listener_, "a"), "10.0.0.0/8");
  SetDefaultChain(listener_);
  Build();
  EXPECT_EQ(Select("10.0.0.1", "192.0.2.1"), "a");
  EXPECT_EQ(Select("127.0.0.1", "127.0.0.1"), "default");
  EXPECT_EQ(Select("::1", "::1"), "default");
}

TEST_F(FilterChainMatcherTest, OnlyADefaultChain) {
  SetDefaultChain(listener_);
  Build();
  EXPECT_EQ(Select("127.0.0.1", "127.0.0.1"), "default");
}

TEST_F(FilterChainMatcherTest, SeveralPrefixRangesInOneChain) {
  auto* match = AddChain(listener_, "a");
  AddPrefix(*match, "10.0.0.0/8");
  AddPrefix(*match, "2001:db8::/32");
  AddPrefix(*AddChain(listener_, "b"), "10.5.0.0/16");
  Build();
  EXPECT_EQ(Select("10.4.0.1", "192.0.2.1"), "a");
  EXPECT_EQ(Select("2001:db8::7", "2001:db8::8"), "a");
  EXPECT_EQ(Select("10.5.0.1", "192.0.2.1"), "b");
  EXPECT_EQ(Select("2001:db9::7", "2001:db8::8"), "none");
}

// A36: a /0 range still matches its family only; a chain without
// prefix_ranges matches every destination, less specifically than /0 (gRPC).
TEST_F(FilterChainMatcherTest, ZeroPrefixIsMoreSpecificThanNoPrefix) {
  AddChain(listener_, "any");
  AddPrefix(*AddChain(listener_, "all-v4"), "0.0.0.0/0");
  AddPrefix(*AddChain(listener_, "v6-host"), "::1/128");
  Build();
  EXPECT_EQ(Select("192.0.2.1", "192.0.2.2"), "all-v4");
  EXPECT_EQ(Select("::1", "::1"), "v6-host");
  EXPECT_EQ(Select("2001:db8::1", "::1"), "any");
}

TEST_F(FilterChainMatcherTest, ChainWithoutMatchMatchesEveryConnection) {
  AddChain(listener_, "everything");
  Build();
  EXPECT_EQ(Select("127.0.0.1", "127.0.0.1"), "everything");
  EXPECT_EQ(Select("::1", "2001:db8::1", 1), "everything");
  EXPECT_EQ(Select("0.0.0.0", "255.255.255.255", 65535), "everything");
}

// A36 (CIDR normalization): the host bits of a prefix are ignored and an
// over-long prefix_len is clamped.
TEST_F(FilterChainMatcherTest, PrefixesAreNormalized) {
  AddPrefix(*AddChain(listener_, "a"), "10.1.2.3/8");
  AddPrefix(*AddChain(listener_, "b"), "192.0.2.7/99");
  Build();
  EXPECT_EQ(Select("10.200.0.1", "192.0.2.1"), "a");
  EXPECT_EQ(Select("192.0.2.7", "10.0.0.1"), "b");
  EXPECT_EQ(Select("192.0.2.8", "10.0.0.1"), "none");
}

// Envoy and gRPC do not backtrack: after the longest destination prefix is
// chosen, a miss at a later level is no match, even if a shorter
// destination prefix would have matched the source.
TEST_F(FilterChainMatcherTest, NoBacktrackingToAShorterDestination) {
  AddPrefix(*AddChain(listener_, "wide"), "10.0.0.0/8");
  auto* narrow = AddChain(listener_, "narrow-from-lan");
  AddPrefix(*narrow, "10.1.0.0/16");
  AddSourcePrefix(*narrow, "192.168.0.0/16");
  SetDefaultChain(listener_);
  Build();
  EXPECT_EQ(Select("10.1.0.1", "192.168.3.4"), "narrow-from-lan");
  EXPECT_EQ(Select("10.1.0.1", "172.16.0.1"), "default");
  EXPECT_EQ(Select("10.2.0.1", "172.16.0.1"), "wide");
}

// A36: SAME_IP_OR_LOOPBACK is a peer on a loopback address (127.0.0.0/8,
// ::1) or on the very address it connected to; anything else is EXTERNAL.
TEST_F(FilterChainMatcherTest, SourceTypeSplitsLocalFromExternal) {
  AddChain(listener_, "local")->set_source_type(FilterChainMatchProto::SAME_IP_OR_LOOPBACK);
  AddChain(listener_, "external")->set_source_type(FilterChainMatchProto::EXTERNAL);
  Build();
  EXPECT_EQ(Select("127.0.0.1", "127.0.0.1"), "local");
  EXPECT_EQ(Select("10.0.0.1", "127.5.6.7"), "local");
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.1"), "local");  // same IP
  EXPECT_EQ(Select("::1", "::1"), "local");
  EXPECT_EQ(Select("2001:db8::1", "2001:db8::1"), "local");
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.2"), "external");
  EXPECT_EQ(Select("127.0.0.2", "128.0.0.1"), "external");
  EXPECT_EQ(Select("2001:db8::1", "2001:db8::2"), "external");
  EXPECT_EQ(Select("::2", "::2:1"), "external");
}

// Envoy's rule, which A36 calls the standard matching logic: the chains of
// the connection's own source type if there are any, else the chains for
// ANY source type.
TEST_F(FilterChainMatcherTest, SourceTypeFallsBackToAny) {
  AddChain(listener_, "local")->set_source_type(FilterChainMatchProto::SAME_IP_OR_LOOPBACK);
  AddChain(listener_, "any");
  Build();
  EXPECT_EQ(Select("127.0.0.1", "127.0.0.1"), "local");
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.2"), "any");
}

TEST_F(FilterChainMatcherTest, SourceTypeWithoutAnyIsNoMatch) {
  AddChain(listener_, "external")->set_source_type(FilterChainMatchProto::EXTERNAL);
  SetDefaultChain(listener_);
  Build();
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.2"), "external");
  EXPECT_EQ(Select("127.0.0.1", "127.0.0.1"), "default");
}

// A specific source type is chosen before the source IP: a miss there does
// not fall back to the ANY chains.
TEST_F(FilterChainMatcherTest, SourceTypeIsChosenBeforeSourceIp) {
  auto* local = AddChain(listener_, "local-host");
  local->set_source_type(FilterChainMatchProto::SAME_IP_OR_LOOPBACK);
  AddSourcePrefix(*local, "127.0.0.1/32");
  AddChain(listener_, "any");
  Build();
  EXPECT_EQ(Select("127.0.0.1", "127.0.0.1"), "local-host");
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.1"), "none");  // SAME_IP, source IP misses
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.9"), "any");
}

TEST_F(FilterChainMatcherTest, LongestSourcePrefixWins) {
  AddSourcePrefix(*AddChain(listener_, "lan"), "192.168.0.0/16");
  AddSourcePrefix(*AddChain(listener_, "subnet"), "192.168.1.0/24");
  AddSourcePrefix(*AddChain(listener_, "v6"), "2001:db8::/48");
  AddChain(listener_, "anyone");
  Build();
  EXPECT_EQ(Select("10.0.0.1", "192.168.1.9"), "subnet");
  EXPECT_EQ(Select("10.0.0.1", "192.168.2.9"), "lan");
  EXPECT_EQ(Select("10.0.0.1", "172.16.0.1"), "anyone");
  EXPECT_EQ(Select("2001:db8:1::1", "2001:db8::5"), "v6");
  EXPECT_EQ(Select("2001:db8:1::1", "2001:db9::5"), "anyone");
}

// A source port matches exactly; a chain without source_ports takes every
// other port. Ports are the last level: a port miss under the longest source
// prefix is no match.
TEST_F(FilterChainMatcherTest, ExactSourcePortThenAnyPort) {
  auto* ports = AddChain(listener_, "ports");
  ports->add_source_ports(40000);
  ports->add_source_ports(40002);
  AddChain(listener_, "other-ports");
  auto* lan_port = AddChain(listener_, "lan-port");
  AddSourcePrefix(*lan_port, "192.168.0.0/16");
  lan_port->add_source_ports(50000);
  SetDefaultChain(listener_);
  Build();
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.2", 40000), "ports");
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.2", 40002), "ports");
  EXPECT_EQ(Select("10.0.0.1", "10.0.0.2", 40001), "other-ports");
  EXPECT_EQ(Select("10.0.0.1", "192.168.0.1", 50000), "lan-port");
  EXPECT_EQ(Select("10.0.0.1", "192.168.0.1", 40000), "default");
}

// A36: destination_port, server_names, application_protocols and any
// transport_protocol but raw_buffer can never match; such chains drop out.
TEST_F(FilterChainMatcherTest, AlwaysFailingFieldsNeverMatch) {
  AddChain(listener_, "port")->mutable_destination_port()->set_value(8080);
  AddChain(listener_, "sni")->add_server_names("example.com");
  auto* alpn = AddChain(listener_, "alpn");
  AddPrefix(*alpn, "10.0.0.0/8");
  alpn->add_application_protocols("h2");
  auto* tls = AddChain(listener_, "tls");
  AddPrefix(*tls, "10.1.0.0/16");
  tls->set_transport_protocol("tls");
  SetDefaultChain(listener_);
  Build();
  EXPECT_EQ(Select("10.1.0.1", "10.0.0.2"), "default");
  EXPECT_EQ(Select("127.0.0.1", "127.0.0.1"), "default");
}

// gRPC: within a destination prefix, a chain asking for raw_buffer is more
// specific than one naming no transport protocol.
TEST_F(FilterChainMatcherTest, RawBufferIsMoreSpecificThanNoTransportProtocol) {
  AddPrefix(*AddChain(listener_, "plain"), "10.0.0.0/8");
  auto* raw = AddChain(listener_, "raw");
  AddPrefix(*raw, "10.0.0.0/8");
  raw->set_transport_protocol("raw_buffer");
  AddPrefix(*AddChain(listener_, "other-plain"), "10.1.0.0/16");
  Build();
  EXPECT_EQ(Select("10.0.0.1", "192.0.2.1"), "raw");
  EXPECT_EQ(Select("10.1.0.1", "192.0.2.1"), "other-plain");
}

// A dual-stack socket reports IPv4 ends as ::ffff:a.b.c.d: they match IPv4
// prefixes and count as loopback like the IPv4 address they carry.
TEST_F(FilterChainMatcherTest, Ipv4MappedAddressesMatchAsIpv4) {
  auto* local = AddChain(listener_, "local");
  AddPrefix(*local, "10.0.0.0/8");
  local->set_source_type(FilterChainMatchProto::SAME_IP_OR_LOOPBACK);
  auto* external = AddChain(listener_, "external");
  AddPrefix(*external, "10.0.0.0/8");
  AddSourcePrefix(*external, "192.168.0.0/16");
  external->set_source_type(FilterChainMatchProto::EXTERNAL);
  Build();
  EXPECT_EQ(Select("::ffff:10.1.2.3", "::ffff:127.0.0.1"), "local");
  EXPECT_EQ(Select("::ffff:10.1.2.3", "10.1.2.3"), "local");  // same IP, two forms
  EXPECT_EQ(Select("::ffff:10.1.2.3", "::ffff:192.168.7.7"), "external");
  EXPECT_EQ(Select("::ffff:11.1.2.3", "::ffff:192.168.7.7"), "none");
}

// An IPv4-mapped prefix (::ffff:10.0.0.0/104) names IPv4 addresses too, and
// nests with IPv4 prefixes as the IPv4 range it stands for.
TEST_F(FilterChainMatcherTest, Ipv4MappedPrefixesMatchIpv4Addresses) {
  AddPrefix(*AddChain(listener_, "mapped-wide"), "::ffff:10.0.0.0/104");
  AddPrefix(*AddChain(listener_, "native-narrow"), "10.1.0.0/16");
  AddPrefix(*AddChain(listener_, "mapped-host"), "::ffff:10.1.2.3/128");
  AddPrefix(*AddChain(listener_, "short-v6"), "::/64");
  Build();
  EXPECT_EQ(Select("10.9.0.1", "192.0.2.1"), "mapped-wide");
  EXPECT_EQ(Select("::ffff:10.9.0.1", "192.0.2.1"), "mapped-wide");
  EXPECT_EQ(Select("10.1.9.9", "192.0.2.1"), "native-narrow");
  EXPECT_EQ(Select("10.1.2.3", "192.0.2.1"), "mapped-host");
  EXPECT_EQ(Select("::5", "192.0.2.1"), "short-v6");
  EXPECT_EQ(Select("11.0.0.1", "192.0.2.1"), "none");
}

// A36: "If the most-specific matching logic might not produce a unique
// result, then the Listener must be NACKed", with matchers normalized first:
// ::ffff:10.0.0.0/104 is 10.0.0.0/8 written as IPv6, and the lookup matches
// both against the same connections.
TEST_F(FilterChainMatcherTest, Ipv4MappedDestinationPrefixDuplicatingIpv4IsNacked) {
  AddPrefix(*AddChain(listener_, "native"), "10.0.0.0/8");
  AddPrefix(*AddChain(listener_, "mapped"), "::ffff:10.0.0.0/104");
  auto decoded = DecodeServerListener(listener_);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find(
                "field:filter_chains[1].filter_chain_match error:duplicate matching rules "
                "detected when adding filter chain: {prefix_ranges={::ffff:10.0.0.0/104}}"),
            std::string::npos)
      << decoded.status().message();
}

TEST_F(FilterChainMatcherTest, Ipv4MappedSourcePrefixDuplicatingIpv4IsNacked) {
  AddSourcePrefix(*AddChain(listener_, "mapped"), "::ffff:192.168.0.0/112");
  AddSourcePrefix(*AddChain(listener_, "native"), "192.168.0.0/16");
  auto decoded = DecodeServerListener(listener_);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find(
                "field:filter_chains[1].filter_chain_match error:duplicate matching rules "
                "detected when adding filter chain: {source_prefix_ranges={192.168.0.0/16}}"),
            std::string::npos)
      << decoded.status().message();
}

// The two forms of one destination range are one destination entry: chains
// that differ below it (here by source prefix) are all reachable.
TEST_F(FilterChainMatcherTest, Ipv4MappedAndIpv4FormsOfOneDestinationShareIt) {
  auto* native = AddChain(listener_, "native-from-lan");
  AddPrefix(*native, "10.0.0.0/8");
  AddSourcePrefix(*native, "192.168.0.0/16");
  auto* mapped = AddChain(listener_, "mapped-from-wan");
  AddPrefix(*mapped, "::ffff:10.0.0.0/104");
  AddSourcePrefix(*mapped, "::ffff:203.0.113.0/120");
  Build();
  EXPECT_EQ(Select("10.1.2.3", "192.168.1.1"), "native-from-lan");
  EXPECT_EQ(Select("10.1.2.3", "203.0.113.9"), "mapped-from-wan");
  EXPECT_EQ(Select("::ffff:10.1.2.3", "::ffff:203.0.113.9"), "mapped-from-wan");
  EXPECT_EQ(Select("10.1.2.3", "198.51.100.1"), "none");
}

// Every level at once, with a source IP that is both in a longer and a
// shorter source prefix of the same source type.
TEST_F(FilterChainMatcherTest, AllLevelsTogether) {
  auto* a = AddChain(listener_, "a");
  AddPrefix(*a, "10.0.0.0/8");
  a->set_source_type(FilterChainMatchProto::EXTERNAL);
  AddSourcePrefix(*a, "192.168.0.0/16");
  auto* b = AddChain(listener_, "b");
  AddPrefix(*b, "10.0.0.0/8");
  b->set_source_type(FilterChainMatchProto::EXTERNAL);
  AddSourcePrefix(*b, "192.168.1.0/24");
  b->add_source_ports(9000);
  auto* c = AddChain(listener_, "c");
  AddPrefix(*c, "10.0.0.0/8");
  AddSourcePrefix(*c, "192.168.1.0/24");
  SetDefaultChain(listener_);
  Build();
  EXPECT_EQ(Select("10.0.0.1", "192.168.1.1", 9000), "b");
  EXPECT_EQ(Select("10.0.0.1", "192.168.1.1", 9001), "default");  // port miss under /24
  EXPECT_EQ(Select("10.0.0.1", "192.168.2.1", 9001), "a");
  EXPECT_EQ(Select("10.0.0.1", "127.0.0.1", 9000), "default");  // loopback: ANY has no 127/8
}

TEST_F(FilterChainMatcherTest, SocketWithoutAnIpAddressTakesTheDefault) {
  AddChain(listener_, "everything");
  SetDefaultChain(listener_);
  Build();
  EXPECT_EQ(matcher_->Select({SocketAddress(), SocketAddress()})->name, "default");
}

}  // namespace
}  // namespace uxds::testing
