// Proves the fake xDS control plane (tests/peers/fake_control_plane.py and
// its C++ driver) against an ADS client that is not ours: a grpcio client
// (tests/peers/ads_client.py). Every XdsClient test trusts what the fake
// reports and sends; this checks that trust, so a broken peer fails here and
// names itself instead of failing XdsClient tests obscurely.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "google/protobuf/any.pb.h"
#include "support/ads_client_peer.h"
#include "support/fake_control_plane.h"
#include "support/test_support.h"

namespace uxds::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr auto kWait = seconds(30);
constexpr char kTypeA[] = "type.googleapis.com/envoy.config.listener.v3.Listener";
constexpr char kTypeB[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr char kWrapperType[] = "type.googleapis.com/envoy.service.discovery.v3.Resource";
constexpr int kUnavailable = 14;
constexpr int kNotFound = 5;

std::string SerializedAny(const std::string& type_url, const std::string& value) {
  google::protobuf::Any any;
  any.set_type_url(type_url);
  any.set_value(value);
  return any.SerializeAsString();
}

using AdsClient = AdsClientPeer;

class FakeControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // These tests send whatever requests exercise the control plane; the
    // protocol checker is tested on its own below.
    FakeControlPlaneOptions options;
    options.fail_on_request_violations = false;
    cp_ = FakeControlPlane::Start(options);
    ASSERT_NE(cp_, nullptr);
    client_ = AdsClient::Start(cp_->target());
    ASSERT_NE(client_, nullptr);
  }

  // Opens a call and returns the stream id the control plane gave it.
  int64_t OpenStream() {
    client_->Open();
    std::optional<int64_t> stream = cp_->WaitForStreamOpened(kWait);
    EXPECT_TRUE(stream.has_value()) << "no stream_opened event";
    return stream.value_or(-1);
  }

  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<AdsClient> client_;
};

TEST(Base64, RoundTripsEveryLength) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode(std::string("\xff\x00\xfe", 3)), "/wD+");
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  for (size_t n = 0; n <= bytes.size(); n += 37) {
    EXPECT_EQ(Base64Decode(Base64Encode(bytes.substr(0, n))), bytes.substr(0, n));
  }
  EXPECT_EQ(Base64Decode("Zg="), std::nullopt);
  EXPECT_EQ(Base64Decode("Z=g="), std::nullopt);
  EXPECT_EQ(Base64Decode("Zm9*"), std::nullopt);
}

TEST_F(FakeControlPlaneTest, RequestsArriveAsEventsWithNodeNamesNonceAndErrorDetail) {
  int64_t stream = OpenStream();
  client_->Request({{"type_url", kTypeA},
                    {"resource_names", {"l1", "l2"}},
                    {"node",
                     {{"id", "node-1"},
                      {"cluster", "cluster-1"},
                      {"user_agent_name", "ads_client"},
                      {"client_features", {"xds.config.resource-in-sotw"}}}}});
  std::optional<ObservedRequest> first = cp_->NextRequest(kWait);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->stream, stream);
  EXPECT_EQ(first->type_url, kTypeA);
  EXPECT_EQ(first->resource_names, (std::vector<std::string>{"l1", "l2"}));
  EXPECT_EQ(first->version_info, "");
  EXPECT_EQ(first->response_nonce, "");
  EXPECT_FALSE(first->error_detail.has_value());
  ASSERT_TRUE(first->node.has_value());
  EXPECT_EQ(first->node->id, "node-1");
  EXPECT_EQ(first->node->cluster, "cluster-1");
  EXPECT_EQ(first->node->user_agent_name, "ads_client");
  EXPECT_EQ(first->node->client_features, std::vector<std::string>{"xds.config.resource-in-sotw"});

  // A NACK without a node, of another type: the type filter skips it and
  // leaves it queued.
  client_->Request({{"type_url", kTypeB},
                    {"resource_names", {"c1"}},
                    {"version_info", "3"},
                    {"response_nonce", "n-7"},
                    {"error_detail", {{"code", 3}, {"message", "bad c1"}}}});
  client_->Request({{"type_url", kTypeA}, {"resource_names", {"l1"}}});
  std::optional<ObservedRequest> a = cp_->NextRequest(kWait, kTypeA);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->resource_names, std::vector<std::string>{"l1"});
  EXPECT_FALSE(a->node.has_value());
  std::optional<ObservedRequest> nack = cp_->NextRequest(kWait);
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ(nack->type_url, kTypeB);
  EXPECT_EQ(nack->version_info, "3");
  EXPECT_EQ(nack->response_nonce, "n-7");
  ASSERT_TRUE(nack->error_detail.has_value());
  EXPECT_EQ(nack->error_detail->code, 3);
  EXPECT_EQ(nack->error_detail->message, "bad c1");
  EXPECT_FALSE(nack->node.has_value());
  EXPECT_EQ(cp_->AllRequests().size(), 3u);
}

