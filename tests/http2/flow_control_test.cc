// Large messages, HTTP/2 flow control and backpressure, receive size limits.
#include <gtest/gtest.h>

#include <string>

#include "http2_test_util.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;

// A message whose bytes depend on `seed` and position, so a reordered or
// truncated transfer cannot compare equal.
std::string Patterned(size_t size, int seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed * 7) >> 3);
  return s;
}

// Waits until `counter` has not moved for a while (the writer is blocked),
// bounded by a generous limit. Returns the value it settled at.
Task<size_t> WaitUntilStalled(Loop& loop, const size_t& counter) {
  size_t last = counter;
  for (int quiet = 0, rounds = 0; quiet < 5 && rounds < 500; ++rounds) {
    const Status slept = co_await SleepFor(loop, milliseconds(20));
    if (!slept.ok()) break;
    if (counter == last) {
      ++quiet;
    } else {
      quiet = 0;
      last = counter;
    }
  }
  co_return counter;
}

TEST_F(Http2Test, SeveralMegabyteMessagesBothWays) {
  ServerOptions server_options;
  server_options.max_receive_message_size = 16 << 20;
  RunWithServer(
      [&]() -> Task<void> {
        ClientConnectionOptions options;
        options.max_receive_message_size = 16 << 20;
        auto conn = co_await Connect(options);
        CO_ASSERT_OK(conn);
        std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Bidi");
        for (int i = 0; i < 3; ++i) {
          const std::string message = Patterned((6 << 20) + i, i);
          const Status written = co_await call->Write(message);
          CO_ASSERT_TRUE(written.ok());
          std::optional<std::string> echoed = co_await call->Read();
          CO_ASSERT_TRUE(echoed.has_value());
          EXPECT_EQ(echoed->size(), message.size());
          EXPECT_TRUE(*echoed == message) << "message " << i << " differs";
        }
        const Status done = co_await call->WritesDone();
        EXPECT_TRUE(done.ok());
        const Status finished = co_await call->Finish();
        EXPECT_TRUE(finished.ok()) << finished.ToString();
        co_await (*conn)->Close();
      },
      server_options);
}

