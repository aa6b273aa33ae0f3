// nghttp2's own tools as HTTP/2 peers of our server: nghttp for plain
// HTTP/2 requests (what a non-gRPC client sees), h2load for load.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http2/grpc_framing.h"
#include "http2_test_util.h"
#include "support/test_support.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;
using uxds::testing::Subprocess;

class NghttpTest : public Http2Test {
 protected:
  // Runs `argv` while the loop keeps serving; returns its stdout. (Callers
  // pass a named vector: g++ 12 rejects a braced list in a co_await call.)
  Task<std::string> RunTool(std::vector<std::string> argv) {
    Subprocess tool = Subprocess::Start(argv);
    const bool exited = co_await WaitUntil(
        *loop_, [&] { return !tool.running(); }, std::chrono::seconds(60));
    EXPECT_TRUE(exited) << argv[0] << " did not finish";
    EXPECT_EQ(tool.Wait(milliseconds(0)), 0) << argv[0] << " failed";
    std::string out;
    while (std::optional<std::string> line = tool.ReadLine(milliseconds(1000))) {
      out += *line + "\n";
    }
    co_return out;
  }

  std::string Url(const std::string& path) {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + path;
  }

  std::string FramedFile(std::string_view message, bool compressed_flag = false) {
    std::string framed;
    EXPECT_TRUE(AppendGrpcFrame(framed, message).ok());
    if (compressed_flag) framed[0] = 1;
    const std::string path = dir_.File("body" + std::to_string(files_++));
    uxds::testing::WriteFile(path, framed);
    return path;
  }

  uxds::testing::TempDir dir_;
  int files_ = 0;
};

TEST_F(NghttpTest, GrpcRequestGetsResponseAndTrailers) {
  RunWithServer([&]() -> Task<void> {
    const std::vector<std::string> argv = {"nghttp",
                                           "-v",
                                           "-d",
                                           FramedFile("ping"),
                                           "-H",
                                           "content-type: application/grpc",
                                           "-H",
                                           "te: trailers",
                                           Url("/test.Echo/Unary")};
    const std::string out = co_await RunTool(argv);
    EXPECT_NE(out.find(":status: 200"), std::string::npos) << out;
    EXPECT_NE(out.find("content-type: application/grpc"), std::string::npos) << out;
    EXPECT_NE(out.find("grpc-status: 0"), std::string::npos) << out;
    // The echoed message: DATA of 9 bytes (5-byte prefix + "ping").
    EXPECT_NE(out.find("DATA frame <length=9"), std::string::npos) << out;
    EXPECT_EQ(probe_->handlers_started, 1);
  });
}

TEST_F(NghttpTest, NonPostIsRefusedWith405) {
  RunWithServer([&]() -> Task<void> {
    const std::vector<std::string> argv = {"nghttp", "-v", Url("/test.Echo/Unary")};
    const std::string out = co_await RunTool(argv);
    EXPECT_NE(out.find(":status: 405"), std::string::npos) << out;
    EXPECT_NE(out.find("grpc-status: 13"), std::string::npos) << out;
    EXPECT_EQ(probe_->handlers_started, 0);
  });
}

TEST_F(NghttpTest, NonGrpcContentTypeIsRefusedWith415) {
  RunWithServer([&]() -> Task<void> {
    const std::vector<std::string> argv = {"nghttp",
                                           "-v",
                                           "-d",
                                           FramedFile("x"),
                                           "-H",
                                           "content-type: application/json",
                                           Url("/test.Echo/Unary")};
    const std::string out = co_await RunTool(argv);
    EXPECT_NE(out.find(":status: 415"), std::string::npos) << out;
    EXPECT_NE(out.find("grpc-status: 13"), std::string::npos) << out;
    EXPECT_EQ(probe_->handlers_started, 0);
  });
}

TEST_F(NghttpTest, UnknownMethodIsUnimplemented) {
  RunWithServer([&]() -> Task<void> {
    const std::vector<std::string> argv = {"nghttp",
                                           "-v",
                                           "-d",
                                           FramedFile("x"),
                                           "-H",
                                           "content-type: application/grpc",
                                           Url("/no.Such/Method")};
    const std::string out = co_await RunTool(argv);
    EXPECT_NE(out.find(":status: 200"), std::string::npos) << out;
    EXPECT_NE(out.find("grpc-status: 12"), std::string::npos) << out;
  });
}

TEST_F(NghttpTest, CompressedMessageWithoutEncodingIsInternal) {
  RunWithServer([&]() -> Task<void> {
    const std::vector<std::string> argv = {"nghttp",
                                           "-v",
                                           "-d",
                                           FramedFile("abc", /*compressed_flag=*/true),
                                           "-H",
                                           "content-type: application/grpc",
                                           "-H",
                                           "te: trailers",
                                           Url("/test.Echo/Bidi")};
    const std::string out = co_await RunTool(argv);
    EXPECT_NE(out.find("grpc-status: 13"), std::string::npos) << out;
    EXPECT_NE(out.find("grpc-encoding"), std::string::npos) << out;  // in grpc-message
    EXPECT_EQ(probe_->messages_read, 0u);
  });
}

TEST_F(NghttpTest, H2loadUnaryCallsAllSucceed) {
  RunWithServer([&]() -> Task<void> {
    const std::vector<std::string> argv = {"h2load",
                                           "-n",
                                           "2000",
                                           "-c",
                                           "4",
                                           "-m",
                                           "16",
                                           "-d",
                                           FramedFile("load"),
                                           "-H",
                                           "content-type: application/grpc",
                                           "-H",
                                           "te: trailers",
                                           Url("/test.Echo/Unary")};
    const std::string out = co_await RunTool(argv);
    EXPECT_NE(out.find("2000 succeeded"), std::string::npos) << out;
    EXPECT_NE(out.find("2000 2xx"), std::string::npos) << out;
    EXPECT_EQ(probe_->handlers_started, 2000);
  });
}

TEST_F(NghttpTest, ServerEnforcesTheDeadlineItself) {
  // nghttp does not cancel at the deadline: the server must, with
  // RST_STREAM CANCEL (PROTOCOL-HTTP2 "Client Cancellation").
  RunWithServer([&]() -> Task<void> {
    const std::vector<std::string> argv = {"nghttp",
                                           "-v",
                                           "-d",
                                           FramedFile("x"),
                                           "-H",
                                           "content-type: application/grpc",
                                           "-H",
                                           "grpc-timeout: 50m",
                                           Url("/test.Echo/Hold")};
    const std::string out = co_await RunTool(argv);
    EXPECT_NE(out.find("RST_STREAM"), std::string::npos) << out;
    EXPECT_NE(out.find("error_code=CANCEL"), std::string::npos) << out;
    EXPECT_EQ(probe_->handlers_cancelled, 1);
  });
}

TEST_F(NghttpTest, MalformedTimeoutIsRefused) {
  RunWithServer([&]() -> Task<void> {
    const std::vector<std::string> argv = {"nghttp",
                                           "-v",
                                           "-d",
                                           FramedFile("x"),
                                           "-H",
                                           "content-type: application/grpc",
                                           "-H",
                                           "grpc-timeout: 123456789S",
                                           Url("/test.Echo/Unary")};
    const std::string out = co_await RunTool(argv);
    EXPECT_NE(out.find(":status: 400"), std::string::npos) << out;
    EXPECT_NE(out.find("grpc-status: 13"), std::string::npos) << out;
    EXPECT_EQ(probe_->handlers_started, 0);
  });
}

}  // namespace
}  // namespace uxds::http2::testing