TEST_F(FakeControlPlaneTest, ScriptedResponseWithResourceErrorsReachesTheClient) {
  OpenStream();
  std::string l1 = SerializedAny(kTypeA, "listener-one");
  ScriptedResponse response;
  response.type_url = kTypeA;
  response.version_info = "v1";
  response.resources = {l1, ResponseResource("type.googleapis.com/wrong.Type", "xyz")};
  response.resource_errors = {{"l2", kNotFound, "l2 is gone"}};
  response.control_plane_identifier = "fake-cp-1";
  std::string nonce = cp_->SendResponse(response);
  EXPECT_FALSE(nonce.empty());

  json got = client_->NextEvent();
  ASSERT_EQ(got.value("event", ""), "response") << got.dump();
  EXPECT_EQ(got["type_url"], kTypeA);
  EXPECT_EQ(got["version_info"], "v1");
  EXPECT_EQ(got["nonce"], nonce);
  EXPECT_EQ(got["control_plane"], "fake-cp-1");
  ASSERT_EQ(got["resources"].size(), 2u);
  EXPECT_EQ(got["resources"][0]["type_url"], kTypeA);
  EXPECT_EQ(got["resources"][0]["value_b64"], Base64Encode("listener-one"));
  EXPECT_EQ(got["resources"][1]["type_url"], "type.googleapis.com/wrong.Type");
  EXPECT_EQ(got["resources"][1]["value_b64"], Base64Encode("xyz"));
  ASSERT_EQ(got["resource_errors"].size(), 1u);
  EXPECT_EQ(got["resource_errors"][0]["name"], "l2");
  EXPECT_EQ(got["resource_errors"][0]["code"], kNotFound);
  EXPECT_EQ(got["resource_errors"][0]["message"], "l2 is gone");

  // A nonce the test chooses is used as is.
  response.nonce = "my-nonce";
  response.resources.clear();
  response.resource_errors.clear();
  EXPECT_EQ(cp_->SendResponse(response), "my-nonce");
  EXPECT_EQ(client_->NextEvent()["nonce"], "my-nonce");
}

TEST_F(FakeControlPlaneTest, WrappedResourcesCarryTheirNameAndVersion) {
  OpenStream();
  ResponseResource resource(SerializedAny(kTypeA, "inner"));
  resource.wrapper_name = "l1";
  resource.wrapper_version = "7";
  ScriptedResponse response;
  response.type_url = kTypeA;
  response.version_info = "v1";
  response.resources = {resource};
  response.wrap_in_resource = true;
  cp_->SendResponse(response);

  json got = client_->NextEvent();
  ASSERT_EQ(got.value("event", ""), "response") << got.dump();
  ASSERT_EQ(got["resources"].size(), 1u);
  EXPECT_EQ(got["resources"][0]["type_url"], kWrapperType);
  json wrapper = got["resources"][0]["wrapper"];
  EXPECT_EQ(wrapper["name"], "l1");
  EXPECT_EQ(wrapper["version"], "7");
  EXPECT_EQ(wrapper["type_url"], kTypeA);
  EXPECT_EQ(wrapper["value_b64"], Base64Encode("inner"));
}

TEST_F(FakeControlPlaneTest, RawMessageIsNotADiscoveryResponse) {
  OpenStream();
  ASSERT_TRUE(cp_->SendRawMessage("\xff\xff\xff"));
  json got = client_->NextEvent();
  EXPECT_EQ(got.value("undecodable_b64", ""), Base64Encode("\xff\xff\xff")) << got.dump();
}

