#include "uxds/bootstrap.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "support/test_support.h"
#include "xds/bootstrap.h"
#include "xds/certificate_providers.h"

namespace uxds {
namespace {

constexpr const char* kFullBootstrap = R"json({
  "xds_servers": [
    {
      "server_uri": "xds.example.com:443",
      "channel_creds": [
        {"type": "google_default"},
        {"type": "fake", "config": {"certificate_file": 7}},
        {"type": "tls", "config": {"ca_certificate_file": "/etc/xds/ca.pem",
                                   "certificate_file": "/etc/xds/cert.pem",
                                   "private_key_file": "/etc/xds/key.pem",
                                   "refresh_interval": "600s"}},
        {"type": "insecure"}
      ],
      "server_features": ["fail_on_data_errors", "resource_timer_is_transient_error",
                          "ignore_resource_deletion", "xds_v3", 42]
    },
    {
      "server_uri": "backup.example.com:18000",
      "channel_creds": [{"type": "insecure"}],
      "unknown_server_field": true
    }
  ],
  "node": {
    "id": "projects/1/nodes/a",
    "cluster": "cluster-a",
    "locality": {"region": "r1", "zone": "z1", "sub_zone": "s1"},
    "metadata": {"TRAFFIC_DIRECTOR_NETWORK_NAME": "default", "count": 3, "ratio": 0.5,
                 "on": true, "nothing": null, "list": ["a", 1], "nested": {"k": "v"}}
  },
  "authorities": {
    "xds.example.com": {
      "client_listener_resource_name_template":
          "xdstp://xds.example.com/envoy.config.listener.v3.Listener/grpc/%s",
      "xds_servers": [{"server_uri": "auth.example.com:443",
                       "channel_creds": [{"type": "insecure"}]}]
    },
    "other.example.com": {}
  },
  "client_default_listener_resource_name_template": "xdstp://xds.example.com/envoy.config.listener.v3.Listener/%s",
  "server_listener_resource_name_template": "grpc/server?xds.resource.listening_address=%s",
  "certificate_providers": {
    "default": {"plugin_name": "file_watcher",
                "config": {"certificate_file": "/c.pem", "private_key_file": "/k.pem",
                           "refresh_interval": "60s"}},
    "roots_only": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/ca.pem"}}
  },
  "unknown_top_level_field": {"ignored": [1, 2, 3]}
})json";

// kFullBootstrap's TLS credential files, which must exist and be readable.
const std::string& CredentialDir() {
  static const testing::TempDir dir;
  static const bool written = [] {
    for (const char* name : {"ca.pem", "cert.pem", "key.pem"}) {
      testing::WriteFile(dir.File(name), "-----BEGIN CERTIFICATE-----\n");
    }
    return true;
  }();
  (void)written;
  return dir.path();
}

// kFullBootstrap with its credential files in CredentialDir().
std::string FullBootstrap() {
  std::string json = kFullBootstrap;
  for (size_t at = json.find("/etc/xds"); at != std::string::npos; at = json.find("/etc/xds")) {
    json.replace(at, std::string_view("/etc/xds").size(), CredentialDir());
  }
  return json;
}

