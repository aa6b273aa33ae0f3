// gRFC A88 "Summary of Behavior Changes": one test per row of the table, each
// run with and without the fail_on_data_errors server feature, against a
// real ADS control plane on loopback. TP3 resource_errors of every code class
// are here too.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

constexpr char kServerPrefix[] = "xDS channel for server ";

class A88TableTest : public XdsClientTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool fail_on_data_errors() const { return GetParam(); }
  void StartClient(XdsClientOptions options = TestOptions()) {
    BootstrapFeatures features;
    features.fail_on_data_errors = GetParam();
    XdsClientTest::StartClient(features, std::move(options));
  }
  // Takes ambient errors until one is OK (the error was cleared).
  ::testing::AssertionResult NextAmbientClearsErrors(ClusterWatcher& watcher) {
    for (;;) {
      auto event = watcher.Next();
      if (!event) return ::testing::AssertionFailure() << "no OnAmbientError(OK)";
      if (event->kind != ClusterWatcher::Event::Kind::kAmbient) {
        return ::testing::AssertionFailure() << "got " << event->ToString();
      }
      if (event->status.ok()) return ::testing::AssertionSuccess();
    }
  }
};

// Row: "xDS channel reports TRANSIENT_FAILURE", resource not cached:
// OnResourceChanged(Status).
TEST_P(A88TableTest, ChannelFailureWithoutCachedResourceIsResourceChanged) {
  ASSERT_TRUE(cp_->StopListening());
  StartClient();
  auto watcher = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kUnavailable,
                          kServerPrefix + cp_->target() + ": connection failed: "));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kRequested);
  // The server comes back: the resource arrives.
  ASSERT_TRUE(cp_->RestartListening());
  WaitForRequest(kClusterTypeUrl, {"c1"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1")});
  for (;;) {  // failed attempts before the restart each reported the error
    auto event = watcher->Next();
    ASSERT_TRUE(event.has_value());
    if (event->kind == ClusterWatcher::Event::Kind::kResource) break;
    EXPECT_EQ(event->kind, ClusterWatcher::Event::Kind::kError) << event->ToString();
  }
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
}

// Row: "xDS channel reports TRANSIENT_FAILURE", resource cached:
// OnAmbientError(Status), the resource stays.
TEST_P(A88TableTest, ChannelFailureWithCachedResourceIsAmbient) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  ASSERT_TRUE(cp_->StopListening());
  ASSERT_TRUE(cp_->DropAllConnections());
  // The stream had a response, so its end is retried silently (A57); the
  // reconnection fails.
  EXPECT_TRUE(NextIsAmbient(*watcher, StatusCode::kUnavailable,
                            kServerPrefix + cp_->target() + ": connection failed: "));
  XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.state, XdsCacheState::kAcked);
  EXPECT_TRUE(entry.has_resource);
  // Back again, the same resource: the ambient error is cleared, nothing else.
  ASSERT_TRUE(cp_->RestartListening());
  WaitForRequest(kClusterTypeUrl, {"c1"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1")});
  EXPECT_TRUE(NextAmbientClearsErrors(*watcher));
  EXPECT_TRUE(NoMoreEvents(*watcher));
}

// Row: "ADS stream failed without reading a response", not cached:
// OnResourceChanged(Status).
TEST_P(A88TableTest, StreamFailureWithoutResponseIsResourceChanged) {
  StartClient();
  auto watcher = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});
  ASSERT_TRUE(cp_->CloseStream(14, "going away"));
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kUnavailable,
                          kServerPrefix + cp_->target() +
                              ": xDS call failed with no responses received; status: "
                              "UNAVAILABLE: going away"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kRequested);
}

