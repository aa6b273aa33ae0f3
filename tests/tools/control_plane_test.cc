// `uxds control-plane`: the built tool serving a temporary directory, driven
// by uxds's own XdsClient and by an independent grpcio ADS client
// (tests/peers/ads_client.py, which checks every response against the SotW
// rules itself: sotw_response_checker.py).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "support/ads_client_peer.h"
#include "support/test_support.h"
#include "tool_run.h"
#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/xds_client.h"
#include "uxds/xds_resources.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

// Generous upper bounds: the CI machine runs sanitizer builds on 2 cores.
constexpr auto kWait = std::chrono::seconds(60);
constexpr char kLds[] = "type.googleapis.com/envoy.config.listener.v3.Listener";
constexpr char kRds[] = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
constexpr char kCds[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
constexpr char kEds[] = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

std::string ListenerJson(const std::string& name, const std::string& route) {
  json hcm = {
      {"@type",
       "type.googleapis.com/"
       "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"},
      {"rds", {{"configSource", {{"ads", json::object()}}}, {"routeConfigName", route}}},
      {"httpFilters",
       {{{"name", "router"},
         {"typedConfig",
          {{"@type", "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}}}}}};
  return json{{"@type", kLds}, {"name", name}, {"apiListener", {{"apiListener", hcm}}}}.dump(2);
}

std::string RouteJson(const std::string& name, const std::string& cluster) {
  return json{{"@type", kRds},
              {"name", name},
              {"virtualHosts",
               {{{"domains", {"*"}},
                 {"routes", {{{"match", {{"prefix", ""}}}, {"route", {{"cluster", cluster}}}}}}}}}}
      .dump(2);
}

std::string ClusterJson(const std::string& name, const std::string& connect_timeout = "5s") {
  return json{{"@type", kCds},
              {"name", name},
              {"type", "EDS"},
              {"connectTimeout", connect_timeout},
              {"edsClusterConfig", {{"edsConfig", {{"ads", json::object()}}}}}}
      .dump(2);
}

std::string EndpointsJson(const std::string& cluster, int port) {
  json endpoint = {
      {"endpoint",
       {{"address", {{"socketAddress", {{"address", "127.0.0.1"}, {"portValue", port}}}}}}}};
  return json{{"@type", kEds},
              {"clusterName", cluster},
              {"endpoints",
               {{{"locality", {{"region", "r1"}}},
                 {"loadBalancingWeight", 1},
                 {"lbEndpoints", {endpoint}}}}}}
      .dump(2);
}

// The tool as a child process, its JSON lines parsed as they come.
class ControlPlaneProcess {
 public:
  // Starts `uxds control-plane --dir DIR --listen 127.0.0.1:0` and waits for
  // its "listening" line (nullptr and a test failure if it does not come).
  // `poll_ms`: how often DIR is checked where inotify cannot watch it.
  static std::unique_ptr<ControlPlaneProcess> Start(const std::string& dir,
                                                    const std::string& poll_ms = "50") {
    auto process = std::unique_ptr<ControlPlaneProcess>(new ControlPlaneProcess(
        Subprocess::Start({UXDS_TOOL_PATH, "control-plane", "--dir", dir, "--listen", "127.0.0.1:0",
                           "--poll-ms", poll_ms})));
    std::optional<json> listening =
        process->WaitFor([](const json& e) { return e["event"] == "listening"; });
    if (!listening.has_value()) {
      ADD_FAILURE() << "no listening line";
      return nullptr;
    }
    EXPECT_EQ(process->events_.size(), 1u) << "listening is the first line";
    process->address_ = (*listening)["address"].get<std::string>();
    return process;
  }

  const std::string& address() const { return address_; }

  // The next line not yet taken for which `match` holds (earlier ones that
  // do not match stay for later calls); nullopt after `timeout` without a
  // line.
  std::optional<json> WaitFor(const std::function<bool(const json&)>& match,
                              std::chrono::milliseconds timeout = kWait) {
    while (true) {
      for (size_t i = taken_.size(); i < events_.size(); ++i) taken_.push_back(false);
      for (size_t i = 0; i < events_.size(); ++i) {
        if (!taken_[i] && match(events_[i])) {
          taken_[i] = true;
          return events_[i];
        }
      }
      std::optional<std::string> line = process_.ReadLine(timeout);
      if (!line.has_value()) return std::nullopt;
      json parsed = json::parse(*line, nullptr, false);
      EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << *line;
      events_.push_back(std::move(parsed));
    }
  }
  std::optional<json> WaitForEvent(const std::string& event) {
    return WaitFor([&](const json& e) { return e["event"] == event; });
  }
  bool WaitForSnapshot(const std::string& version, std::chrono::milliseconds timeout = kWait) {
    return WaitFor(
               [&](const json& e) { return e["event"] == "snapshot" && e["version"] == version; },
               timeout)
        .has_value();
  }
  // Every line read so far.
  const std::vector<json>& events() const { return events_; }

  Subprocess& process() { return process_; }

 private:
  explicit ControlPlaneProcess(Subprocess process) : process_(std::move(process)) {}
  Subprocess process_;
  std::vector<json> events_;
  std::vector<bool> taken_;
  std::string address_;
};

template <typename T>
class IgnoringWatcher : public XdsResourceWatcher<T> {
 public:
  void OnResourceChanged(StatusOr<std::shared_ptr<const T>>) override {}
  void OnAmbientError(Status) override {}
};

// uxds's XdsClient on its own loop thread, watching names on the control
// plane; the test reads the cache entries (state, version, error).
class XdsClientUnderTest {
 public:
  explicit XdsClientUnderTest(const std::string& server_address) {
    auto thread = LoopThread::Start();
    EXPECT_TRUE(thread.ok());
    thread_ = *std::move(thread);
    StatusOr<Bootstrap> bootstrap = Bootstrap::FromJson(json{
        {"xds_servers",
         {{{"server_uri", server_address},
           {"channel_creds", {{{"type", "insecure"}}}},
           {"server_features", {"xds_v3"}}}}},
        {"node", {{"id", "control-plane-test"}}}}.dump());
    EXPECT_TRUE(bootstrap.ok()) << bootstrap.status().ToString();
    thread_->RunSync([&] {
      auto client = XdsClient::Create(thread_->loop(), *std::move(bootstrap));
      EXPECT_TRUE(client.ok()) << client.status().ToString();
      client_ = *std::move(client);
    });
  }
  ~XdsClientUnderTest() {
    thread_->RunSync([&] { XdsClient::ShutdownAndDestroy(std::move(client_)); });
  }

  template <typename T>
  void Watch(const XdsResourceTypeImpl<T>& type, const std::string& name) {
    thread_->RunSync(
        [&] { client_->WatchResource(type, name, std::make_shared<IgnoringWatcher<T>>()); });
  }

  // Polls the cache entry until `done` holds (true) or kWait passes.
  bool WaitForEntry(const XdsResourceType& type, const std::string& name,
                    const std::function<bool(const XdsResourceSnapshot&)>& done,
                    XdsResourceSnapshot* last = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (std::chrono::steady_clock::now() < deadline) {
      std::optional<XdsResourceSnapshot> entry;
      thread_->RunSync([&] { entry = client_->Lookup(type, name); });
      if (entry.has_value()) {
        if (last != nullptr) *last = *entry;
        if (done(*entry)) return true;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

 private:
  std::unique_ptr<LoopThread> thread_;
  std::unique_ptr<XdsClient> client_;
};

bool AckedAt(const XdsResourceSnapshot& entry, const std::string& version) {
  return entry.state == XdsCacheState::kAcked && entry.version == version;
}

class ControlPlaneToolTest : public ::testing::Test {
 protected:
  // Writes DIR/NAME whole (renamed into place, as an editor saves).
  void Put(const std::string& name, const std::string& contents) {
    const std::string temporary = dir_.File("." + name + ".tmp");
    WriteFile(temporary, contents);
    ASSERT_EQ(rename(temporary.c_str(), dir_.File(name).c_str()), 0);
  }
  void Remove(const std::string& name) { ASSERT_EQ(unlink(dir_.File(name).c_str()), 0); }

  void PutAll() {
    Put("listener.json", ListenerJson("listener-a", "route-a"));
    Put("listener-b.json", ListenerJson("listener-b", "route-a"));
    Put("route.json", RouteJson("route-a", "cluster-a"));
    Put("cluster.json", ClusterJson("cluster-a"));
    Put("endpoints.json", EndpointsJson("cluster-a", 8080));
  }

  std::unique_ptr<ControlPlaneProcess> StartControlPlane() {
    auto cp = ControlPlaneProcess::Start(dir_.path());
    if (cp != nullptr) {
      std::optional<json> snapshot = cp->WaitForEvent("snapshot");
      EXPECT_TRUE(snapshot.has_value());
    }
    return cp;
  }

  // A file_error line for DIR/NAME, or a test failure.
  json FileErrorFor(ControlPlaneProcess& cp, const std::string& name) {
    std::optional<json> error = cp.WaitFor(
        [&](const json& e) { return e["event"] == "file_error" && e["path"] == dir_.File(name); });
    EXPECT_TRUE(error.has_value()) << "no file_error for " << name;
    return error.value_or(json::object());
  }

  TempDir dir_;
};

TEST_F(ControlPlaneToolTest, ServesTheDirectoryToXdsClientAndReloadsOnChange) {
  PutAll();
  auto cp = StartControlPlane();
  ASSERT_NE(cp, nullptr);
  EXPECT_EQ(cp->events()[1], (json{{"event", "snapshot"}, {"version", "1"}, {"resources", 5}}));

  XdsClientUnderTest client(cp->address());
  client.Watch(ListenerResourceType::Get(), "listener-a");
  client.Watch(RouteConfigResourceType::Get(), "route-a");
  client.Watch(ClusterResourceType::Get(), "cluster-a");
  client.Watch(EndpointResourceType::Get(), "cluster-a");
  const auto acked_1 = [](const XdsResourceSnapshot& e) { return AckedAt(e, "1"); };
  XdsResourceSnapshot entry;
  EXPECT_TRUE(client.WaitForEntry(ListenerResourceType::Get(), "listener-a", acked_1, &entry))
      << XdsCacheStateName(entry.state) << " " << entry.error.ToString();
  EXPECT_TRUE(client.WaitForEntry(RouteConfigResourceType::Get(), "route-a", acked_1, &entry));
  EXPECT_TRUE(client.WaitForEntry(ClusterResourceType::Get(), "cluster-a", acked_1, &entry));
  EXPECT_TRUE(client.WaitForEntry(EndpointResourceType::Get(), "cluster-a", acked_1, &entry));

  // A changed file: a new snapshot version, pushed to the client.
  Put("cluster.json", ClusterJson("cluster-a", "7s"));
  std::optional<json> reload =
      cp->WaitFor([](const json& e) { return e["event"] == "snapshot" && e["version"] == "2"; });
  ASSERT_TRUE(reload.has_value());
  EXPECT_EQ((*reload)["resources"], 5);
  EXPECT_TRUE(client.WaitForEntry(
      ClusterResourceType::Get(), "cluster-a",
      [](const XdsResourceSnapshot& e) { return AckedAt(e, "2"); }, &entry))
      << XdsCacheStateName(entry.state) << " " << entry.version;

  // Every request was logged: the client ACKed version 2 of the clusters.
  EXPECT_TRUE(cp->WaitFor([](const json& e) {
    return e["event"] == "request" && e["type"] == kCds && e["version"] == "2" &&
           !e.contains("nack");
  }));
}

TEST_F(ControlPlaneToolTest, Tp3ErrorsFromErrorsJsonReachTheXdsClient) {
  PutAll();
  Put("errors.json", json::array({{{"type", kCds},
                                   {"name", "cluster-gone"},
                                   {"code", "NOT_FOUND"},
                                   {"message", "retired on purpose"}}})
                         .dump(2));
  auto cp = StartControlPlane();
  ASSERT_NE(cp, nullptr);
  XdsClientUnderTest client(cp->address());
  client.Watch(ClusterResourceType::Get(), "cluster-gone");
  client.Watch(ClusterResourceType::Get(), "cluster-a");
  XdsResourceSnapshot entry;
  EXPECT_TRUE(client.WaitForEntry(
      ClusterResourceType::Get(), "cluster-gone",
      [](const XdsResourceSnapshot& e) { return e.state == XdsCacheState::kReceivedError; },
      &entry))
      << XdsCacheStateName(entry.state);
  EXPECT_EQ(entry.error.code(), StatusCode::kNotFound);
  EXPECT_NE(entry.error.message().find("retired on purpose"), std::string::npos)
      << entry.error.ToString();
  EXPECT_TRUE(client.WaitForEntry(ClusterResourceType::Get(), "cluster-a",
                                  [](const XdsResourceSnapshot& e) { return AckedAt(e, "1"); }));
}

TEST_F(ControlPlaneToolTest, BadFilesAreReportedWithPathAndLineAndTheLastSnapshotStays) {
  PutAll();
  auto cp = StartControlPlane();
  ASSERT_NE(cp, nullptr);

  // Not JSON: the line of the syntax error.
  Put("broken.json", "{\n  \"@type\": \"" + std::string(kCds) + "\",\n  \"name\": \"x\",\n  ]\n}");
  json error = FileErrorFor(*cp, "broken.json");
  EXPECT_EQ(error["line"], 4);
  EXPECT_NE(error["message"].get<std::string>().find("invalid JSON"), std::string::npos) << error;
  Remove("broken.json");
  ASSERT_TRUE(cp->WaitForSnapshot("2"));  // the same resources

  // An unknown field: the line where its key is.
  Put("unknown-field.json", "{\n  \"@type\": \"" + std::string(kCds) +
                                "\",\n  \"name\": \"x\",\n  \"edsClusterConfig\": {\n"
                                "    \"serviceNameTypo\": \"y\"\n  }\n}");
  error = FileErrorFor(*cp, "unknown-field.json");
  EXPECT_EQ(error["line"], 5);
  EXPECT_NE(error["message"].get<std::string>().find("serviceNameTypo: unknown field"),
            std::string::npos)
      << error;
  Remove("unknown-field.json");
  ASSERT_TRUE(cp->WaitForSnapshot("3"));

  // An unknown @type: the line of "@type".
  Put("unknown-type.json", "{\n  \"name\": \"x\",\n  \"@type\": \"type.googleapis.com/a.B\"\n}");
  error = FileErrorFor(*cp, "unknown-type.json");
  EXPECT_EQ(error["line"], 3);
  EXPECT_NE(error["message"].get<std::string>().find("unknown type"), std::string::npos) << error;
  Remove("unknown-type.json");
  ASSERT_TRUE(cp->WaitForSnapshot("4"));

  // Two resources of one name: the second file, the line of its name.
  const std::string duplicate = ClusterJson("cluster-a", "9s");
  Put("z-duplicate.json", duplicate);
  error = FileErrorFor(*cp, "z-duplicate.json");
  const size_t name_at = duplicate.find("\n  \"name\"");
  ASSERT_NE(name_at, std::string::npos);
  EXPECT_EQ(error["line"], 2 + std::count(duplicate.begin(), duplicate.begin() + name_at, '\n'));
  EXPECT_NE(error["message"].get<std::string>().find("cluster-a"), std::string::npos) << error;
  EXPECT_NE(error["message"].get<std::string>().find(dir_.File("cluster.json")), std::string::npos)
      << error;

  // Meanwhile the last good snapshot (version 4, the 5s cluster) is served.
  XdsClientUnderTest client(cp->address());
  client.Watch(ClusterResourceType::Get(), "cluster-a");
  XdsResourceSnapshot entry;
  EXPECT_TRUE(client.WaitForEntry(
      ClusterResourceType::Get(), "cluster-a",
      [](const XdsResourceSnapshot& e) { return AckedAt(e, "4"); }, &entry))
      << XdsCacheStateName(entry.state) << " " << entry.version;
  Remove("z-duplicate.json");
  EXPECT_TRUE(cp->WaitForSnapshot("5"));
  for (const json& event : cp->events()) {
    if (event["event"] == "snapshot") {
      EXPECT_EQ(event["resources"], 5) << event;
    }
  }
}

TEST_F(ControlPlaneToolTest, BadErrorsJsonIsReportedWithItsLine) {
  PutAll();
  auto cp = StartControlPlane();
  ASSERT_NE(cp, nullptr);
  Put("errors.json", "[\n  {\"type\": \"" + std::string(kCds) +
                         "\",\n   \"name\": \"c\",\n   \"code\": \"NOT_A_CODE\"}\n]");
  json error = FileErrorFor(*cp, "errors.json");
  EXPECT_EQ(error["line"], 4);
  EXPECT_EQ(error["message"], "[0].code: \"NOT_A_CODE\" is not a non-OK gRPC status code name");
  Put("errors.json", "[{\"type\": \"" + std::string(kCds) + "\", \"name\": \"c\",\n \"cod\": 1}]");
  error = FileErrorFor(*cp, "errors.json");
  EXPECT_EQ(error["line"], 2);
  EXPECT_EQ(error["message"], "[0].cod: unknown field");
}

// The grpcio client, with the SotW rules checked on every response.
class ControlPlaneAdsPeerTest : public ControlPlaneToolTest {
 protected:
  void SetUp() override {
    PutAll();
    cp_ = StartControlPlane();
    ASSERT_NE(cp_, nullptr);
    peer_ = AdsClientPeer::Start(cp_->address(), {"--check-sotw-responses"}, kWait);
    ASSERT_NE(peer_, nullptr);
    peer_->Open();
  }
  void TearDown() override {
    // Every event seen so far, violations included, is checked here.
    for (const json& violation : violations_) ADD_FAILURE() << violation;
  }

  void Request(const std::string& type, const std::vector<std::string>& names,
               const std::string& version = "", const std::string& nonce = "",
               const std::string& nack = "") {
    json request = {{"type_url", type},
                    {"resource_names", names},
                    {"version_info", version},
                    {"response_nonce", nonce}};
    if (!nack.empty()) request["error_detail"] = {{"code", 3}, {"message", nack}};
    if (first_request_) request["node"] = {{"id", "grpcio-peer"}};
    first_request_ = false;
    peer_->Request(request);
  }

  // The next response (violations are collected on the way); null on timeout.
  json NextResponse() {
    while (true) {
      json event = peer_->NextEvent();
      if (event.is_null()) return event;
      if (event["event"] == "violation") {
        violations_.push_back(event);
        continue;
      }
      if (event["event"] == "response") {
        EXPECT_EQ(nonces_.count(event["nonce"]), 0u) << "nonce used twice: " << event["nonce"];
        nonces_.insert(event["nonce"]);
        return event;
      }
    }
  }

  std::unique_ptr<ControlPlaneProcess> cp_;
  std::unique_ptr<AdsClientPeer> peer_;
  std::vector<json> violations_;
  std::set<std::string> nonces_;
  bool first_request_ = true;
};

TEST_F(ControlPlaneAdsPeerTest, ListenerResponsesCarryEverySubscribedName) {
  Request(kLds, {"listener-a"});
  json response = NextResponse();
  ASSERT_FALSE(response.is_null());
  EXPECT_EQ(response["type_url"], kLds);
  EXPECT_EQ(response["version_info"], "1");
  EXPECT_EQ(response["resources"].size(), 1u);
  Request(kLds, {"listener-a"}, "1", response["nonce"]);  // ACK

  // A new name: answered with both (LDS responses carry every subscribed one).
  Request(kLds, {"listener-a", "listener-b"}, "1", response["nonce"]);
  response = NextResponse();
  ASSERT_FALSE(response.is_null());
  EXPECT_EQ(response["resources"].size(), 2u);
  Request(kLds, {"listener-a", "listener-b"}, "1", response["nonce"]);

  // A change to one listener: both again, with the new version.
  Put("listener-b.json", ListenerJson("listener-b", "route-b"));
  response = NextResponse();
  ASSERT_FALSE(response.is_null());
  EXPECT_EQ(response["version_info"], "2");
  EXPECT_EQ(response["resources"].size(), 2u);

  // Each request was logged with its names, version and nonce.
  EXPECT_TRUE(cp_->WaitFor([&](const json& e) {
    return e["event"] == "request" && e["type"] == kLds &&
           e["names"] == json::array({"listener-a", "listener-b"}) && e["version"] == "1";
  }));
}

TEST_F(ControlPlaneAdsPeerTest, WildcardClusterRequestGetsEveryCluster) {
  Put("cluster-b.json", ClusterJson("cluster-b"));
  ASSERT_TRUE(cp_->WaitForSnapshot("2"));
  Request(kCds, {});
  json response = NextResponse();
  ASSERT_FALSE(response.is_null());
  EXPECT_EQ(response["type_url"], kCds);
  EXPECT_EQ(response["resources"].size(), 2u);
}

TEST_F(ControlPlaneAdsPeerTest, RoutesAndEndpointsOnlyWhenChanged) {
  Put("endpoints-b.json", EndpointsJson("cluster-b", 9090));
  ASSERT_TRUE(cp_->WaitForSnapshot("2"));
  Request(kEds, {"cluster-a", "cluster-b"});
  json response = NextResponse();
  ASSERT_FALSE(response.is_null());
  EXPECT_EQ(response["resources"].size(), 2u);
  Request(kEds, {"cluster-a", "cluster-b"}, response["version_info"], response["nonce"]);

  // One of the two changes: only it is sent.
  Put("endpoints-b.json", EndpointsJson("cluster-b", 9091));
  response = NextResponse();
  ASSERT_FALSE(response.is_null());
  ASSERT_EQ(response["resources"].size(), 1u);
  EXPECT_EQ(response["version_info"], "3");
  Request(kEds, {"cluster-a", "cluster-b"}, "3", response["nonce"]);

  // An unsubscribed name is dropped: its change sends nothing, while a
  // change to a subscribed one still does.
  Request(kEds, {"cluster-a"}, "3", response["nonce"]);
  ASSERT_TRUE(cp_->WaitFor([](const json& e) {
    return e["event"] == "request" && e["names"] == json::array({"cluster-a"});
  }));
  Put("endpoints-b.json", EndpointsJson("cluster-b", 9092));
  ASSERT_TRUE(cp_->WaitForSnapshot("4"));
  Put("endpoints.json", EndpointsJson("cluster-a", 8081));
  response = NextResponse();
  ASSERT_FALSE(response.is_null());
  EXPECT_EQ(response["version_info"], "5");
  ASSERT_EQ(response["resources"].size(), 1u);
}

TEST_F(ControlPlaneAdsPeerTest, TooManyNamesEndTheStream) {
  std::vector<std::string> names;
  for (int i = 0; i <= 10000; ++i) names.push_back("listener-" + std::to_string(i));
  Request(kLds, names);
  json ended;
  do {
    ended = peer_->NextEvent();
  } while (!ended.is_null() && ended["event"] != "call_ended");
  ASSERT_FALSE(ended.is_null());
  EXPECT_EQ(ended["code"], 8);  // RESOURCE_EXHAUSTED
  EXPECT_NE(ended["details"].get<std::string>().find("more than 10000 names"), std::string::npos)
      << ended;
  // The control plane's log says which stream it ended and why.
  std::optional<json> logged = cp_->WaitForEvent("stream_ended");
  ASSERT_TRUE(logged.has_value());
  EXPECT_EQ((*logged)["code"], "RESOURCE_EXHAUSTED") << *logged;
  EXPECT_NE((*logged)["message"].get<std::string>().find("more than 10000 names"),
            std::string::npos)
      << *logged;
  EXPECT_TRUE((*logged)["peer"].get<std::string>().starts_with("127.0.0.1:")) << *logged;
}

TEST_F(ControlPlaneAdsPeerTest, NackIsLoggedAndNotResent) {
  Request(kCds, {"cluster-a"});
  json response = NextResponse();
  ASSERT_FALSE(response.is_null());
  Request(kCds, {"cluster-a"}, "", response["nonce"], "cluster-a: no thanks");
  std::optional<json> nack = cp_->WaitFor([](const json& e) { return e.contains("nack"); });
  ASSERT_TRUE(nack.has_value());
  EXPECT_EQ((*nack)["nack"], "cluster-a: no thanks");
  EXPECT_EQ((*nack)["type"], kCds);
  EXPECT_EQ((*nack)["nonce"], response["nonce"]);

  // A change to another type only: the NACKed clusters are not sent again;
  // the next response on the call is the endpoints'.
  Request(kEds, {"cluster-a"});
  json endpoints = NextResponse();
  ASSERT_FALSE(endpoints.is_null());
  EXPECT_EQ(endpoints["type_url"], kEds);
  Request(kEds, {"cluster-a"}, "1", endpoints["nonce"]);
  Put("endpoints.json", EndpointsJson("cluster-a", 8082));
  json next = NextResponse();
  ASSERT_FALSE(next.is_null());
  EXPECT_EQ(next["type_url"], kEds) << next;

  // A changed cluster is sent: a new version.
  Put("cluster.json", ClusterJson("cluster-a", "8s"));
  next = NextResponse();
  ASSERT_FALSE(next.is_null());
  EXPECT_EQ(next["type_url"], kCds);
  EXPECT_EQ(next["version_info"], "3");
}

// The rules the grpcio peer checks are checked themselves: each one broken
// on purpose must be reported.
TEST(SotwResponseCheckerTest, ReportsEveryBrokenRule) {
  Subprocess checker_test =
      Subprocess::Start({Python(), SourceRoot() + "/tests/peers/sotw_response_checker_test.py"});
  EXPECT_EQ(checker_test.Wait(kWait), 0);
}

TEST_F(ControlPlaneToolTest, AChangeIsSeenWithoutWaitingForAPoll) {
  // Polled once a minute, the directory is still reloaded at once: inotify
  // tells of each change. (Where inotify cannot watch DIR, only polls do:
  // this test then fails, rightly, as it waits less than a poll.)
  PutAll();
  auto cp = ControlPlaneProcess::Start(dir_.path(), "60000");
  ASSERT_NE(cp, nullptr);
  ASSERT_TRUE(cp->WaitForSnapshot("1"));
  const auto kLessThanAPoll = std::chrono::seconds(30);
  // Renamed into place, written in place, deleted: each one a new snapshot.
  Put("cluster-b.json", ClusterJson("cluster-b"));
  ASSERT_TRUE(cp->WaitForSnapshot("2", kLessThanAPoll));
  WriteFile(dir_.File("cluster-b.json"), ClusterJson("cluster-b", "7s"));
  ASSERT_TRUE(cp->WaitForSnapshot("3", kLessThanAPoll));
  Remove("cluster-b.json");
  std::optional<json> snapshot =
      cp->WaitFor([](const json& e) { return e["event"] == "snapshot" && e["version"] == "4"; },
                  kLessThanAPoll);
  ASSERT_TRUE(snapshot.has_value());
  EXPECT_EQ((*snapshot)["resources"], 5);
}

TEST_F(ControlPlaneToolTest, ADirectoryMovedAwayAndMadeAgainIsServed) {
  // The watch ends with the directory it watched (renamed away here); DIR
  // is then polled, and watched again once it names a directory.
  const std::string served = dir_.File("served");
  ASSERT_EQ(mkdir(served.c_str(), 0700), 0);
  WriteFile(served + "/cluster.json", ClusterJson("cluster-a"));
  auto cp = ControlPlaneProcess::Start(served);
  ASSERT_NE(cp, nullptr);
  ASSERT_TRUE(cp->WaitForSnapshot("1"));
  ASSERT_EQ(rename(served.c_str(), dir_.File("served.old").c_str()), 0);
  ASSERT_EQ(mkdir(served.c_str(), 0700), 0);
  WriteFile(served + "/.c.tmp", ClusterJson("cluster-x"));
  ASSERT_EQ(rename((served + "/.c.tmp").c_str(), (served + "/x.json").c_str()), 0);
  WriteFile(served + "/.c.tmp", ClusterJson("cluster-y"));
  ASSERT_EQ(rename((served + "/.c.tmp").c_str(), (served + "/y.json").c_str()), 0);
  // Served from the new directory: two Clusters (perhaps after a snapshot
  // of only the first).
  std::optional<json> snapshot =
      cp->WaitFor([](const json& e) { return e["event"] == "snapshot" && e["resources"] == 2; });
  ASSERT_TRUE(snapshot.has_value());
  // And changes to it are seen as well.
  ASSERT_EQ(unlink((served + "/x.json").c_str()), 0);
  snapshot =
      cp->WaitFor([](const json& e) { return e["event"] == "snapshot" && e["resources"] == 1; });
  ASSERT_TRUE(snapshot.has_value());
}

TEST_F(ControlPlaneToolTest, ExitCodes) {
  // An unreadable directory and an address that cannot be bound: 1.
  ToolRun run = RunTool(
      UXDS_TOOL_PATH, {"control-plane", "--dir", dir_.File("missing"), "--listen", "127.0.0.1:0"});
  EXPECT_EQ(run.exit_code, 1);
  run = RunTool(UXDS_TOOL_PATH, {"control-plane", "--dir", dir_.path(), "--listen", "192.0.2.1:1"});
  EXPECT_EQ(run.exit_code, 1);
  // Usage errors: 2.
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"control-plane", "--dir", dir_.path()}).exit_code, 2);
  EXPECT_EQ(RunTool(UXDS_TOOL_PATH, {"control-plane", "--dir", dir_.path(), "--listen", "nope"})
                .exit_code,
            2);
  run = RunTool(UXDS_TOOL_PATH, {"help", "control-plane"});
  EXPECT_EQ(run.exit_code, 0);
  ASSERT_FALSE(run.lines.empty());
}

TEST_F(ControlPlaneToolTest, StopsOnSigterm) {
  PutAll();
  auto cp = StartControlPlane();
  ASSERT_NE(cp, nullptr);
  cp->process().Signal(SIGTERM);
  EXPECT_EQ(cp->process().Wait(kWait), 0);
}

}  // namespace
}  // namespace uxds::testing
