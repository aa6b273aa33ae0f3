// Our gRPC client against our gRPC server over loopback: calls, metadata,
// status and the request checks a gRPC server makes.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <string>
#include <vector>

#include "http2_test_util.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(Http2Test, UnaryCallEchoes) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    StatusOr<std::string> response = co_await UnaryCall(**conn, "/test.Echo/Unary", "hello");
    CO_ASSERT_OK(response);
    EXPECT_EQ(*response, "hello");
    // Empty messages are messages too.
    StatusOr<std::string> empty = co_await UnaryCall(**conn, "/test.Echo/Unary", "");
    CO_ASSERT_OK(empty);
    EXPECT_EQ(*empty, "");
    EXPECT_EQ(probe_->last_authority, server_address().ToString());
    const std::string* user_agent = FindMetadata(probe_->last_request_metadata, "user-agent");
    CO_ASSERT_TRUE(user_agent != nullptr);
    EXPECT_NE(user_agent->find("grpc-c++-uxds/"), std::string::npos) << *user_agent;
    co_await (*conn)->Close();
    EXPECT_TRUE((*conn)->closed());
    EXPECT_EQ((*conn)->close_status().code(), StatusCode::kUnavailable);
  });
}

// A handler writing a message the gRPC frame cannot carry (over 4 GiB)
// gets RESOURCE_EXHAUSTED from Write(), and the call ends with it. The
// message is a reserved, never touched mapping.
TEST_F(Http2Test, WriteOfAMessageOverFourGibibytesFailsTheCall) {
  const size_t size = kMaxGrpcFrameMessageSize + 1;
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  Status write_status;
  registry_->Register("/test.Huge/Write", [&](ServerCall& call) -> Task<Status> {
    write_status = co_await call.Write(std::string_view(static_cast<char*>(mapped), size));
    co_return write_status;
  });
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    StatusOr<std::string> reply = co_await UnaryCall(**conn, "/test.Huge/Write", "");
    EXPECT_EQ(reply.status().code(), StatusCode::kResourceExhausted) << reply.status().ToString();
    EXPECT_NE(reply.status().message().find("gRPC frame limit"), std::string::npos)
        << reply.status().ToString();
    // The connection is still good.
    StatusOr<std::string> echoed = co_await UnaryCall(**conn, "/test.Echo/Unary", "after");
    CO_ASSERT_OK(echoed);
    co_await (*conn)->Close();
  });
  EXPECT_EQ(write_status.code(), StatusCode::kResourceExhausted);
  munmap(mapped, size);
}