TEST(BootstrapTest, FullBootstrapParses) {
  auto bootstrap = Bootstrap::FromJson(FullBootstrap());
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();

  ASSERT_EQ(bootstrap->xds_servers.size(), 2u);
  const XdsServerConfig& primary = bootstrap->xds_servers[0];
  EXPECT_EQ(primary.server_uri, "xds.example.com:443");
  // The first supported type wins; unsupported ones before it are skipped
  // without validating their config beyond its being an object (as gRPC).
  EXPECT_EQ(primary.channel_credentials.type, "tls");
  EXPECT_EQ(primary.channel_credentials.ca_certificate_file, CredentialDir() + "/ca.pem");
  EXPECT_EQ(primary.channel_credentials.certificate_file, CredentialDir() + "/cert.pem");
  EXPECT_EQ(primary.channel_credentials.private_key_file, CredentialDir() + "/key.pem");
  EXPECT_TRUE(primary.fail_on_data_errors);
  EXPECT_TRUE(primary.resource_timer_is_transient_error);
  const XdsServerConfig& backup = bootstrap->xds_servers[1];
  EXPECT_EQ(backup.server_uri, "backup.example.com:18000");
  EXPECT_EQ(backup.channel_credentials, XdsChannelCredentials{});
  EXPECT_FALSE(backup.fail_on_data_errors);
  EXPECT_FALSE(backup.resource_timer_is_transient_error);

  const XdsNode& node = bootstrap->node;
  EXPECT_EQ(node.id, "projects/1/nodes/a");
  EXPECT_EQ(node.cluster, "cluster-a");
  EXPECT_EQ(node.locality, (XdsLocality{"r1", "z1", "s1"}));
  JsonValue::Object expected_metadata{
      {"TRAFFIC_DIRECTOR_NETWORK_NAME", JsonValue{std::string("default")}},
      {"count", JsonValue{3.0}},
      {"ratio", JsonValue{0.5}},
      {"on", JsonValue{true}},
      {"nothing", JsonValue{}},
      {"list", JsonValue{JsonValue::Array{JsonValue{std::string("a")}, JsonValue{1.0}}}},
      {"nested", JsonValue{JsonValue::Object{{"k", JsonValue{std::string("v")}}}}},
  };
  EXPECT_EQ(node.metadata, expected_metadata);

  ASSERT_EQ(bootstrap->authorities.size(), 2u);
  const XdsAuthority* authority = bootstrap->FindAuthority("xds.example.com");
  ASSERT_NE(authority, nullptr);
  EXPECT_EQ(authority->client_listener_resource_name_template,
            "xdstp://xds.example.com/envoy.config.listener.v3.Listener/grpc/%s");
  ASSERT_EQ(authority->xds_servers.size(), 1u);
  EXPECT_EQ(authority->xds_servers[0].server_uri, "auth.example.com:443");
  const XdsAuthority* other = bootstrap->FindAuthority("other.example.com");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(*other, XdsAuthority{});
  EXPECT_EQ(bootstrap->FindAuthority("missing.example.com"), nullptr);

  EXPECT_EQ(bootstrap->client_default_listener_resource_name_template,
            "xdstp://xds.example.com/envoy.config.listener.v3.Listener/%s");
  EXPECT_EQ(bootstrap->server_listener_resource_name_template,
            "grpc/server?xds.resource.listening_address=%s");

  ASSERT_EQ(bootstrap->certificate_providers.size(), 2u);
  EXPECT_EQ(
      bootstrap->certificate_providers.at("default"),
      (CertificateProviderConfig{
          "file_watcher",
          R"({"certificate_file":"/c.pem","private_key_file":"/k.pem","refresh_interval":"60s"})"}));
  EXPECT_EQ(bootstrap->certificate_providers.at("roots_only"),
            (CertificateProviderConfig{"file_watcher", R"({"ca_certificate_file":"/ca.pem"})"}));

  EXPECT_TRUE(bootstrap->Validate().ok()) << bootstrap->Validate().ToString();
}

TEST(BootstrapTest, MinimalBootstrapHasDefaults) {
  auto bootstrap = Bootstrap::FromJson(
      R"({"xds_servers": [{"server_uri": "localhost:1", "channel_creds": [{"type": "insecure"}]}]})");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  Bootstrap expected;
  expected.xds_servers.push_back(XdsServerConfig{"localhost:1", {}, false, false});
  EXPECT_EQ(*bootstrap, expected);
}

// A bootstrap whose node metadata holds `depth` nested arrays; the document
// is nested depth + 3 levels deep (top level, node, metadata).
std::string DeeplyNestedMetadata(size_t depth) {
  return R"({"xds_servers": [{"server_uri": "localhost:1", "channel_creds": [{"type": "insecure"}]}],)"
         R"( "node": {"id": "n", "metadata": {"deep": )" +
         std::string(depth, '[') + std::string(depth, ']') + "}}}";
}

