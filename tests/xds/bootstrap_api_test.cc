// Bootstrap beyond parsing: Listener resource names (A36, A47), validation of
// bootstraps built in code, server identity, and the Node proto.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "uxds/bootstrap.h"
#include "xds/bootstrap.h"

namespace uxds {
namespace {

XdsServerConfig InsecureServer(std::string uri) {
  XdsServerConfig server;
  server.server_uri = std::move(uri);
  return server;
}

TEST(ListenerResourceNameTest, OldStyleTemplateIsNotEncoded) {
  EXPECT_EQ(ExpandListenerResourceNameTemplate("%s", "server.example.com:443"),
            "server.example.com:443");
  EXPECT_EQ(ExpandListenerResourceNameTemplate("grpc/server?xds.resource.listening_address=%s",
                                               "[::]:8080"),
            "grpc/server?xds.resource.listening_address=[::]:8080");
  EXPECT_EQ(ExpandListenerResourceNameTemplate("a b %s", "c d"), "a b c d");
}

TEST(ListenerResourceNameTest, XdstpTemplateIsPercentEncoded) {
  // A47: only characters RFC 3986 allows in a path stay; '/' stays too.
  EXPECT_EQ(ExpandListenerResourceNameTemplate("xdstp://auth/envoy.config.listener.v3.Listener/%s",
                                               "svc.example.com/a:b@c"),
            "xdstp://auth/envoy.config.listener.v3.Listener/svc.example.com/a:b@c");
  EXPECT_EQ(ExpandListenerResourceNameTemplate("xdstp://auth/L/%s", "[::]:8080"),
            "xdstp://auth/L/%5B::%5D:8080");
  EXPECT_EQ(ExpandListenerResourceNameTemplate("xdstp://auth/L/%s", "a b?c#d%e\"\xc3\xa9"),
            "xdstp://auth/L/a%20b%3Fc%23d%25e%22%C3%A9");
  EXPECT_EQ(ExpandListenerResourceNameTemplate("xdstp://auth/L/%s", "-._~!$&'()*+,;="),
            "xdstp://auth/L/-._~!$&'()*+,;=");
}

TEST(ListenerResourceNameTest, EveryTokenIsReplacedAndTheReplacementIsNotRescanned) {
  EXPECT_EQ(ExpandListenerResourceNameTemplate("%s/%s", "x%s"), "x%s/x%s");
  EXPECT_EQ(ExpandListenerResourceNameTemplate("no-token", "x"), "no-token");
  EXPECT_EQ(ExpandListenerResourceNameTemplate("%%s", "x"), "%x");
}

TEST(ListenerResourceNameTest, ClientNamesFollowA47) {
  Bootstrap bootstrap;
  bootstrap.xds_servers.push_back(InsecureServer("s:1"));
  // No template anywhere: the target itself.
  EXPECT_EQ(bootstrap.ClientListenerResourceName("", "svc.example.com").value(), "svc.example.com");
  bootstrap.client_default_listener_resource_name_template =
      "xdstp://xds.authority.com/envoy.config.listener.v3.Listener/%s";
  EXPECT_EQ(bootstrap.ClientListenerResourceName("", "svc.example.com").value(),
            "xdstp://xds.authority.com/envoy.config.listener.v3.Listener/svc.example.com");
  // An authority with no template gets A47's default.
  bootstrap.authorities["xds.authority.com"] = XdsAuthority{};
  EXPECT_EQ(bootstrap.ClientListenerResourceName("xds.authority.com", "svc example").value(),
            "xdstp://xds.authority.com/envoy.config.listener.v3.Listener/svc%20example");
  bootstrap.authorities["other.com"].client_listener_resource_name_template =
      "xdstp://other.com/envoy.config.listener.v3.Listener/client/%s?v=1";
  EXPECT_EQ(bootstrap.ClientListenerResourceName("other.com", "svc").value(),
            "xdstp://other.com/envoy.config.listener.v3.Listener/client/svc?v=1");
  auto missing = bootstrap.ClientListenerResourceName("missing.com", "svc");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.status().message(),
            "authority \"missing.com\" is not in the bootstrap's authorities");
}

TEST(ListenerResourceNameTest, ServerNameNeedsTheTemplate) {
  Bootstrap bootstrap;
  auto unset = bootstrap.ServerListenerResourceName("0.0.0.0:8080");
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(unset.status().message(),
            "the bootstrap has no server_listener_resource_name_template, which an xDS-enabled "
            "server needs");
  bootstrap.server_listener_resource_name_template =
      "grpc/server?xds.resource.listening_address=%s";
  EXPECT_EQ(bootstrap.ServerListenerResourceName("0.0.0.0:8080").value(),
            "grpc/server?xds.resource.listening_address=0.0.0.0:8080");
  bootstrap.server_listener_resource_name_template =
      "xdstp://xds.authority.com/envoy.config.listener.v3.Listener/grpc/server/%s";
  EXPECT_EQ(
      bootstrap.ServerListenerResourceName("[::]:8080").value(),
      "xdstp://xds.authority.com/envoy.config.listener.v3.Listener/grpc/server/%5B::%5D:8080");
}

TEST(BootstrapValidateTest, BuiltInCodeWithTheJsonRules) {
  Bootstrap bootstrap;
  EXPECT_EQ(bootstrap.Validate().message(),
            "errors validating bootstrap: [field:xds_servers error:must be non-empty]");

  bootstrap.xds_servers.push_back(InsecureServer("s:1"));
  EXPECT_TRUE(bootstrap.Validate().ok());

  XdsServerConfig bad_tls = InsecureServer("");
  bad_tls.channel_credentials.type = "tls";
  bad_tls.channel_credentials.private_key_file = "/k.pem";
  XdsServerConfig bad_type = InsecureServer("t:1");
  bad_type.channel_credentials.type = "google_default";
  XdsServerConfig insecure_with_files = InsecureServer("u:1");
  insecure_with_files.channel_credentials.ca_certificate_file = "/ca.pem";
  bootstrap.xds_servers = {InsecureServer("s:1"), bad_tls, bad_type};
  bootstrap.authorities["a.com"].client_listener_resource_name_template = "xdstp://b.com/%s";
  bootstrap.authorities["a.com"].xds_servers = {insecure_with_files};
  bootstrap.authorities["b.com"].client_listener_resource_name_template = "xdstp://b.com/L/%s";
  Status status = bootstrap.Validate();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "errors validating bootstrap: ["
            "field:xds_servers[1].server_uri error:must be non-empty; "
            "field:xds_servers[1].channel_creds errors:[fields \"certificate_file\" and "
            "\"private_key_file\" must be both set or both unset; "
            "private_key_file \"/k.pem\" cannot be opened: No such file or directory]; "
            "field:xds_servers[2].channel_creds error:unsupported credentials type "
            "\"google_default\" (supported: insecure, tls); "
            "field:authorities[\"a.com\"].client_listener_resource_name_template "
            "error:field must begin with \"xdstp://a.com/\"; "
            "field:authorities[\"a.com\"].xds_servers[0].channel_creds "
            "error:certificate files are only used with \"tls\" credentials]");
}