// Row: "ADS stream failed without reading a response", cached:
// OnAmbientError(Status). A stream that had a response ends silently.
TEST_P(A88TableTest, StreamFailureWithCachedResourceIsAmbient) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  ASSERT_TRUE(cp_->CloseStream(14, "first"));
  WaitForRequest(kClusterTypeUrl, {"c1"});  // the new stream
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher)) << "a stream that saw a response must end silently";
  ASSERT_TRUE(cp_->CloseStream(14, "second"));
  EXPECT_TRUE(NextIsAmbient(*watcher, StatusCode::kUnavailable,
                            "xDS call failed with no responses received; status: "
                            "UNAVAILABLE: second"));
  EXPECT_TRUE(Entry(kClusterTypeUrl, "c1").has_resource);
}

// Row: "NACK from client", not cached: OnResourceChanged(Status).
TEST_P(A88TableTest, NackWithoutCachedResourceIsResourceChanged) {
  StartClient();
  auto watcher = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("c1", -5)});
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kInvalidArgument,
                          "invalid resource: errors validating Cluster resource: "
                          "[field:connect_timeout error:must be positive]"));
  XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.state, XdsCacheState::kNacked);
  EXPECT_FALSE(entry.has_resource);
}

// Rows: "NACK from client", cached: OnAmbientError (ignored) without
// fail_on_data_errors; OnResourceChanged and the resource dropped with it.
TEST_P(A88TableTest, NackWithCachedResource) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  Respond(kClusterTypeUrl, "2", {ClusterAny("c1", -5)});
  const std::string text = "invalid resource: errors validating Cluster resource";
  XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.state, XdsCacheState::kNacked);
  if (fail_on_data_errors()) {
    EXPECT_TRUE(NextIsError(*watcher, StatusCode::kInvalidArgument, text));
    EXPECT_FALSE(entry.has_resource);
    // The resource comes back (identical to the dropped one): used again.
    Respond(kClusterTypeUrl, "3", {ClusterAny("c1")});
    EXPECT_TRUE(NextIsCluster(*watcher, "c1"));
  } else {
    EXPECT_TRUE(NextIsAmbient(*watcher, StatusCode::kInvalidArgument, text));
    EXPECT_TRUE(entry.has_resource);
    // An identical copy clears the NACK (NOTES "Clearing errors").
    Respond(kClusterTypeUrl, "3", {ClusterAny("c1")});
    EXPECT_TRUE(NextIsAmbient(*watcher, StatusCode::kOk));
  }
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
}

// Row: "Resource timeout", not cached: OnResourceChanged(NOT_FOUND), or
// UNAVAILABLE with resource_timer_is_transient_error (30 s instead of 15 s in
// production; both shortened here).
TEST_P(A88TableTest, ResourceTimeout) {
  XdsClientOptions options = TestOptions();
  options.resource_does_not_exist_timeout = std::chrono::milliseconds(300);
  options.resource_transient_error_timeout = std::chrono::milliseconds(300);
  StartClient(options);
  auto watcher = Watch(TestClusterType::Get(), "c1");
  WaitForRequest(kClusterTypeUrl, {"c1"});  // never answered
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kNotFound, "does not exist"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kDoesNotExist);

  ShutdownClient();
  BootstrapFeatures features;
  features.fail_on_data_errors = GetParam();
  features.resource_timer_is_transient_error = true;
  XdsClientTest::StartClient(features, options);
  auto transient = Watch(TestClusterType::Get(), "c2");
  WaitForRequest(kClusterTypeUrl, {"c2"});
  EXPECT_TRUE(NextIsError(*transient, StatusCode::kUnavailable,
                          "timeout obtaining resource from xDS server " + cp_->target()));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c2").state, XdsCacheState::kTimeout);
}