TEST(BootstrapTest, NestingIsLimitedAsGrpcLimitsIt) {
  // gRPC's JSON reader stops at 255 levels. Without a limit, deeply nested
  // metadata overflowed the stack while it was converted (a crash, not an
  // error).
  auto at_limit = Bootstrap::FromJson(DeeplyNestedMetadata(255 - 3));
  ASSERT_TRUE(at_limit.ok()) << at_limit.status().ToString();
  for (size_t depth : {size_t{1000000}, size_t{255 - 2}}) {
    auto too_deep = Bootstrap::FromJson(DeeplyNestedMetadata(depth));
    ASSERT_FALSE(too_deep.ok()) << depth;
    EXPECT_EQ(too_deep.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(too_deep.status().message(), "not valid JSON: nested more than 255 levels deep");
  }
}

struct InvalidCase {
  const char* name;
  const char* json;
  const char* message;
};

class InvalidBootstrapTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidBootstrapTest, FailsWithEveryProblemListed) {
  auto bootstrap = Bootstrap::FromJson(GetParam().json);
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_EQ(bootstrap.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bootstrap.status().message(), GetParam().message);
}

// A server entry that is valid, to keep each case about one thing.
#define GOOD_SERVER R"({"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]})"

INSTANTIATE_TEST_SUITE_P(
    Cases, InvalidBootstrapTest,
    ::testing::Values(
        InvalidCase{"NotAnObject", "[]", "errors validating bootstrap: [error:is not an object]"},
        InvalidCase{"NoServers", "{}",
                    "errors validating bootstrap: [field:xds_servers error:field not present]"},
        InvalidCase{"EmptyServers", R"({"xds_servers": []})",
                    "errors validating bootstrap: [field:xds_servers error:must be non-empty]"},
        InvalidCase{"ServersNotArray", R"({"xds_servers": {}})",
                    "errors validating bootstrap: [field:xds_servers error:is not an array]"},
        InvalidCase{"ServerNotObject", R"({"xds_servers": [1]})",
                    "errors validating bootstrap: [field:xds_servers[0] error:is not an object]"},
        InvalidCase{"EmptyServerObject", R"({"xds_servers": [)" GOOD_SERVER R"(, {}]})",
                    "errors validating bootstrap: ["
                    "field:xds_servers[1].server_uri error:field not present; "
                    "field:xds_servers[1].channel_creds error:field not present]"},
        InvalidCase{
            "ServerUriNotString",
            R"({"xds_servers": [{"server_uri": 5, "channel_creds": [{"type": "insecure"}]}]})",
            "errors validating bootstrap: "
            "[field:xds_servers[0].server_uri error:is not a string]"},
        InvalidCase{
            "ServerUriEmpty",
            R"({"xds_servers": [{"server_uri": "", "channel_creds": [{"type": "insecure"}]}]})",
            "errors validating bootstrap: "
            "[field:xds_servers[0].server_uri error:must be non-empty]"},
        InvalidCase{
            "ServerUriPortOutOfRange",
            R"({"xds_servers": [{"server_uri": "127.0.0.1:99999", "channel_creds": )"
            R"([{"type": "insecure"}]}, )"
            R"({"server_uri": "[::1]:0", "channel_creds": [{"type": "insecure"}]}, )"
            R"({"server_uri": "dns:///xds.example.com:http", "channel_creds": )"
            R"([{"type": "insecure"}]}]})",
            "errors validating bootstrap: ["
            "field:xds_servers[0].server_uri error:port \"99999\" is not a number from 1 to "
            "65535; "
            "field:xds_servers[1].server_uri error:port \"0\" is not a number from 1 to 65535; "
            "field:xds_servers[2].server_uri error:port \"http\" is not a number from 1 to "
            "65535]"},
        InvalidCase{
            "ServerUriUnsupportedForms",
            R"({"xds_servers": [{"server_uri": "unix:/run/xds.sock", "channel_creds": )"
            R"([{"type": "insecure"}]}, )"
            R"({"server_uri": "dns://8.8.8.8/xds.example.com:443", "channel_creds": )"
            R"([{"type": "insecure"}]}, )"
            R"({"server_uri": "::1:443", "channel_creds": [{"type": "insecure"}]}, )"
            R"({"server_uri": "[::1:443", "channel_creds": [{"type": "insecure"}]}, )"
            R"({"server_uri": ":443", "channel_creds": [{"type": "insecure"}]}]})",
            "errors validating bootstrap: ["
            "field:xds_servers[0].server_uri error:\"unix:\" targets are not supported for xDS "
            "servers (use host:port); "
            "field:xds_servers[1].server_uri error:a DNS server in the target is not supported "
            "(use dns:///host:port); "
            "field:xds_servers[2].server_uri error:an IPv6 address must be in brackets "
            "([::1]:443); "
            "field:xds_servers[3].server_uri error:missing ']' after the IPv6 address; "
            "field:xds_servers[4].server_uri error:the host is empty]"},
        InvalidCase{"ChannelCredsEmpty",
                    R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": []}]})",
                    "errors validating bootstrap: "
                    "[field:xds_servers[0].channel_creds error:no known creds type found]"},
        InvalidCase{"ChannelCredsAllUnsupported",
                    R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": )"
                    R"([{"type": "google_default"}, {"type": "fake"}]}]})",
                    "errors validating bootstrap: "
                    "[field:xds_servers[0].channel_creds error:no known creds type found]"},
        InvalidCase{"ChannelCredsNotArray",
                    R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": "insecure"}]})",
                    "errors validating bootstrap: "
                    "[field:xds_servers[0].channel_creds error:is not an array]"},
        InvalidCase{"ChannelCredsEntryProblems",
                    R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": )"
                    R"([{}, "tls", {"type": 1}, {"type": "tls", "config": []}]}]})",
                    "errors validating bootstrap: ["
                    "field:xds_servers[0].channel_creds[0].type error:field not present; "
                    "field:xds_servers[0].channel_creds[1] error:is not an object; "
                    "field:xds_servers[0].channel_creds[2].type error:is not a string; "
                    "field:xds_servers[0].channel_creds[3].config error:is not an object]"},
        InvalidCase{"UnsupportedCredsConfigNotObject",
                    R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": )"
                    R"([{"type": "fake", "config": 7}, {"type": "insecure"}]}]})",
                    "errors validating bootstrap: "
                    "[field:xds_servers[0].channel_creds[0].config error:is not an object]"},
        InvalidCase{"TlsCertificateWithoutKey",
                    R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": )"
                    R"([{"type": "insecure"}, {"type": "tls", "config": )"
                    R"({"certificate_file": "/c.pem", "ca_certificate_file": 3}}]}]})",
                    "errors validating bootstrap: ["
                    "field:xds_servers[0].channel_creds[1].config.ca_certificate_file "
                    "error:is not a string; "
                    "field:xds_servers[0].channel_creds[1].config error:fields "
                    "\"certificate_file\" and \"private_key_file\" must be both set or both "
                    "unset]"},
        InvalidCase{"ServerFeaturesNotArray",
                    R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": )"
                    R"([{"type": "insecure"}], "server_features": "fail_on_data_errors"}]})",
                    "errors validating bootstrap: "
                    "[field:xds_servers[0].server_features error:is not an array]"},
        InvalidCase{"NodeNotObject", R"({"xds_servers": [)" GOOD_SERVER R"(], "node": "n"})",
                    "errors validating bootstrap: [field:node error:is not an object]"},
        InvalidCase{"NodeFieldTypes",
                    R"({"xds_servers": [)" GOOD_SERVER R"(], "node": {"id": 5, "cluster": [], )"
                    R"("locality": {"region": 1, "zone": "z", "sub_zone": false}, "metadata": 2}})",
                    "errors validating bootstrap: ["
                    "field:node.id error:is not a string; "
                    "field:node.cluster error:is not a string; "
                    "field:node.locality.region error:is not a string; "
                    "field:node.locality.sub_zone error:is not a string; "
                    "field:node.metadata error:is not an object]"},
        InvalidCase{"LocalityNotObject",
                    R"({"xds_servers": [)" GOOD_SERVER R"(], "node": {"locality": "z"}})",
                    "errors validating bootstrap: [field:node.locality error:is not an object]"},
        InvalidCase{"AuthoritiesNotObject",
                    R"({"xds_servers": [)" GOOD_SERVER R"(], "authorities": []})",
                    "errors validating bootstrap: [field:authorities error:is not an object]"},
        InvalidCase{
            "AuthorityProblems",
            R"({"xds_servers": [)" GOOD_SERVER R"(], "authorities": {)"
            R"("a.com": {"client_listener_resource_name_template": "xdstp://b.com/L/%s"},)"
            R"("b.com": 1,)"
            R"("c.com": {"client_listener_resource_name_template": 7, "xds_servers": [{}]},)"
            R"("d.com": {"xds_servers": {}}}})",
            "errors validating bootstrap: ["
            "field:authorities[\"a.com\"].client_listener_resource_name_template "
            "error:field must begin with \"xdstp://a.com/\"; "
            "field:authorities[\"b.com\"] error:is not an object; "
            "field:authorities[\"c.com\"].client_listener_resource_name_template "
            "error:is not a string; "
            "field:authorities[\"c.com\"].xds_servers[0].server_uri "
            "error:field not present; "
            "field:authorities[\"c.com\"].xds_servers[0].channel_creds "
            "error:field not present; "
            "field:authorities[\"d.com\"].xds_servers error:is not an array]"},
        InvalidCase{"TemplatesNotStrings",
                    R"({"xds_servers": [)" GOOD_SERVER R"(], )"
                    R"("client_default_listener_resource_name_template": 5, )"
                    R"("server_listener_resource_name_template": true})",
                    "errors validating bootstrap: ["
                    "field:client_default_listener_resource_name_template error:is not a string; "
                    "field:server_listener_resource_name_template error:is not a string]"},
        InvalidCase{"CertificateProviderProblems",
                    R"({"xds_servers": [)" GOOD_SERVER R"(], "certificate_providers": {)"
                    R"("a": {}, "b": "x", "c": {"plugin_name": "file_watcher", "config": "x"}}})",
                    "errors validating bootstrap: ["
                    "field:certificate_providers[\"a\"].plugin_name error:field not present; "
                    "field:certificate_providers[\"b\"] error:is not an object; "
                    "field:certificate_providers[\"c\"].config error:is not an object]"},
        InvalidCase{"CertificateProvidersNotObject",
                    R"({"xds_servers": [)" GOOD_SERVER R"(], "certificate_providers": 1})",
                    "errors validating bootstrap: "
                    "[field:certificate_providers error:is not an object]"},
        // A29: gRPC's file_watcher rules, checked when the bootstrap loads.
        InvalidCase{
            "FileWatcherConfigProblems",
            R"({"xds_servers": [)" GOOD_SERVER R"(], "certificate_providers": {)"
            R"("unknown": {"plugin_name": "vault"}, )"
            R"("key_alone": {"plugin_name": "file_watcher", )"
            R"(  "config": {"private_key_file": "/k.pem", "ca_certificate_file": "/c"}}, )"
            R"("nothing": {"plugin_name": "file_watcher", "config": {}}, )"
            R"("interval": {"plugin_name": "file_watcher", )"
            R"(  "config": {"ca_certificate_file": "/c", "refresh_interval": "10m"}}, )"
            R"("types": {"plugin_name": "file_watcher", "config": {"certificate_file": 1}}}})",
            "errors validating bootstrap: ["
            "field:certificate_providers[\"interval\"].config.refresh_interval "
            "error:is not a google.protobuf.Duration (e.g. \"600s\"); "
            "field:certificate_providers[\"key_alone\"].config error:fields "
            "\"certificate_file\" and \"private_key_file\" must be both set or both unset; "
            "field:certificate_providers[\"nothing\"].config error:at least one of "
            "\"certificate_file\" and \"ca_certificate_file\" must be specified; "
            "field:certificate_providers[\"types\"].config.certificate_file "
            "error:is not a string; "
            "field:certificate_providers[\"unknown\"].plugin_name error:unrecognized "
            "plugin name \"vault\" (supported: file_watcher)]"},
        // The issue's example: problems in different places, one status.
        InvalidCase{"SeveralProblemsAtOnce",
                    R"({"xds_servers": [{"channel_creds": [{"type": "insecure"}]}], )"
                    R"("node": {"id": 1}})",
                    "errors validating bootstrap: ["
                    "field:xds_servers[0].server_uri error:field not present; "
                    "field:node.id error:is not a string]"},
        InvalidCase{"NotJson", "{\"xds_servers\": ",
                    "not valid JSON: parse error at line 1, column 17: syntax error while "
                    "parsing value - unexpected end of input; expected '[', '{', or a literal"},
        InvalidCase{"EmptyText", "",
                    "not valid JSON: parse error at line 1, column 1: syntax error while "
                    "parsing value - unexpected end of input; expected '[', '{', or a literal"}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return info.param.name; });

#undef GOOD_SERVER

// Sets or unsets an environment variable for one test, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

constexpr const char* kFileServer =
    R"({"xds_servers": [{"server_uri": "from-file:1", "channel_creds": [{"type": "insecure"}]}]})";
constexpr const char* kInlineServer =
    R"({"xds_servers": [{"server_uri": "inline:1", "channel_creds": [{"type": "insecure"}]}]})";

TEST(BootstrapEnvironmentTest, FileVariableWinsOverInlineConfig) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("bootstrap.json"), kFileServer);
  ScopedEnv file("GRPC_XDS_BOOTSTRAP", dir.File("bootstrap.json").c_str());
  ScopedEnv config("GRPC_XDS_BOOTSTRAP_CONFIG", kInlineServer);
  auto bootstrap = Bootstrap::FromEnvironment();
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  EXPECT_EQ(bootstrap->xds_servers.at(0).server_uri, "from-file:1");
}