TEST(XdsServerConfigTest, EqualityAndKeyCoverEveryDifference) {
  XdsServerConfig a = InsecureServer("xds.example.com:443");
  XdsServerConfig b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.Key(), b.Key());
  EXPECT_EQ(a.Key(), "{server_uri=xds.example.com:443, channel_creds={type=insecure}}");

  b.fail_on_data_errors = true;
  EXPECT_NE(a, b);
  EXPECT_EQ(b.Key(),
            "{server_uri=xds.example.com:443, channel_creds={type=insecure}, "
            "server_features=[fail_on_data_errors]}");
  b.resource_timer_is_transient_error = true;
  EXPECT_EQ(b.Key(),
            "{server_uri=xds.example.com:443, channel_creds={type=insecure}, "
            "server_features=[fail_on_data_errors, resource_timer_is_transient_error]}");

  XdsServerConfig c = a;
  c.channel_credentials = {"tls", "/ca.pem", "/c.pem", "/k.pem"};
  EXPECT_NE(a, c);
  EXPECT_EQ(c.Key(),
            "{server_uri=xds.example.com:443, channel_creds={type=tls, "
            "ca_certificate_file=/ca.pem, certificate_file=/c.pem, private_key_file=/k.pem}}");

  // Usable as an ordered map key: one ADS stream per distinct server (A47).
  std::map<XdsServerConfig, int> streams;
  streams[a] = 1;
  streams[b] = 2;
  streams[c] = 3;
  streams[InsecureServer("xds.example.com:443")] += 10;
  EXPECT_EQ(streams.size(), 3u);
  EXPECT_EQ(streams[a], 11);
}