// Rows: "LDS or CDS resource deletion from server", cached: OnAmbientError
// (ignored) without fail_on_data_errors, OnResourceChanged and dropped with it.
TEST_P(A88TableTest, ClusterDeletion) {
  StartClient();
  auto watcher = WatchAndReceiveCluster("c1");
  Respond(kClusterTypeUrl, "2", {});  // every subscribed CDS resource is in every response
  XdsResourceSnapshot entry = Entry(kClusterTypeUrl, "c1");
  EXPECT_EQ(entry.state, XdsCacheState::kDoesNotExist);
  if (fail_on_data_errors()) {
    EXPECT_TRUE(NextIsError(*watcher, StatusCode::kNotFound, "does not exist"));
    EXPECT_FALSE(entry.has_resource);
  } else {
    EXPECT_TRUE(NextIsAmbient(*watcher, StatusCode::kNotFound, "does not exist"));
    EXPECT_TRUE(entry.has_resource);
    EXPECT_EQ(Metrics().ResourceCount("#old", "envoy.config.cluster.v3.Cluster",
                                      "does_not_exist_but_cached"),
              1u);
  }
  // Absent again: nothing new.
  Respond(kClusterTypeUrl, "3", {});
  EXPECT_TRUE(NoMoreEvents(*watcher));
}

// RDS/EDS responses need not carry every resource: absence is no deletion.
TEST_P(A88TableTest, EndpointsAbsenceIsNoDeletion) {
  StartClient();
  auto watcher = Watch(TestEndpointsType::Get(), "e1");
  WaitForRequest(kEndpointsTypeUrl, {"e1"});
  Respond(kEndpointsTypeUrl, "1", {EndpointsAny("e1")});
  EXPECT_TRUE(NextIsEndpoints(*watcher, "e1"));
  Respond(kEndpointsTypeUrl, "2", {EndpointsAny("other")});
  EXPECT_TRUE(NoMoreEvents(*watcher));
  EXPECT_EQ(Entry(kEndpointsTypeUrl, "e1").state, XdsCacheState::kAcked);
}

struct Tp3Case {
  const char* name;
  StatusCode code;
  bool data_error;  // A88: NOT_FOUND and PERMISSION_DENIED
};
const Tp3Case kTp3Cases[] = {
    {"tp3-not-found", StatusCode::kNotFound, true},
    {"tp3-permission-denied", StatusCode::kPermissionDenied, true},
    {"tp3-unavailable", StatusCode::kUnavailable, false},
    {"tp3-internal", StatusCode::kInternal, false},
    {"tp3-unknown", StatusCode::kUnknown, false},
    {"tp3-deadline", StatusCode::kDeadlineExceeded, false},
};

std::vector<ResourceErrorToSend> Tp3Errors(const std::string& message) {
  std::vector<ResourceErrorToSend> errors;
  for (const Tp3Case& c : kTp3Cases) {
    errors.push_back({c.name, static_cast<int>(c.code), message + " " + c.name});
  }
  return errors;
}

// Rows: "xRFC TP3 error with status NOT_FOUND or PERMISSION_DENIED" and "with
// other status", not cached: OnResourceChanged(status) for every code.
TEST_P(A88TableTest, Tp3ErrorsWithoutCachedResource) {
  StartClient();
  std::vector<std::shared_ptr<ClusterWatcher>> watchers;
  std::vector<std::string> names;
  for (const Tp3Case& c : kTp3Cases) {
    watchers.push_back(Watch(TestClusterType::Get(), c.name));
    names.push_back(c.name);
  }
  WaitForRequest(kClusterTypeUrl, names);
  auto ack = Respond(kClusterTypeUrl, "1", {}, Tp3Errors("server says"));
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->error_detail.has_value()) << "valid resource_errors are ACKed";
  EXPECT_EQ(ack->version_info, "1");
  for (size_t i = 0; i < std::size(kTp3Cases); ++i) {
    SCOPED_TRACE(kTp3Cases[i].name);
    EXPECT_TRUE(NextIsError(*watchers[i], kTp3Cases[i].code,
                            std::string("server says ") + kTp3Cases[i].name));
    XdsResourceSnapshot entry = Entry(kClusterTypeUrl, kTp3Cases[i].name);
    EXPECT_EQ(entry.state, XdsCacheState::kReceivedError);
    EXPECT_FALSE(entry.has_resource);
    EXPECT_EQ(entry.error.code(), kTp3Cases[i].code);
  }
}