TEST_F(FakeControlPlaneTest, ServerClosesStreamWithStatus) {
  int64_t stream = OpenStream();
  ASSERT_TRUE(cp_->CloseStream(kUnavailable, "going away"));
  json got = client_->NextEvent();
  EXPECT_EQ(got.value("event", ""), "call_ended") << got.dump();
  EXPECT_EQ(got.value("code", -1), kUnavailable);
  EXPECT_EQ(got.value("details", ""), "going away");
  EXPECT_EQ(cp_->WaitForStreamClosed(kWait), stream);
  EXPECT_TRUE(cp_->OpenStreams().empty());
}

TEST_F(FakeControlPlaneTest, ClientCancelIsAStreamClosedEvent) {
  int64_t stream = OpenStream();
  client_->Command({{"cmd", "cancel"}});
  EXPECT_EQ(cp_->WaitForStreamClosed(kWait, stream), stream);
  bool found = false;
  for (const ObservedEvent& event : cp_->events()) {
    if (event.kind != "stream_closed") continue;
    found = true;
    EXPECT_EQ(json::parse(event.json).value("closed_by", ""), "peer");
  }
  EXPECT_TRUE(found);
}

TEST_F(FakeControlPlaneTest, CommandsPickTheLatestStreamOrTheNamedOne) {
  int64_t first = OpenStream();
  int64_t second = OpenStream();
  EXPECT_NE(first, second);
  EXPECT_EQ(cp_->OpenStreams(), (std::vector<int64_t>{first, second}));

  ScriptedResponse response;
  response.type_url = kTypeA;
  response.version_info = "to-first";
  response.stream = first;
  cp_->SendResponse(response);
  json got = client_->NextEvent();
  EXPECT_EQ(got.value("call", 0), 1);
  EXPECT_EQ(got.value("version_info", ""), "to-first");

  response.version_info = "to-latest";
  response.stream.reset();
  cp_->SendResponse(response);
  got = client_->NextEvent();
  EXPECT_EQ(got.value("call", 0), 2);
  EXPECT_EQ(got.value("version_info", ""), "to-latest");

  ASSERT_TRUE(cp_->CloseAllStreams(kUnavailable, "all"));
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
  EXPECT_TRUE(cp_->WaitForStreamClosed(kWait).has_value());
  // Nothing open: a send is an error the control plane reports.
  std::optional<std::string> reply = cp_->RawCommand(R"({"cmd":"send","type_url":"x"})");
  ASSERT_TRUE(reply.has_value());
  EXPECT_FALSE(json::parse(*reply).value("ok", true)) << *reply;
  reply = cp_->RawCommand(R"({"cmd":"no_such_command"})");
  ASSERT_TRUE(reply.has_value());
  EXPECT_FALSE(json::parse(*reply).value("ok", true)) << *reply;
}