TEST(XdsServerConfigTest, ParsedServersListedTwiceAreEqual) {
  auto bootstrap = Bootstrap::FromJson(R"({
    "xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}],
                     "server_features": ["ignore_resource_deletion"]}],
    "authorities": {"a.com": {"xds_servers": [
        {"server_uri": "s:1", "channel_creds": [{"type": "google_default"}, {"type": "insecure"}]}]}}
  })");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  // ignore_resource_deletion changes nothing under A88, so it does not make
  // the servers different.
  EXPECT_EQ(bootstrap->xds_servers[0], bootstrap->authorities.at("a.com").xds_servers[0]);
}

TEST(NodeProtoTest, CarriesEveryBootstrapField) {
  auto bootstrap = Bootstrap::FromJson(R"({
    "xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}],
    "node": {"id": "n1", "cluster": "c1", "locality": {"zone": "z1"},
             "metadata": {"s": "v", "n": 2, "b": false, "z": null, "l": [1, "x"], "o": {"k": "v"}}}
  })");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  envoy::config::core::v3::Node proto;
  PopulateNodeProto(bootstrap->node, "uxds", "0.1.0", &proto);
  EXPECT_EQ(proto.id(), "n1");
  EXPECT_EQ(proto.cluster(), "c1");
  ASSERT_TRUE(proto.has_locality());
  EXPECT_EQ(proto.locality().region(), "");
  EXPECT_EQ(proto.locality().zone(), "z1");
  EXPECT_EQ(proto.user_agent_name(), "uxds");
  EXPECT_EQ(proto.user_agent_version(), "0.1.0");
  const auto& fields = proto.metadata().fields();
  ASSERT_EQ(fields.size(), 6u);
  EXPECT_EQ(fields.at("s").string_value(), "v");
  EXPECT_EQ(fields.at("n").number_value(), 2.0);
  EXPECT_EQ(fields.at("b").kind_case(), google::protobuf::Value::kBoolValue);
  EXPECT_FALSE(fields.at("b").bool_value());
  EXPECT_EQ(fields.at("z").kind_case(), google::protobuf::Value::kNullValue);
  ASSERT_EQ(fields.at("l").list_value().values_size(), 2);
  EXPECT_EQ(fields.at("l").list_value().values(0).number_value(), 1.0);
  EXPECT_EQ(fields.at("l").list_value().values(1).string_value(), "x");
  EXPECT_EQ(fields.at("o").struct_value().fields().at("k").string_value(), "v");
}

TEST(NodeProtoTest, EmptyNodeLeavesOptionalPartsUnset) {
  envoy::config::core::v3::Node proto;
  PopulateNodeProto(XdsNode{}, "uxds", "0.1.0", &proto);
  EXPECT_FALSE(proto.has_locality());
  EXPECT_FALSE(proto.has_metadata());
  EXPECT_EQ(proto.id(), "");
}

}  // namespace
}  // namespace uxds