TEST_F(Http2Test, SlowServerReaderPushesBackOnClientWrites) {
  constexpr size_t kMessages = 64;
  constexpr size_t kMessageSize = 64 * 1024;  // 4 MiB in all
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/ReadLater");
    size_t writes_done = 0;
    bool write_pending = false;
    TaskGroup writer(*loop_);
    writer.Spawn([](ClientCall& call, size_t& done, bool& pending) -> Task<void> {
      for (size_t i = 0; i < kMessages; ++i) {
        pending = true;
        const Status written = co_await call.Write(std::string(kMessageSize, 'w'));
        pending = false;
        if (!written.ok()) co_return;
        ++done;
      }
      (void)co_await call.WritesDone();
    }(*call, writes_done, write_pending));

    // The handler has not read anything: the writer must block once the
    // stream window (256 KiB), the unread queue the server credits (256 KiB)
    // and our send buffer (64 KiB) are full — about 10 messages, far from 64.
    const size_t settled = co_await WaitUntilStalled(*loop_, writes_done);
    EXPECT_TRUE(write_pending);
    EXPECT_LE(settled, 16u);
    EXPECT_EQ(probe_->messages_read, 0u);

    // Once the handler reads, everything flows.
    probe_->release.Set();
    co_await writer.Join();
    EXPECT_EQ(writes_done, kMessages);
    std::optional<std::string> reply = co_await call->Read();
    CO_ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(*reply, std::to_string(kMessages * kMessageSize));
    const Status finished = co_await call->Finish();
    EXPECT_TRUE(finished.ok()) << finished.ToString();
    EXPECT_EQ(probe_->bytes_read, kMessages * kMessageSize);
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, SlowClientReaderPushesBackOnServerWrites) {
  constexpr size_t kMessages = 64;
  constexpr size_t kMessageSize = 64 * 1024;
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall(
        "/test.Echo/Flood",
        {{"x-count", std::to_string(kMessages)}, {"x-size", std::to_string(kMessageSize)}});
    const Status done = co_await call->WritesDone();
    CO_ASSERT_TRUE(done.ok());
    const size_t settled = co_await WaitUntilStalled(*loop_, probe_->messages_written);
    EXPECT_LE(settled, 16u);
    EXPECT_EQ(probe_->handlers_finished, 0);

    size_t received = 0;
    while (std::optional<std::string> message = co_await call->Read()) {
      EXPECT_EQ(message->size(), kMessageSize);
      ++received;
    }
    EXPECT_EQ(received, kMessages);
    const Status finished = co_await call->Finish();
    EXPECT_TRUE(finished.ok()) << finished.ToString();
    EXPECT_EQ(probe_->handlers_finished, 1);
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, OversizeResponseFailsOnlyThatCall) {
  RunWithServer([&]() -> Task<void> {
    ClientConnectionOptions options;
    options.max_receive_message_size = 1 << 20;
    auto conn = co_await Connect(options);
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call =
        (*conn)->StartCall("/test.Echo/Large", {{"x-size", std::to_string(2 << 20)}});
    const Status done = co_await call->WritesDone();
    CO_ASSERT_TRUE(done.ok());
    EXPECT_EQ(co_await call->Read(), std::nullopt);
    const Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.ToString();
    // We reset the stream: the server's handler sees its call cancelled.
    EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 1; }));
    // The connection survives; a message at the limit still passes.
    std::unique_ptr<ClientCall> next =
        (*conn)->StartCall("/test.Echo/Large", {{"x-size", std::to_string(1 << 20)}});
    (void)co_await next->WritesDone();
    std::optional<std::string> big = co_await next->Read();
    CO_ASSERT_TRUE(big.has_value());
    EXPECT_EQ(big->size(), size_t{1} << 20);
    const Status next_status = co_await next->Finish();
    EXPECT_TRUE(next_status.ok()) << next_status.ToString();
    EXPECT_TRUE((*conn)->usable());
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, OversizeRequestFailsOnlyThatCall) {
  ServerOptions server_options;
  server_options.max_receive_message_size = 1 << 20;
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect();
        CO_ASSERT_OK(conn);
        StatusOr<std::string> response =
            co_await UnaryCall(**conn, "/test.Echo/Unary", std::string((1 << 20) + 1, 'x'));
        EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted)
            << response.status().ToString();
        EXPECT_NE(response.status().message().find("1048577 vs. 1048576"), std::string::npos)
            << response.status().ToString();
        EXPECT_EQ(probe_->handlers_finished, 0);
        StatusOr<std::string> next =
            co_await UnaryCall(**conn, "/test.Echo/Unary", std::string(1 << 20, 'y'));
        CO_ASSERT_OK(next);
        EXPECT_EQ(next->size(), size_t{1} << 20);
        co_await (*conn)->Close();
      },
      server_options);
}

TEST_F(Http2Test, ManyStreamsShareTheConnectionWithoutStalling) {
  // One stream whose reader never reads must not stop the others: the
  // connection window is returned as soon as bytes arrive.
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> stuck = (*conn)->StartCall(
        "/test.Echo/Flood", {{"x-count", "64"}, {"x-size", std::to_string(64 * 1024)}});
    (void)co_await stuck->WritesDone();
    const size_t settled = co_await WaitUntilStalled(*loop_, probe_->messages_written);
    EXPECT_LE(settled, 16u);
    for (int i = 0; i < 20; ++i) {
      StatusOr<std::string> echoed =
          co_await UnaryCall(**conn, "/test.Echo/Unary", std::string(100 * 1024, 'u'));
      CO_ASSERT_OK(echoed);
      EXPECT_EQ(echoed->size(), 100u * 1024);
    }
    stuck->Cancel();
    co_await (*conn)->Close();
  });
}

}  // namespace
}  // namespace uxds::http2::testing