TEST(BootstrapEnvironmentTest, InlineConfigWhenNoFile) {
  ScopedEnv file("GRPC_XDS_BOOTSTRAP", nullptr);
  ScopedEnv config("GRPC_XDS_BOOTSTRAP_CONFIG", kInlineServer);
  auto bootstrap = Bootstrap::FromEnvironment();
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  EXPECT_EQ(bootstrap->xds_servers.at(0).server_uri, "inline:1");
}

TEST(BootstrapEnvironmentTest, EmptyFileVariableCountsAsUnset) {
  ScopedEnv file("GRPC_XDS_BOOTSTRAP", "");
  ScopedEnv config("GRPC_XDS_BOOTSTRAP_CONFIG", kInlineServer);
  auto bootstrap = Bootstrap::FromEnvironment();
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  EXPECT_EQ(bootstrap->xds_servers.at(0).server_uri, "inline:1");
}

TEST(BootstrapEnvironmentTest, NeitherVariableSet) {
  ScopedEnv file("GRPC_XDS_BOOTSTRAP", nullptr);
  ScopedEnv config("GRPC_XDS_BOOTSTRAP_CONFIG", nullptr);
  auto bootstrap = Bootstrap::FromEnvironment();
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_EQ(bootstrap.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bootstrap.status().message(),
            "no xDS bootstrap: neither GRPC_XDS_BOOTSTRAP nor GRPC_XDS_BOOTSTRAP_CONFIG is set");
}