TEST_F(Http2Test, BidiStreamingPingPong) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Bidi");
    for (int i = 0; i < 100; ++i) {
      const std::string message = "message " + std::to_string(i);
      CO_ASSERT_TRUE((co_await call->Write(message)).ok());
      std::optional<std::string> echoed = co_await call->Read();
      CO_ASSERT_TRUE(echoed.has_value());
      EXPECT_EQ(*echoed, message);
    }
    CO_ASSERT_TRUE((co_await call->WritesDone()).ok());
    EXPECT_FALSE((co_await call->Read()).has_value());
    EXPECT_TRUE((co_await call->Finish()).ok());
    EXPECT_EQ(probe_->messages_read, 100u);
    EXPECT_EQ(probe_->handlers_finished, 1);
    // A finished call refuses writes.
    EXPECT_FALSE((co_await call->Write("late")).ok());
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, ManyConcurrentCallsOnOneConnection) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::vector<std::unique_ptr<ClientCall>> calls;
    for (int i = 0; i < 64; ++i) {
      calls.push_back((*conn)->StartCall("/test.Echo/Bidi"));
      CO_ASSERT_TRUE((co_await calls.back()->Write("call " + std::to_string(i))).ok());
    }
    for (int i = 0; i < 64; ++i) {
      CO_ASSERT_TRUE((co_await calls[i]->WritesDone()).ok());
      std::optional<std::string> echoed = co_await calls[i]->Read();
      CO_ASSERT_TRUE(echoed.has_value());
      EXPECT_EQ(*echoed, "call " + std::to_string(i));
      EXPECT_TRUE((co_await calls[i]->Finish()).ok());
    }
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, ServerStreamThenErrorStatus) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/FailAfter");
    CO_ASSERT_TRUE((co_await call->WritesDone()).ok());
    EXPECT_EQ(co_await call->Read(), std::optional<std::string>("one"));
    EXPECT_EQ(co_await call->Read(), std::optional<std::string>("two"));
    EXPECT_EQ(co_await call->Read(), std::nullopt);
    Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kAborted);
    EXPECT_EQ(status.message(), "failed after two messages");
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, TrailersOnlyResponseCarriesStatusAndMetadata) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call =
        (*conn)->StartCall("/test.Echo/Status", {{"x-code", "5"}, {"x-message", "no such thing"}});
    CO_ASSERT_TRUE((co_await call->WritesDone()).ok());
    const Status headers = co_await call->ReadInitialMetadata();
    EXPECT_EQ(headers.code(), StatusCode::kNotFound);
    EXPECT_EQ(co_await call->Read(), std::nullopt);
    Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kNotFound);
    EXPECT_EQ(status.message(), "no such thing");
    // Trailers-Only: no response headers, the metadata comes with the status.
    EXPECT_TRUE(call->initial_metadata().empty());
    const std::string* trailer = FindMetadata(call->trailing_metadata(), "x-trailer");
    CO_ASSERT_TRUE(trailer != nullptr);
    EXPECT_EQ(*trailer, "present");
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, StatusMessagePercentEncodingRoundTripsNonAscii) {
  // The interop test "special_status_message".
  const std::string message =
      "\t\ntest with whitespace\r\nand Unicode BMP \xe2\x98\xba and non-BMP \xf0\x9f\x98\x88\t\n"
      "and 100% percent";
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    // Request metadata must be ASCII, so the message travels as -bin; the
    // handler returns it as the status message, which is percent-encoded.
    std::unique_ptr<ClientCall> call =
        (*conn)->StartCall("/test.Echo/Status", {{"x-code", "2"}, {"x-message-bin", message}});
    EXPECT_EQ(call->status().code(), StatusCode::kOk);
    (void)co_await call->WritesDone();
    Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kUnknown);
    EXPECT_EQ(status.message(), message);
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, UnknownMethodIsUnimplemented) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    StatusOr<std::string> response = co_await UnaryCall(**conn, "/test.Echo/Nope", "x");
    EXPECT_EQ(response.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(response.status().message().find("/test.Echo/Nope"), std::string::npos);
    StatusOr<std::string> service = co_await UnaryCall(**conn, "/no.Such/Service", "x");
    EXPECT_EQ(service.status().code(), StatusCode::kUnimplemented);
    // The connection is fine afterwards.
    EXPECT_TRUE((co_await UnaryCall(**conn, "/test.Echo/Unary", "after")).ok());
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, MetadataRoundTripsAsciiAndBinary) {
  const std::string binary("\x00\x01\xfe\xff,\x80", 6);
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall(
        "/test.Echo/Metadata", {{"x-echo-initial", "test_initial_metadata_value"},
                                {"x-echo-trailing-bin", binary},
                                {"x-other", "  padded value  "}});
    const Status headers = co_await call->ReadInitialMetadata();
    EXPECT_TRUE(headers.ok()) << headers.ToString();
    CO_ASSERT_TRUE(FindMetadata(call->initial_metadata(), "x-echo-initial") != nullptr);
    CO_ASSERT_TRUE((co_await call->Write("req")).ok());
    CO_ASSERT_TRUE((co_await call->WritesDone()).ok());
    EXPECT_EQ(co_await call->Read(), std::optional<std::string>("ok"));
    EXPECT_TRUE((co_await call->Finish()).ok());
    const std::string* initial = FindMetadata(call->initial_metadata(), "x-echo-initial");
    CO_ASSERT_TRUE(initial != nullptr);
    EXPECT_EQ(*initial, "test_initial_metadata_value");
    const std::string* trailing = FindMetadata(call->trailing_metadata(), "x-echo-trailing-bin");
    CO_ASSERT_TRUE(trailing != nullptr);
    EXPECT_EQ(*trailing, binary);
    const std::string* received_bin =
        FindMetadata(probe_->last_request_metadata, "x-echo-trailing-bin");
    CO_ASSERT_TRUE(received_bin != nullptr);
    EXPECT_EQ(*received_bin, binary);
    // Transport headers never show up as metadata.
    EXPECT_EQ(FindMetadata(probe_->last_request_metadata, "content-type"), nullptr);
    EXPECT_EQ(FindMetadata(probe_->last_request_metadata, "te"), nullptr);
    EXPECT_EQ(FindMetadata(call->initial_metadata(), "content-type"), nullptr);
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, InvalidMetadataFailsTheCallLocally) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> bad_key = (*conn)->StartCall("/test.Echo/Unary", {{"Bad", "v"}});
    EXPECT_TRUE(bad_key->finished());
    EXPECT_EQ((co_await bad_key->Finish()).code(), StatusCode::kInternal);
    std::unique_ptr<ClientCall> reserved =
        (*conn)->StartCall("/test.Echo/Unary", {{"grpc-timeout", "1S"}});
    EXPECT_EQ((co_await reserved->Finish()).code(), StatusCode::kInternal);
    EXPECT_EQ(probe_->handlers_started, 0);
    EXPECT_TRUE((*conn)->usable());
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, ServerSeesTheDeadline) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    const auto deadline = Loop::Clock::now() + std::chrono::seconds(30);
    CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "x", {}, deadline));
    CO_ASSERT_TRUE(probe_->last_deadline.has_value());
    // grpc-timeout rounds up, and the server measures from a bit later.
    EXPECT_GE(*probe_->last_deadline, deadline);
    EXPECT_LT(*probe_->last_deadline, deadline + std::chrono::seconds(5));
    CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "x"));
    EXPECT_FALSE(probe_->last_deadline.has_value());
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, ConnectionRefusedIsUnavailable) {
  RunWithServer([&]() -> Task<void> {
    // A port nobody listens on: bind one, then close it.
    auto listener = TcpListener::Bind(*loop_, SocketAddress::Loopback4(0));
    CO_ASSERT_OK(listener);
    const SocketAddress address = (*listener)->local_address();
    (*listener)->Close();
    listener->reset();
    auto conn = co_await ClientConnection::Connect(*loop_, address, {});
    EXPECT_EQ(conn.status().code(), StatusCode::kUnavailable) << conn.status().ToString();
  });
}