// Automatic answers: every requested name the store has, pushed again when
// the store changes, and no answer to an ACK of what was sent.
TEST_F(FakeControlPlaneTest, StoredResourcesAnswerRequestsAndArePushedOnChange) {
  std::string l1 = SerializedAny(kTypeA, "l1-v1");
  std::string l2 = SerializedAny(kTypeA, "l2-v1");
  ASSERT_TRUE(cp_->SetResources(kTypeA, {{"l1", l1}, {"l2", l2}}, "1",
                                {{"l3", kNotFound, "l3 withdrawn"}}));
  OpenStream();
  client_->Request({{"type_url", kTypeA}, {"resource_names", {"l1", "l3", "l9"}}});
  json first = client_->NextEvent();
  ASSERT_EQ(first.value("event", ""), "response") << first.dump();
  EXPECT_EQ(first["version_info"], "1");
  ASSERT_EQ(first["resources"].size(), 1u);
  EXPECT_EQ(first["resources"][0]["value_b64"], Base64Encode("l1-v1"));
  ASSERT_EQ(first["resource_errors"].size(), 1u);
  EXPECT_EQ(first["resource_errors"][0]["name"], "l3");

  // The ACK is not answered: the next response the client sees is the
  // push caused by the store change below, not a repeat of version 1.
  client_->Request({{"type_url", kTypeA},
                    {"resource_names", {"l1", "l3", "l9"}},
                    {"version_info", "1"},
                    {"response_nonce", first["nonce"]}});
  std::optional<ObservedRequest> ack = cp_->NextRequestMatching(
      kWait, [&](const ObservedRequest& r) { return r.response_nonce == first["nonce"]; });
  ASSERT_TRUE(ack.has_value());
  // The response_sent event precedes the request that ACKs the response.
  bool reported = false;
  for (const ObservedEvent& event : cp_->events()) {
    if (event.kind == "response_sent" && event.nonce == first.value("nonce", "")) {
      reported = true;
      EXPECT_TRUE(event.automatic);
      EXPECT_EQ(event.type_url, kTypeA);
      EXPECT_EQ(event.version_info, "1");
    }
  }
  EXPECT_TRUE(reported) << "no response_sent event for nonce " << first["nonce"];
  ASSERT_TRUE(cp_->SetResources(kTypeA, {{"l1", SerializedAny(kTypeA, "l1-v2")}}, "2"));
  json pushed = client_->NextEvent();
  EXPECT_EQ(pushed.value("version_info", ""), "2") << pushed.dump();
  ASSERT_EQ(pushed["resources"].size(), 1u);
  EXPECT_EQ(pushed["resources"][0]["value_b64"], Base64Encode("l1-v2"));
  EXPECT_TRUE(pushed["resource_errors"].empty());

  // A changed subscription is answered with the whole requested set.
  client_->Request({{"type_url", kTypeA},
                    {"resource_names", {"l1", "l2"}},
                    {"version_info", "2"},
                    {"response_nonce", pushed["nonce"]}});
  json resubscribed = client_->NextEvent();
  EXPECT_EQ(resubscribed.value("version_info", ""), "2") << resubscribed.dump();
  EXPECT_EQ(resubscribed["resources"].size(), 1u);  // l2 is gone from the store

  // Requests of a type without a store are only recorded.
  client_->Request({{"type_url", kTypeB}, {"resource_names", {"c1"}}});
  ASSERT_TRUE(cp_->NextRequest(kWait, kTypeB).has_value());
  ASSERT_TRUE(cp_->ClearResources(kTypeA));
  ScriptedResponse marker;
  marker.type_url = kTypeB;
  marker.version_info = "marker";
  cp_->SendResponse(marker);
  EXPECT_EQ(client_->NextEvent().value("version_info", ""), "marker");
}

TEST_F(FakeControlPlaneTest, IgnoredRequestsAreAnsweredOnlyAfterIgnoringEnds) {
  ASSERT_TRUE(cp_->SetResources(kTypeA, {{"l1", SerializedAny(kTypeA, "l1")}}, "1"));
  ASSERT_TRUE(cp_->IgnoreRequests(true, kTypeA));
  OpenStream();
  client_->Request({{"type_url", kTypeA}, {"resource_names", {"l1"}}});
  ASSERT_TRUE(cp_->NextRequest(kWait, kTypeA).has_value());
  // Had the request been answered, that answer would come before this one.
  ScriptedResponse marker;
  marker.type_url = kTypeB;
  marker.version_info = "marker";
  cp_->SendResponse(marker);
  EXPECT_EQ(client_->NextEvent().value("version_info", ""), "marker");
  ASSERT_TRUE(cp_->DelayResponses(std::chrono::milliseconds(50)));
  ASSERT_TRUE(cp_->IgnoreRequests(false, kTypeA));
  json answer = client_->NextEvent();
  EXPECT_EQ(answer.value("type_url", ""), kTypeA) << answer.dump();
  EXPECT_EQ(answer.value("version_info", ""), "1");
}

