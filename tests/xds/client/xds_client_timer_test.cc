// Resource timers (A57, A88) with shortened durations: a timer starts once
// the request naming the resource has been written on a connected stream,
// never for a cached resource, stops when the stream ends, and starts afresh
// with its full duration on the next stream.
//
// Waits that check a timer did NOT fire are several times the timer's
// duration; they can only pass wrongly on a slow machine, never fail wrongly.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "xds_client_test_fixture.h"

namespace uxds::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// An ADS server on nghttp2 (a thread with blocking sockets) that accepts the
// stream but holds the client's request back for `hold` after the
// connection opens: with a stream flow-control window of 0, or with
// MAX_CONCURRENT_STREAMS 0 (the stream cannot even start). Then it opens
// both and records when the request's bytes arrive. It never answers.
class HoldingAdsServer {
 public:
  enum class Hold { kFlowControlWindow, kConcurrentStreams };

  HoldingAdsServer(Hold hold, milliseconds hold_for) : hold_(hold), hold_for_(hold_for) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(listen_fd_, 4) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen: " << std::strerror(errno);
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~HoldingAdsServer() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  bool request_received() const { return request_received_.load(); }

 private:
  void Run() {
    int fd = -1;
    while (!stop_ && fd < 0) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) > 0) fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (fd < 0) return;
    nghttp2_session_callbacks* callbacks;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &OnFrameRecv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &OnDataChunk);
    nghttp2_session* session;
    nghttp2_session_server_new(&session, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    const nghttp2_settings_entry held =
        hold_ == Hold::kFlowControlWindow
            ? nghttp2_settings_entry{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}
            : nghttp2_settings_entry{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 0};
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, &held, 1);
    const Clock::time_point release_at = Clock::now() + hold_for_;
    bool released = false;
    uint8_t buffer[16384];
    while (!stop_) {
      if (!released && Clock::now() >= release_at) {
        released = true;
        const nghttp2_settings_entry open[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 65535},
                                               {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
        nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, open, 2);
      }
      const uint8_t* out;
      for (ssize_t n; (n = nghttp2_session_mem_send(session, &out)) > 0;) {
        if (send(fd, out, static_cast<size_t>(n), MSG_NOSIGNAL) != n) stop_ = true;
      }
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0 || nghttp2_session_mem_recv(session, buffer, static_cast<size_t>(n)) < 0) break;
    }
    nghttp2_session_del(session);
    close(fd);
  }

  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void*) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      // Response headers at once: the stream is up, only the request waits.
      const std::pair<std::string, std::string> fields[] = {{":status", "200"},
                                                            {"content-type", "application/grpc"}};
      nghttp2_nv nva[2];
      for (int i = 0; i < 2; ++i) {
        nva[i] = {reinterpret_cast<uint8_t*>(const_cast<char*>(fields[i].first.data())),
                  reinterpret_cast<uint8_t*>(const_cast<char*>(fields[i].second.data())),
                  fields[i].first.size(), fields[i].second.size(), NGHTTP2_NV_FLAG_NONE};
      }
      nghttp2_submit_headers(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, nullptr, nva, 2,
                             nullptr);
    }
    return 0;
  }
  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t, const uint8_t*, size_t,
                         void* user_data) {
    static_cast<HoldingAdsServer*>(user_data)->request_received_ = true;
    return 0;
  }

  const Hold hold_;
  const milliseconds hold_for_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> request_received_{false};
  std::thread thread_;
};

// Notes, when the resource is reported missing, whether the server had the
// request by then.
class TimerWatcher final : public XdsResourceWatcher<TestClusterResource> {
 public:
  explicit TimerWatcher(const HoldingAdsServer& server) : server_(server) {}
  void OnResourceChanged(StatusOr<std::shared_ptr<const TestClusterResource>> r) override {
    if (r.ok() || r.status().code() != StatusCode::kNotFound || reported_) return;
    reported_ = true;
    server_had_request.set_value(server_.request_received());
  }
  void OnAmbientError(Status) override {}
  std::promise<bool> server_had_request;