TEST_F(Http2Test, ClosingTheConnectionFailsOpenCallsUnavailable) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Hold");
    CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));
    co_await (*conn)->Close();
    EXPECT_EQ((co_await call->Finish()).code(), StatusCode::kUnavailable);
    // The server notices the connection is gone and cancels the handler.
    EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 1; }));
    // New calls on a closed connection fail at once.
    std::unique_ptr<ClientCall> late = (*conn)->StartCall("/test.Echo/Unary");
    EXPECT_TRUE(late->finished());
    EXPECT_EQ(late->status().code(), StatusCode::kUnavailable);
  });
}

TEST_F(Http2Test, ServerFinishingEarlyEndsTheClientsStream) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    // The handler returns without reading while we keep writing: trailers,
    // then RST_STREAM NO_ERROR (PROTOCOL-HTTP2 "Early Server Closure").
    std::unique_ptr<ClientCall> call =
        (*conn)->StartCall("/test.Echo/Status", {{"x-code", "9"}, {"x-message", "stop sending"}});
    const Status first = co_await call->Write("one");
    EXPECT_TRUE(first.ok());
    const Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(status.message(), "stop sending");
    const Status late = co_await call->Write("two");
    EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);
    CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "next"));
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, UnaryCallWithoutResponseMessageIsInternal) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    const Metadata ok_without_message = {{"x-code", "0"}};
    StatusOr<std::string> response =
        co_await UnaryCall(**conn, "/test.Echo/Status", "x", ok_without_message);
    EXPECT_EQ(response.status().code(), StatusCode::kInternal) << response.status().ToString();
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, OversizeRequestMetadataIsRefused) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    const Metadata huge = {{"x-huge", std::string(20000, 'h')}};
    StatusOr<std::string> response = co_await UnaryCall(**conn, "/test.Echo/Unary", "x", huge);
    EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted)
        << response.status().ToString();
    EXPECT_EQ(probe_->handlers_started, 0);
    CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "small"));
    co_await (*conn)->Close();
  });
}