TEST(BootstrapEnvironmentTest, InvalidInlineConfigNamesTheVariable) {
  ScopedEnv file("GRPC_XDS_BOOTSTRAP", nullptr);
  ScopedEnv config("GRPC_XDS_BOOTSTRAP_CONFIG", R"({"xds_servers": []})");
  auto bootstrap = Bootstrap::FromEnvironment();
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_EQ(bootstrap.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bootstrap.status().message(),
            "bootstrap from GRPC_XDS_BOOTSTRAP_CONFIG: errors validating bootstrap: "
            "[field:xds_servers error:must be non-empty]");
}

TEST(BootstrapFileTest, MissingFileIsNamed) {
  testing::TempDir dir;
  const std::string path = dir.File("absent.json");
  auto bootstrap = Bootstrap::FromFile(path);
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_EQ(bootstrap.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(bootstrap.status().message(),
            "bootstrap file " + path + ": cannot open: No such file or directory (ENOENT)");
}

TEST(BootstrapFileTest, DirectoryIsNamed) {
  testing::TempDir dir;
  auto bootstrap = Bootstrap::FromFile(dir.path());
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_EQ(bootstrap.status().message(),
            "bootstrap file " + dir.path() + ": cannot read: Is a directory (EISDIR)");
}

TEST(BootstrapFileTest, FileThatIsNotJsonIsNamed) {
  testing::TempDir dir;
  const std::string path = dir.File("bootstrap.json");
  testing::WriteFile(path, "xds_servers: []\n");
  auto bootstrap = Bootstrap::FromFile(path);
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_EQ(bootstrap.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bootstrap.status().message(),
            "bootstrap file " + path +
                ": not valid JSON: parse error at line 1, column 1: syntax error while parsing "
                "value - invalid literal; last read: 'x'");
}

TEST(BootstrapFileTest, InvalidFileIsNamed) {
  testing::TempDir dir;
  const std::string path = dir.File("bootstrap.json");
  testing::WriteFile(path, R"({"xds_servers": [{"channel_creds": []}], "node": {"id": 1}})");
  auto bootstrap = Bootstrap::FromFile(path);
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_EQ(bootstrap.status().message(),
            "bootstrap file " + path +
                ": errors validating bootstrap: ["
                "field:xds_servers[0].server_uri error:field not present; "
                "field:xds_servers[0].channel_creds error:no known creds type found; "
                "field:node.id error:is not a string]");
}

TEST(BootstrapFileTest, ValidFileParses) {
  testing::TempDir dir;
  const std::string path = dir.File("bootstrap.json");
  testing::WriteFile(path, FullBootstrap());
  auto from_file = Bootstrap::FromFile(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  auto from_json = Bootstrap::FromJson(FullBootstrap());
  ASSERT_TRUE(from_json.ok());
  EXPECT_EQ(*from_file, *from_json);
}

// A credential file that cannot be used is found when the bootstrap is
// loaded, not at each connection attempt (retried forever with backoff).
TEST(BootstrapFileTest, TlsCredentialFilesMustBeReadable) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("empty.pem"), "");
  testing::WriteFile(dir.File("key.pem"), "-----BEGIN PRIVATE KEY-----\n");
  const std::string json =
      R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "tls", "config": )"
      R"({"ca_certificate_file": ")" +
      dir.File("missing.pem") + R"(", "certificate_file": ")" + dir.File("empty.pem") +
      R"(", "private_key_file": ")" + dir.File("key.pem") +
      R"("}}]}, {"server_uri": "t:1", "channel_creds": [{"type": "tls", "config": )"
      R"({"ca_certificate_file": ")" +
      dir.path() + R"("}}]}]})";
  auto bootstrap = Bootstrap::FromJson(json);
  ASSERT_FALSE(bootstrap.ok());
  EXPECT_EQ(bootstrap.status().message(),
            "errors validating bootstrap: [field:xds_servers[0].channel_creds errors:["
            "ca_certificate_file \"" +
                dir.File("missing.pem") +
                "\" cannot be opened: No such file or directory; certificate_file \"" +
                dir.File("empty.pem") +
                "\" is empty]; field:xds_servers[1].channel_creds error:ca_certificate_file \"" +
                dir.path() + "\" cannot be read: Is a directory]");
}