 private:
  const HoldingAdsServer& server_;
  bool reported_ = false;
};

class XdsClientTimerTest : public XdsClientTest {
 protected:
  void StartWithTimer(milliseconds timer) {
    XdsClientOptions options = TestOptions();
    options.resource_does_not_exist_timeout = timer;
    options.resource_transient_error_timeout = timer;
    StartClient(BootstrapFeatures{}, options);
  }
};

// A57: while no stream is connected, no timer runs: only the transient
// error reaches the watcher, however long it takes.
TEST_F(XdsClientTimerTest, NoTimerRunsWhileTheServerCannotBeReached) {
  ASSERT_TRUE(cp_->StopListening());
  StartWithTimer(milliseconds(200));
  auto watcher = Watch(TestClusterType::Get(), "c1");
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kUnavailable, "connection failed"));
  std::this_thread::sleep_for(milliseconds(1200));
  Flush();
  for (const auto& event : watcher->TakePending()) {
    EXPECT_EQ(event.status.code(), StatusCode::kUnavailable) << event.ToString();
  }
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kRequested);
  // Once the subscription is sent on a connected stream, the timer runs.
  ASSERT_TRUE(cp_->RestartListening());
  WaitForRequest(kClusterTypeUrl, {"c1"});
  for (;;) {
    auto event = watcher->Next();
    ASSERT_TRUE(event.has_value());
    if (event->status.code() == StatusCode::kNotFound) break;
    EXPECT_EQ(event->status.code(), StatusCode::kUnavailable) << event->ToString();
  }
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kDoesNotExist);
}

// A57: "the client should start the timeout period again when it sends the
// initial subscription for the resource on the reestablished ADS stream".
TEST_F(XdsClientTimerTest, TimerStopsWithTheStreamAndRestartsWithItsFullDuration) {
  const milliseconds timer(1500);
  StartWithTimer(timer);
  auto watcher = Watch(TestClusterType::Get(), "c1");
  auto first = WaitForRequest(kClusterTypeUrl, {"c1"});
  ASSERT_TRUE(first.has_value());
  // Two thirds of the timer pass on the first stream, which then fails.
  std::this_thread::sleep_for(milliseconds(1000));
  ASSERT_TRUE(cp_->CloseStream(14, "restart"));
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kUnavailable, "no responses received"));
  auto second = cp_->NextRequestMatching(
      kWait, [&](const ObservedRequest& r) { return r.stream != first->stream; });
  ASSERT_TRUE(second.has_value());
  const auto second_sent = Clock::now();
  EXPECT_TRUE(NextIsError(*watcher, StatusCode::kNotFound, "does not exist"));
  // Had the first stream's timer kept running it would have fired ~0.5 s
  // after the second request; a fresh one fires 1.5 s after it (the request
  // is written a little before the control plane reports it).
  EXPECT_GE(Clock::now() - second_sent, timer - milliseconds(300));
}

// A57: no timer for a resource already cached when a new stream starts.
TEST_F(XdsClientTimerTest, NoTimerForACachedResourceOnANewStream) {
  StartWithTimer(milliseconds(200));
  auto watcher = WatchAndReceiveCluster("c1");
  ASSERT_TRUE(cp_->CloseStream(0, "rebalance"));
  WaitForRequest(kClusterTypeUrl, {"c1"});  // never answered on this stream
  std::this_thread::sleep_for(milliseconds(1000));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*watcher));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
}