TEST_F(Http2Test, DestroyingAnOpenConnectionClosesItInTheBackground) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    std::unique_ptr<ClientCall> call = (*conn)->StartCall("/test.Echo/Hold");
    CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));
    conn->reset();  // no Close(): the loop joins the connection's tasks
    const Status status = co_await call->Finish();
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_cancelled == 1; }));
  });
}

TEST_F(Http2Test, CallsDestroyedBeforeTheirHeadersGoOutAreHarmless) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    // Started and dropped within one loop turn: the HEADERS are still queued
    // in nghttp2 when the call (nghttp2's stream user data) goes away.
    for (int i = 0; i < 20; ++i) {
      std::unique_ptr<ClientCall> dropped = (*conn)->StartCall("/test.Echo/Hold");
      const Status written = co_await dropped->Write("x");
      EXPECT_TRUE(written.ok());
    }
    // And calls whose connection closes under them, destroyed afterwards.
    std::vector<std::unique_ptr<ClientCall>> orphans;
    for (int i = 0; i < 5; ++i) orphans.push_back((*conn)->StartCall("/test.Echo/Bidi"));
    CO_ASSERT_OK(co_await UnaryCall(**conn, "/test.Echo/Unary", "still fine"));
    EXPECT_TRUE(co_await WaitUntil(
        *loop_, [&] { return probe_->handlers_cancelled == probe_->handlers_started - 6; }));
    co_await (*conn)->Close();
    for (auto& call : orphans) {
      const Status status = co_await call->Finish();
      EXPECT_EQ(status.code(), StatusCode::kUnavailable);
      call.reset();
    }
  });
}

// A6: a call whose connection closes before its HEADERS were written never
// left the client (it waited for MAX_CONCURRENT_STREAMS here); the call the
// server holds may have been processed.
TEST_F(Http2Test, CallClosedBeforeItsHeadersWereWrittenIsNotSent) {
  ServerOptions options;
  options.max_concurrent_streams = 1;
  RunWithServer(
      [&]() -> Task<void> {
        auto conn = co_await Connect();
        CO_ASSERT_OK(conn);
        std::unique_ptr<ClientCall> held = (*conn)->StartCall("/test.Echo/Hold");
        CO_ASSERT_TRUE(co_await WaitUntil(*loop_, [&] { return probe_->handlers_started == 1; }));
        std::unique_ptr<ClientCall> queued = (*conn)->StartCall("/test.Echo/Unary");
        co_await loop_->Yield();
        EXPECT_FALSE(queued->finished());
        co_await (*conn)->Close();
        const Status held_status = co_await held->Finish();
        EXPECT_EQ(held_status.code(), StatusCode::kUnavailable);
        EXPECT_EQ(held->delivery(), ClientCall::Delivery::kMaybeProcessed);
        const Status queued_status = co_await queued->Finish();
        EXPECT_EQ(queued_status.code(), StatusCode::kUnavailable) << queued_status.ToString();
        EXPECT_EQ(queued->delivery(), ClientCall::Delivery::kNotSent);
        EXPECT_EQ(probe_->handlers_started, 1);
      },
      options);
}

// Request metadata over the SETTINGS_MAX_HEADER_LIST_SIZE our server sets
// (16 KiB by default) fails RESOURCE_EXHAUSTED before it is sent, saying
// so; the connection goes on serving.
TEST_F(Http2Test, RequestMetadataOverThePeersHeaderListLimitIsResourceExhausted) {
  RunWithServer([&]() -> Task<void> {
    auto conn = co_await Connect();
    CO_ASSERT_OK(conn);
    for (size_t size : {size_t{20 * 1024}, size_t{130 * 1024}}) {
      const Metadata metadata = {{"x-big", std::string(size, 'm')}};
      StatusOr<std::string> response =
          co_await UnaryCall(**conn, "/test.Echo/Unary", "hello", metadata);
      EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted)
          << response.status().ToString();
      EXPECT_NE(response.status().message().find("SETTINGS_MAX_HEADER_LIST_SIZE of 16384"),
                std::string::npos)
          << response.status().ToString();
    }
    EXPECT_EQ(probe_->handlers_started, 0);
    StatusOr<std::string> small = co_await UnaryCall(**conn, "/test.Echo/Unary", "hello");
    CO_ASSERT_OK(small);
    co_await (*conn)->Close();
  });
}

}  // namespace
}  // namespace uxds::http2::testing