// Rows: TP3 errors with a cached resource. Data errors: OnAmbientError
// (ignored) without fail_on_data_errors, OnResourceChanged and dropped with
// it. Other codes: OnAmbientError either way. The error stays until the
// resource or another error arrives, even when later CDS responses leave the
// name out.
TEST_P(A88TableTest, Tp3ErrorsWithCachedResource) {
  StartClient();
  std::vector<std::shared_ptr<ClusterWatcher>> watchers;
  std::vector<std::string> names;
  std::vector<ResponseResource> resources;
  for (const Tp3Case& c : kTp3Cases) {
    watchers.push_back(Watch(TestClusterType::Get(), c.name));
    names.push_back(c.name);
    resources.emplace_back(ClusterAny(c.name));
  }
  WaitForRequest(kClusterTypeUrl, names);
  Respond(kClusterTypeUrl, "1", resources);
  for (size_t i = 0; i < std::size(kTp3Cases); ++i) {
    ASSERT_TRUE(NextIsCluster(*watchers[i], kTp3Cases[i].name));
  }
  Respond(kClusterTypeUrl, "2", {}, Tp3Errors("server says"));
  for (size_t i = 0; i < std::size(kTp3Cases); ++i) {
    const Tp3Case& c = kTp3Cases[i];
    SCOPED_TRACE(c.name);
    const bool dropped = c.data_error && fail_on_data_errors();
    const std::string text = std::string("server says ") + c.name;
    if (dropped) {
      EXPECT_TRUE(NextIsError(*watchers[i], c.code, text));
    } else {
      EXPECT_TRUE(NextIsAmbient(*watchers[i], c.code, text));
    }
    XdsResourceSnapshot entry = Entry(kClusterTypeUrl, c.name);
    EXPECT_EQ(entry.state, XdsCacheState::kReceivedError);
    EXPECT_EQ(entry.has_resource, !dropped);
  }
  // TP3: sent once, remembered; an LDS/CDS response without the names is not
  // a deletion of them.
  Respond(kClusterTypeUrl, "3", {});
  for (size_t i = 0; i < std::size(kTp3Cases); ++i) {
    EXPECT_TRUE(NoMoreEvents(*watchers[i])) << kTp3Cases[i].name;
    EXPECT_EQ(Entry(kClusterTypeUrl, kTp3Cases[i].name).state, XdsCacheState::kReceivedError);
  }
  // The resources come back unchanged: a dropped one is delivered again, a
  // kept one only has its error cleared.
  Respond(kClusterTypeUrl, "4", resources);
  for (size_t i = 0; i < std::size(kTp3Cases); ++i) {
    const Tp3Case& c = kTp3Cases[i];
    SCOPED_TRACE(c.name);
    if (c.data_error && fail_on_data_errors()) {
      EXPECT_TRUE(NextIsCluster(*watchers[i], c.name));
    } else {
      EXPECT_TRUE(NextIsAmbient(*watchers[i], StatusCode::kOk));
    }
    EXPECT_EQ(Entry(kClusterTypeUrl, c.name).state, XdsCacheState::kAcked);
  }
}

