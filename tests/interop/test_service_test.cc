// The TestService `uxds serve` and the interop tests serve, called by the
// uxds client over loopback: the response sizes a client may ask for are
// bounded, and a bad one fails the call with a status naming the limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grpc/testing/messages.pb.h"
#include "http2/client_call.h"
#include "http2/client_connection.h"
#include "http2/server.h"
#include "http2_test_util.h"
#include "test_service/test_service.h"
#include "uxds/runtime.h"

namespace uxds {
namespace {

std::string SimpleRequestBytes(int32_t response_size) {
  grpc::testing::SimpleRequest request;
  request.set_response_size(response_size);
  return request.SerializeAsString();
}

std::string StreamingRequestBytes(std::initializer_list<int32_t> sizes) {
  grpc::testing::StreamingOutputCallRequest request;
  for (int32_t size : sizes) request.add_response_parameters()->set_size(size);
  return request.SerializeAsString();
}

class TestServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = *std::move(loop);
    auto registry = std::make_shared<http2::ServiceRegistry>();
    test_service::RegisterTestService(*registry, "test-server");
    auto server = http2::Server::Listen(*loop_, SocketAddress::Loopback4(0), registry);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = *std::move(server);
  }

  // Runs `body` with a connection whose receive limit fits a response of
  // kMaxResponseSize, then shuts the server down.
  void Run(std::function<Task<void>(http2::ClientConnection&)> body) {
    loop_->BlockOn([](Loop& loop, http2::Server& server,
                      std::function<Task<void>(http2::ClientConnection&)> body) -> Task<void> {
      TaskGroup group(loop);
      group.Spawn(server.Serve());
      http2::ClientConnectionOptions options;
      options.max_receive_message_size = 2 * test_service::kMaxResponseSize;
      auto conn = co_await http2::ClientConnection::Connect(
          loop, SocketAddress::Loopback4(server.port()), options);
      EXPECT_TRUE(conn.ok()) << conn.status().ToString();
      if (conn.ok()) {
        co_await body(**conn);
        co_await (*conn)->Close();
      }
      co_await server.Shutdown(std::chrono::milliseconds(100));
      co_await group.Join();
    }(*loop_, *server_, std::move(body)));
  }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<http2::Server> server_;
};

// StreamingOutputCall's responses, read to the end: the status and count.
Task<std::pair<Status, int>> StreamingOutput(http2::ClientConnection& conn, std::string request) {
  std::unique_ptr<http2::ClientCall> call = conn.StartCall(test_service::kStreamingOutputCall);
  const Status written = co_await call->Write(request);
  if (!written.ok()) co_return std::pair{written, 0};
  const Status done = co_await call->WritesDone();
  if (!done.ok()) co_return std::pair{done, 0};
  int responses = 0;
  while (std::optional<std::string> message = co_await call->Read()) ++responses;
  const Status finished = co_await call->Finish();
  co_return std::pair{finished, responses};
}

TEST_F(TestServiceTest, UnaryResponseSizeUpToTheLimitIsServed) {
  Run([](http2::ClientConnection& conn) -> Task<void> {
    const int32_t limit = static_cast<int32_t>(test_service::kMaxResponseSize);
    StatusOr<std::string> reply =
        co_await http2::UnaryCall(conn, test_service::kUnaryCall, SimpleRequestBytes(limit));
    CO_ASSERT_OK(reply);
    grpc::testing::SimpleResponse response;
    EXPECT_TRUE(response.ParseFromString(*reply));
    EXPECT_EQ(response.payload().body().size(), test_service::kMaxResponseSize);
  });
}

TEST_F(TestServiceTest, UnaryResponseSizeOverTheLimitIsResourceExhausted) {
  // (Built outside the coroutine: g++ 12 cannot put an initializer list's
  // array in a coroutine frame.)
  const std::vector<int32_t> sizes = {static_cast<int32_t>(test_service::kMaxResponseSize + 1),
                                      INT32_MAX};
  Run([&](http2::ClientConnection& conn) -> Task<void> {
    for (int32_t size : sizes) {
      StatusOr<std::string> reply =
          co_await http2::UnaryCall(conn, test_service::kUnaryCall, SimpleRequestBytes(size));
      EXPECT_EQ(reply.status().code(), StatusCode::kResourceExhausted) << size;
      EXPECT_NE(reply.status().message().find(std::to_string(test_service::kMaxResponseSize)),
                std::string::npos)
          << reply.status().ToString();
    }
    StatusOr<std::string> negative =
        co_await http2::UnaryCall(conn, test_service::kUnaryCall, SimpleRequestBytes(-1));
    EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument)
        << negative.status().ToString();
    // The connection still serves.
    StatusOr<std::string> small =
        co_await http2::UnaryCall(conn, test_service::kUnaryCall, SimpleRequestBytes(10));
    CO_ASSERT_OK(small);
  });
}

// Every size is checked before the first response: a bad one anywhere in
// the list fails the call with nothing sent. A negative size once made the
// server allocate SIZE_MAX bytes.
TEST_F(TestServiceTest, StreamingResponseSizesAreCheckedFirst) {
  // (Built outside the coroutine: g++ 12 cannot put an initializer list's
  // array in a coroutine frame.)
  const int32_t over = static_cast<int32_t>(test_service::kMaxResponseSize + 1);
  const std::string over_request = StreamingRequestBytes({10, over});
  const std::string negative_request = StreamingRequestBytes({10, -5});
  const std::string good_request = StreamingRequestBytes({10, 20, 30});
  Run([&](http2::ClientConnection& conn) -> Task<void> {
    const std::pair<Status, int> too_large = co_await StreamingOutput(conn, over_request);
    EXPECT_EQ(too_large.first.code(), StatusCode::kResourceExhausted) << too_large.first.ToString();
    EXPECT_EQ(too_large.second, 0);
    const std::pair<Status, int> negative = co_await StreamingOutput(conn, negative_request);
    EXPECT_EQ(negative.first.code(), StatusCode::kInvalidArgument) << negative.first.ToString();
    EXPECT_EQ(negative.second, 0);
    const std::pair<Status, int> good = co_await StreamingOutput(conn, good_request);
    EXPECT_TRUE(good.first.ok()) << good.first.ToString();
    EXPECT_EQ(good.second, 3);
  });
}

}  // namespace
}  // namespace uxds