// A29: the instance an xDS resource names, found in the bootstrap; instances
// of one config share a provider.
TEST(CertificateProviderForTest, InstancesOfOneConfigShareAProvider) {
  auto bootstrap = Bootstrap::FromJson(
      R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}], )"
      R"("certificate_providers": {)"
      R"("a": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/no/ca.pem"}},)"
      R"("b": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/no/ca.pem"}},)"
      R"("c": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/no/c.pem"}}}})");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  auto a = CertificateProviderFor(*bootstrap, "a");
  auto b = CertificateProviderFor(*bootstrap, "b");
  auto c = CertificateProviderFor(*bootstrap, "c");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ((*c)->config().ca_certificate_file, "/no/c.pem");
  EXPECT_EQ((*c)->config().refresh_interval, std::chrono::minutes(10));

  auto missing = CertificateProviderFor(*bootstrap, "d");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "certificate provider instance \"d\" is not in the bootstrap's certificate_providers");
}

// Duration's whole range is accepted; periods beyond a year read as a year,
// so the reading thread's deadline (steady_clock nanoseconds) cannot overflow.
TEST(CertificateProviderForTest, TheLongestDurationsReadAsAYear) {
  auto bootstrap = Bootstrap::FromJson(
      R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}], )"
      R"("certificate_providers": {)"
      R"("max": {"plugin_name": "file_watcher", )"
      R"(  "config": {"ca_certificate_file": "/no/max.pem", "refresh_interval": "315576000000s"}},)"
      R"("decade": {"plugin_name": "file_watcher", )"
      R"(  "config": {"ca_certificate_file": "/no/decade.pem", "refresh_interval": "315360000s"}}}})");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  for (const char* name : {"max", "decade"}) {
    auto provider = CertificateProviderFor(*bootstrap, name);
    ASSERT_TRUE(provider.ok()) << name << ": " << provider.status().ToString();
    EXPECT_EQ((*provider)->config().refresh_interval, std::chrono::hours(24 * 365)) << name;
  }
}