// A88 / NOTES: the timer stops when the resource, an invalid version of it,
// or a TP3 error for it arrives.
TEST_F(XdsClientTimerTest, AnythingReceivedForTheResourceStopsItsTimer) {
  StartWithTimer(milliseconds(400));
  auto valid = Watch(TestClusterType::Get(), "valid");
  auto invalid = Watch(TestClusterType::Get(), "invalid");
  auto error = Watch(TestClusterType::Get(), "error");
  WaitForRequest(kClusterTypeUrl, {"valid", "invalid", "error"});
  Respond(kClusterTypeUrl, "1", {ClusterAny("valid"), ClusterAny("invalid", -1)},
          {{"error", static_cast<int>(StatusCode::kUnavailable), "try later"}});
  EXPECT_TRUE(NextIsCluster(*valid, "valid"));
  EXPECT_TRUE(NextIsError(*invalid, StatusCode::kInvalidArgument, "invalid resource"));
  EXPECT_TRUE(NextIsError(*error, StatusCode::kUnavailable, "try later"));
  std::this_thread::sleep_for(milliseconds(1500));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*valid));
  EXPECT_TRUE(NoMoreEvents(*invalid));
  EXPECT_TRUE(NoMoreEvents(*error));
  EXPECT_EQ(Entry(kClusterTypeUrl, "valid").state, XdsCacheState::kAcked);
  EXPECT_EQ(Entry(kClusterTypeUrl, "invalid").state, XdsCacheState::kNacked);
  EXPECT_EQ(Entry(kClusterTypeUrl, "error").state, XdsCacheState::kReceivedError);
}

// A resource subscribed later on a running stream gets its own timer; once
// it fired, a new stream does not fire it again.
TEST_F(XdsClientTimerTest, ALaterSubscriptionGetsItsOwnTimer) {
  StartWithTimer(milliseconds(300));
  auto c1 = WatchAndReceiveCluster("c1");
  auto c2 = Watch(TestClusterType::Get(), "c2");
  WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  EXPECT_TRUE(NextIsError(*c2, StatusCode::kNotFound, "does not exist"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c2").state, XdsCacheState::kDoesNotExist);
  EXPECT_EQ(Entry(kClusterTypeUrl, "c1").state, XdsCacheState::kAcked);
  ASSERT_TRUE(cp_->CloseStream(0, "rebalance"));
  WaitForRequest(kClusterTypeUrl, {"c1", "c2"});
  std::this_thread::sleep_for(milliseconds(1000));
  Flush();
  EXPECT_TRUE(NoMoreEvents(*c1));
  EXPECT_TRUE(NoMoreEvents(*c2));
  // The resource may still appear.
  Respond(kClusterTypeUrl, "2", {ClusterAny("c1"), ClusterAny("c2")});
  EXPECT_TRUE(NextIsCluster(*c2, "c2"));
  EXPECT_EQ(Entry(kClusterTypeUrl, "c2").state, XdsCacheState::kAcked);
}

// A57 starts a resource's timer when the request naming it is sent. Bytes
// buffered behind a closed flow-control window, or for a stream the server
// does not admit yet, are not sent: the timer (300 ms) must not run while
// the server holds the request back (1 s), so the resource is reported
// missing only after the server got the request.
class XdsClientRequestOnTheWireTest : public XdsClientTest,
                                      public ::testing::WithParamInterface<HoldingAdsServer::Hold> {
};

TEST_P(XdsClientRequestOnTheWireTest, TheTimerStartsOnlyOnceTheRequestIsSent) {
  HoldingAdsServer server(GetParam(), milliseconds(1000));
  XdsClientOptions options = TestOptions();
  options.resource_does_not_exist_timeout = milliseconds(300);
  StartClient(MakeBootstrap(server.target()), options);
  auto watcher = std::make_shared<TimerWatcher>(server);
  std::future<bool> had_request = watcher->server_had_request.get_future();
  loop_->RunSync([&] { client_->WatchResource(TestClusterType::Get(), "c1", watcher); });
  ASSERT_EQ(had_request.wait_for(kWait), std::future_status::ready);
  EXPECT_TRUE(had_request.get());
  ShutdownClient();
}

INSTANTIATE_TEST_SUITE_P(Holds, XdsClientRequestOnTheWireTest,
                         ::testing::Values(HoldingAdsServer::Hold::kFlowControlWindow,
                                           HoldingAdsServer::Hold::kConcurrentStreams),
                         [](const auto& info) {
                           return info.param == HoldingAdsServer::Hold::kFlowControlWindow
                                      ? std::string("FlowControlWindow")
                                      : std::string("ConcurrentStreams");
                         });

}  // namespace
}  // namespace uxds::testing