// A server failure replaces, for the watchers of an entry without a
// resource, its data error by the channel's UNAVAILABLE (OnResourceChanged).
// Once the server answers again the cache still holds the data error, so the
// watchers are given it again (NOTES "Clearing errors": never leave a watcher
// believing an error stands that the cache no longer holds). One entry per
// state: NACKED, RECEIVED_ERROR, and DOES_NOT_EXIST or TIMEOUT by the timer.
TEST_P(A88TableTest, DataErrorsWithoutResourceAreRestatedWhenTheServerAnswersAgain) {
  XdsClientOptions options = TestOptions();
  options.resource_does_not_exist_timeout = std::chrono::milliseconds(300);
  options.resource_transient_error_timeout = std::chrono::milliseconds(300);
  for (bool timer_is_transient : {false, true}) {
    SCOPED_TRACE(timer_is_transient ? "resource_timer_is_transient_error" : "default timer");
    BootstrapFeatures features;
    features.fail_on_data_errors = fail_on_data_errors();
    features.resource_timer_is_transient_error = timer_is_transient;
    XdsClientTest::StartClient(features, options);
    auto nacked = Watch(TestClusterType::Get(), "nacked");
    auto received_error = Watch(TestClusterType::Get(), "received-error");
    auto timed_out = Watch(TestClusterType::Get(), "timed-out");
    auto valid = Watch(TestClusterType::Get(), "valid");
    WaitForRequest(kClusterTypeUrl, {"nacked", "received-error", "timed-out", "valid"});
    Respond(kClusterTypeUrl, "1", {ClusterAny("nacked", -5), ClusterAny("valid")},
            {{"received-error", 5, "no such cluster"}});
    struct Expected {
      ClusterWatcher& watcher;
      std::string name;
      XdsCacheState state;
      StatusCode code;
      std::string text;
    };
    const std::vector<Expected> expected = {
        {*nacked, "nacked", XdsCacheState::kNacked, StatusCode::kInvalidArgument,
         "invalid resource: errors validating Cluster resource"},
        {*received_error, "received-error", XdsCacheState::kReceivedError, StatusCode::kNotFound,
         "no such cluster"},
        timer_is_transient
            ? Expected{*timed_out, "timed-out", XdsCacheState::kTimeout, StatusCode::kUnavailable,
                       "timeout obtaining resource from xDS server"}
            : Expected{*timed_out, "timed-out", XdsCacheState::kDoesNotExist, StatusCode::kNotFound,
                       "does not exist"},
    };
    EXPECT_TRUE(NextIsCluster(*valid, "valid"));
    for (const Expected& e : expected) EXPECT_TRUE(NextIsError(e.watcher, e.code, e.text));

    // The server fails: every attempt to reconnect is reported.
    ASSERT_TRUE(cp_->StopListening());
    ASSERT_TRUE(cp_->DropAllConnections());
    const std::string channel_error = kServerPrefix + cp_->target() + ": connection failed: ";
    for (const Expected& e : expected) {
      EXPECT_TRUE(NextIsError(e.watcher, StatusCode::kUnavailable, channel_error));
    }
    EXPECT_TRUE(NextIsAmbient(*valid, StatusCode::kUnavailable, channel_error));

    // Back again, with a response that speaks only of "valid".
    ASSERT_TRUE(cp_->RestartListening());
    auto resent =
        WaitForRequest(kClusterTypeUrl, {"nacked", "received-error", "timed-out", "valid"});
    ASSERT_TRUE(resent.has_value());
    ScriptedResponse response;
    response.stream = resent->stream;
    response.type_url = kClusterTypeUrl;
    response.version_info = "2";
    response.resources = {ClusterAny("valid")};
    WaitForAnswerTo(cp_->SendResponse(response));
    for (const Expected& e : expected) {
      SCOPED_TRACE(e.name);
      // Skips further reports of the failed reconnection attempts.
      std::optional<ClusterWatcher::Event> event;
      do {
        event = e.watcher.Next();
      } while (event && event->kind == ClusterWatcher::Event::Kind::kError &&
               event->status.message().find(channel_error) != std::string::npos);
      ASSERT_TRUE(event.has_value()) << "the data error was not given again";
      EXPECT_EQ(event->kind, ClusterWatcher::Event::Kind::kError) << event->ToString();
      EXPECT_EQ(event->status.code(), e.code) << event->ToString();
      EXPECT_NE(event->status.message().find(e.text), std::string::npos) << event->ToString();
      XdsResourceSnapshot entry = Entry(kClusterTypeUrl, e.name);
      EXPECT_EQ(entry.state, e.state);
      EXPECT_NE(entry.error.message().find(e.text), std::string::npos) << entry.error.ToString();
    }
    EXPECT_TRUE(NextAmbientClearsErrors(*valid));
    Flush();
    for (const Expected& e : expected) EXPECT_TRUE(NoMoreEvents(e.watcher));
    ShutdownClient();
  }
}

INSTANTIATE_TEST_SUITE_P(FailOnDataErrors, A88TableTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "fail_on_data_errors" : "default";
                         });

}  // namespace
}  // namespace uxds::testing