// As gRPC's file watcher: a refresh_interval under a second (zero and
// negative too) reads as a second, said once when the bootstrap loads and
// not again when a provider is looked up or an XdsClient checks it.
TEST(CertificateProviderForTest, IntervalsUnderASecondReadAsASecond) {
  testing::LogCapture logs;
  auto bootstrap = Bootstrap::FromJson(
      R"({"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}], )"
      R"("certificate_providers": {)"
      R"("zero": {"plugin_name": "file_watcher", )"
      R"(  "config": {"ca_certificate_file": "/no/zero.pem", "refresh_interval": "0s"}},)"
      R"("half": {"plugin_name": "file_watcher", )"
      R"(  "config": {"ca_certificate_file": "/no/half.pem", "refresh_interval": "0.5s"}},)"
      R"("negative": {"plugin_name": "file_watcher", )"
      R"(  "config": {"ca_certificate_file": "/no/neg.pem", "refresh_interval": "-3s"}},)"
      R"("second": {"plugin_name": "file_watcher", )"
      R"(  "config": {"ca_certificate_file": "/no/second.pem", "refresh_interval": "1s"}}}})");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
  EXPECT_TRUE(bootstrap->Validate().ok());
  for (const char* name : {"zero", "half", "negative", "second"}) {
    auto provider = CertificateProviderFor(*bootstrap, name);
    ASSERT_TRUE(provider.ok()) << name << ": " << provider.status().ToString();
    EXPECT_EQ((*provider)->config().refresh_interval, std::chrono::seconds(1)) << name;
  }
  EXPECT_EQ(logs.Count("below the minimum of 1s"), 3);
  EXPECT_EQ(logs.Count("certificate_providers[\"half\"].config.refresh_interval \"0.5s\" is "
                       "below the minimum of 1s: the files are read every 1s"),
            1);
}