// StopListening refuses new connections but keeps established ones;
// DropAllConnections cuts those; RestartListening lets clients back in.
TEST_F(FakeControlPlaneTest, StopListeningDropConnectionsAndRestart) {
  int64_t stream = OpenStream();
  ASSERT_TRUE(cp_->StopListening());
  ScriptedResponse response;
  response.type_url = kTypeA;
  response.version_info = "still-connected";
  cp_->SendResponse(response);
  EXPECT_EQ(client_->NextEvent().value("version_info", ""), "still-connected");

  ASSERT_TRUE(cp_->DropAllConnections());
  json ended = client_->NextEvent();
  EXPECT_EQ(ended.value("event", ""), "call_ended") << ended.dump();
  EXPECT_EQ(ended.value("code", -1), kUnavailable);
  EXPECT_EQ(cp_->WaitForStreamClosed(kWait), stream);

  // Nothing listens: a call that does not wait for the server fails.
  client_->Open(/*wait_for_ready=*/false);
  json refused = client_->NextEvent();
  EXPECT_EQ(refused.value("event", ""), "call_ended") << refused.dump();
  EXPECT_EQ(refused.value("code", -1), kUnavailable);

  ASSERT_TRUE(cp_->RestartListening());
  client_->Open(/*wait_for_ready=*/true);
  std::optional<int64_t> again = cp_->WaitForStreamOpened(kWait);
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(*again, stream);
  client_->Request({{"type_url", kTypeA}, {"resource_names", {"l1"}}});
  std::optional<ObservedRequest> request = cp_->NextRequest(kWait);
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->stream, *again);
}

// Each rule of tests/peers/ads_request_checker.py is reported, and only
// when broken.
TEST_F(FakeControlPlaneTest, RequestsBreakingTheProtocolAreReported) {
  const json node = {{"id", "node-1"}};
  int64_t stream = OpenStream();
  // A correct exchange: no violation.
  client_->Request({{"type_url", kTypeA}, {"resource_names", {"l1"}}, {"node", node}});
  ASSERT_TRUE(cp_->NextRequest(kWait).has_value());
  ScriptedResponse response;
  response.stream = stream;
  response.type_url = kTypeA;
  response.version_info = "v1";
  const std::string nonce = cp_->SendResponse(response);
  ASSERT_EQ(client_->NextEvent().value("nonce", ""), nonce);
  client_->Request({{"type_url", kTypeA},
                    {"resource_names", {"l1", "l2"}},
                    {"version_info", "v1"},
                    {"response_nonce", nonce}});
  // Unsubscribing the last name later is allowed: only a type's first
  // request must name resources.
  client_->Request({{"type_url", kTypeA}, {"version_info", "v1"}, {"response_nonce", nonce}});
  ASSERT_TRUE(cp_->NextRequest(kWait).has_value());
  ASSERT_TRUE(cp_->NextRequest(kWait).has_value());
  EXPECT_EQ(cp_->TakeViolations(), std::vector<std::string>{});

  // Node again, wildcard first request of a type, repeated and empty names,
  // a nonce of another type, a version never sent.
  client_->Request({{"type_url", kTypeB}, {"node", node}});
  client_->Request({{"type_url", kTypeA}, {"resource_names", {"l1", "l1", ""}}});
  client_->Request({{"type_url", kTypeB},
                    {"resource_names", {"c1"}},
                    {"response_nonce", nonce},
                    {"version_info", "v9"}});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cp_->NextRequest(kWait).has_value());
  const std::string b = "stream " + std::to_string(stream) + ", " + kTypeB + ": ";
  const std::string a = "stream " + std::to_string(stream) + ", " + kTypeA + ": ";
  EXPECT_EQ(cp_->TakeViolations(),
            (std::vector<std::string>{
                b + "a node in a request that is not the first of the stream",
                b + "the first request of the type has no resource names (wildcard)",
                a + "an empty resource name",
                a + "repeated resource names ['l1', 'l1', '']",
                b + "response_nonce '" + nonce + "' was not sent for this type on this stream",
                b + "version_info 'v9' was never sent for this type",
            }));

  // A new stream: its first request needs the node, and nonces of the old
  // stream are not echoed.
  int64_t second = OpenStream();
  client_->Request({{"type_url", kTypeA},
                    {"resource_names", {"l1"}},
                    {"version_info", "v1"},
                    {"response_nonce", nonce}});
  ASSERT_TRUE(cp_->NextRequest(kWait).has_value());
  const std::string s2 = "stream " + std::to_string(second) + ", " + kTypeA + ": ";
  EXPECT_EQ(cp_->TakeViolations(),
            (std::vector<std::string>{
                s2 + "the first request of the stream has no node",
                s2 + "response_nonce '" + nonce + "' was not sent for this type on this stream",
            }));
}