TEST(CertificateProviderForTest, ABootstrapBuiltInCodeIsCheckedToo) {
  Bootstrap bootstrap;
  XdsServerConfig server;
  server.server_uri = "localhost:1";
  bootstrap.xds_servers.push_back(server);
  bootstrap.certificate_providers["x"] = {"file_watcher", R"({"refresh_interval": "1s"})"};
  bootstrap.certificate_providers["y"] = {"spiffe", "{}"};
  EXPECT_EQ(bootstrap.Validate().message(),
            "errors validating bootstrap: ["
            "field:certificate_providers[\"x\"].config error:at least one of "
            "\"certificate_file\" and \"ca_certificate_file\" must be specified; "
            "field:certificate_providers[\"y\"].plugin_name error:unrecognized plugin name "
            "\"spiffe\" (supported: file_watcher)]");
  auto x = CertificateProviderFor(bootstrap, "x");
  EXPECT_EQ(x.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(x.status().message(),
            "errors validating bootstrap: [field:certificate_providers[\"x\"].config error:at "
            "least one of \"certificate_file\" and \"ca_certificate_file\" must be specified]");
}

// A65: "tls" credentials built in code are held to the bounds the JSON form
// is clamped to: a second to a year.
TEST(CertificateProviderForTest, TlsCredentialsBuiltInCodeReadAtMostYearly) {
  Bootstrap bootstrap;
  XdsServerConfig server;
  server.server_uri = "localhost:1";
  server.channel_credentials.type = XdsChannelCredentials::kTls;
  server.channel_credentials.refresh_interval = std::chrono::hours(24 * 366);
  bootstrap.xds_servers.push_back(server);
  EXPECT_EQ(bootstrap.Validate().message(),
            "errors validating bootstrap: [field:xds_servers[0].channel_creds.refresh_interval "
            "error:must be at most a year]");
  bootstrap.xds_servers[0].channel_credentials.refresh_interval = std::chrono::hours(24 * 365);
  EXPECT_TRUE(bootstrap.Validate().ok()) << bootstrap.Validate().ToString();
  bootstrap.xds_servers[0].channel_credentials.refresh_interval = std::chrono::milliseconds(999);
  EXPECT_EQ(bootstrap.Validate().message(),
            "errors validating bootstrap: [field:xds_servers[0].channel_creds.refresh_interval "
            "error:must be at least 1s]");
  bootstrap.xds_servers[0].channel_credentials.refresh_interval = std::chrono::seconds(1);
  EXPECT_TRUE(bootstrap.Validate().ok()) << bootstrap.Validate().ToString();
}

}  // namespace
}  // namespace uxds