TEST(FakeControlPlaneTls, ServesTlsAndMutualTls) {
  TempDir dir;
  TestCertificates certs = MakeTestCertificates(dir.path());
  for (bool mutual : {false, true}) {
    SCOPED_TRACE(mutual ? "mutual TLS" : "TLS");
    FakeControlPlaneOptions options;
    options.fail_on_request_violations = false;
    options.tls_cert_file = certs.server_cert;
    options.tls_key_file = certs.server_key;
    std::vector<std::string> client_args = {"--ca", certs.ca_cert};
    if (mutual) {
      options.client_ca_file = certs.ca_cert;
      client_args.insert(client_args.end(),
                         {"--client-cert", certs.client_cert, "--client-key", certs.client_key});
    }
    std::unique_ptr<FakeControlPlane> cp = FakeControlPlane::Start(options);
    ASSERT_NE(cp, nullptr);
    std::unique_ptr<AdsClient> client = AdsClient::Start(cp->target(), client_args);
    ASSERT_NE(client, nullptr);
    client->Open(/*wait_for_ready=*/true);
    client->Request({{"type_url", kTypeA}, {"resource_names", {"l1"}}});
    std::optional<ObservedRequest> request = cp->NextRequest(kWait);
    ASSERT_TRUE(request.has_value());
    EXPECT_EQ(request->resource_names, std::vector<std::string>{"l1"});
    ScriptedResponse response;
    response.type_url = kTypeA;
    response.version_info = "over-tls";
    cp->SendResponse(response);
    EXPECT_EQ(client->NextEvent().value("version_info", ""), "over-tls");
  }
}

TEST(FakeControlPlaneTls, ClientWithoutCertificateIsRejectedUnderMutualTls) {
  TempDir dir;
  TestCertificates certs = MakeTestCertificates(dir.path());
  FakeControlPlaneOptions options;
  options.tls_cert_file = certs.server_cert;
  options.tls_key_file = certs.server_key;
  options.client_ca_file = certs.ca_cert;
  std::unique_ptr<FakeControlPlane> cp = FakeControlPlane::Start(options);
  ASSERT_NE(cp, nullptr);
  std::unique_ptr<AdsClient> client = AdsClient::Start(cp->target(), {"--ca", certs.ca_cert});
  ASSERT_NE(client, nullptr);
  client->Open(/*wait_for_ready=*/false);
  json ended = client->NextEvent();
  EXPECT_EQ(ended.value("event", ""), "call_ended") << ended.dump();
  EXPECT_EQ(ended.value("code", -1), kUnavailable);
  EXPECT_TRUE(cp->OpenStreams().empty());
}

// The control plane must never outlive its test: it exits as soon as its
// command channel closes, even with a client connected.
TEST(FakeControlPlaneProcess, ExitsWhenItsCommandChannelCloses) {
  std::optional<CommandedSubprocess> peer =
      CommandedSubprocess::Start({Python(), SourceRoot() + "/tests/peers/fake_control_plane.py"});
  ASSERT_TRUE(peer.has_value());
  std::optional<std::string> port = peer->process().WaitForLine("PORT ", kWait);
  ASSERT_TRUE(port.has_value());
  std::unique_ptr<AdsClient> client = AdsClient::Start("127.0.0.1:" + *port);
  ASSERT_NE(client, nullptr);
  client->Open();
  ASSERT_TRUE(peer->process().WaitForLine(R"({"event":"stream_opened")", kWait).has_value());
  peer->CloseCommands();
  while (peer->process().ReadLine(kWait)) {
  }
  EXPECT_EQ(peer->process().Wait(kWait), 0);
  json ended = client->NextEvent();
  EXPECT_EQ(ended.value("event", ""), "call_ended") << ended.dump();
}

}  // namespace
}  // namespace uxds::testing
