// Our client against a scripted HTTP/2 server that answers like a proxy, a
// broken server or a non-gRPC server would: the statuses the client reports
// follow PROTOCOL-HTTP2 and http-grpc-status-mapping.
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <optional>
#include <string>
#include <vector>

#include "http2_test_util.h"
#include "runtime/tcp_socket.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;
using Fields = std::vector<std::pair<std::string, std::string>>;

// How the scripted server answers every request once the request ends.
struct Script {
  Fields headers;  // response HEADERS
  bool headers_end_stream = false;
  std::string data;  // DATA after the headers (may be empty)
  bool data_end_stream = false;
  std::optional<Fields> trailers;
  std::optional<uint32_t> rst_stream;            // RST_STREAM instead of a response
  std::optional<int32_t> goaway_last_stream_id;  // GOAWAY instead of a response
};

std::vector<nghttp2_nv> ToNv(const Fields& fields) {
  std::vector<nghttp2_nv> nva;
  for (const auto& [name, value] : fields) {
    nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                   reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                   value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  return nva;
}

// One connection's worth of a scripted HTTP/2 server on nghttp2.
class ScriptedServer {
 public:
  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    nghttp2_session_callbacks* callbacks;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &OnFrameRecv);
    nghttp2_session_server_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~ScriptedServer() { nghttp2_session_del(session_); }

  Task<void> Serve(TcpSocket& socket) {
    std::vector<uint8_t> buffer(16384);
    while (true) {
      const Status flushed = co_await Flush(socket);
      if (!flushed.ok()) break;
      StatusOr<size_t> n = co_await socket.Read(buffer);
      if (!n.ok() || *n == 0) break;
      if (nghttp2_session_mem_recv(session_, buffer.data(), *n) < 0) break;
      for (int32_t stream_id : ready_) Respond(stream_id);
      ready_.clear();
    }
  }

 private:
  Task<Status> Flush(TcpSocket& socket) {
    std::string out;
    const uint8_t* data;
    for (ssize_t n; (n = nghttp2_session_mem_send(session_, &data)) > 0;) {
      out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (out.empty()) co_return OkStatus();
    co_return co_await socket.Write(
        std::span(reinterpret_cast<const uint8_t*>(out.data()), out.size()));
  }

  void Respond(int32_t stream_id) {
    if (script_.goaway_last_stream_id) {
      nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, *script_.goaway_last_stream_id,
                            NGHTTP2_NO_ERROR, nullptr, 0);
      return;
    }
    if (script_.rst_stream) {
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, *script_.rst_stream);
      return;
    }
    const std::vector<nghttp2_nv> nva = ToNv(script_.headers);
    if (script_.headers_end_stream) {
      nghttp2_submit_response(session_, stream_id, nva.data(), nva.size(), nullptr);
      return;
    }
    nghttp2_data_provider provider{};
    provider.source.ptr = this;
    provider.read_callback = &ReadData;
    nghttp2_submit_response(session_, stream_id, nva.data(), nva.size(), &provider);
  }

  static ssize_t ReadData(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source* source, void*) {
    auto* self = static_cast<ScriptedServer*>(source->ptr);
    const std::string& data = self->script_.data;
    const size_t n = std::min(length, data.size() - self->sent_);
    std::copy_n(data.data() + self->sent_, n, buf);
    self->sent_ += n;
    if (self->sent_ < data.size()) return static_cast<ssize_t>(n);
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (self->script_.trailers) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const std::vector<nghttp2_nv> nva = ToNv(*self->script_.trailers);
      nghttp2_submit_trailer(session, stream_id, nva.data(), nva.size());
    } else if (!self->script_.data_end_stream) {
      return NGHTTP2_ERR_DEFERRED;  // leave the stream open
    }
    return static_cast<ssize_t>(n);
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    auto* self = static_cast<ScriptedServer*>(user_data);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      self->ready_.push_back(frame->hd.stream_id);
    }
    return 0;
  }

  Script script_;
  nghttp2_session* session_ = nullptr;
  std::vector<int32_t> ready_;
  size_t sent_ = 0;
};

std::string Framed(std::string_view message) {
  std::string out;
  EXPECT_TRUE(AppendGrpcFrame(out, message).ok());
  return out;
}

// One unary call from our client to a ScriptedServer following `script`;
// `delivery`, when set, receives how far a failed call got.
Status CallScripted(Loop& loop, Script script, ClientConnectionOptions options = {},
                    ClientCall::Delivery* delivery = nullptr, const Metadata& metadata = {}) {
  auto listener = TcpListener::Bind(loop, SocketAddress::Loopback4(0));
  EXPECT_TRUE(listener.ok());
  if (!listener.ok()) return listener.status();
  Status result = InternalError("not run");
  loop.BlockOn([&]() -> Task<void> {
    TaskGroup group(loop);
    group.Spawn([](TcpListener& listener, Script script) -> Task<void> {
      StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener.Accept();
      if (!socket.ok()) co_return;
      ScriptedServer server(std::move(script));
      co_await server.Serve(**socket);
    }(**listener, std::move(script)));
    co_await RunChecksThenJoin(group, [&]() -> Task<void> {
      options.connect_timeout = milliseconds(5000);
      auto conn = co_await ClientConnection::Connect(loop, (*listener)->local_address(), options);
      CO_ASSERT_OK(conn);
      const auto deadline = Loop::Clock::now() + std::chrono::seconds(10);
      StatusOr<std::string> response = co_await UnaryCall(**conn, "/scripted.Service/Call",
                                                          "request", metadata, deadline, delivery);
      result = response.status();
      co_await (*conn)->Close();
    });
  }());
  return result;
}

const Fields kGrpcHeaders = {{":status", "200"}, {"content-type", "application/grpc"}};

Script TrailersOnly(Fields fields) {
  Script script;
  script.headers = std::move(fields);
  script.headers_end_stream = true;
  return script;
}

class ScriptedPeerTest : public Http2Test {};

TEST_F(ScriptedPeerTest, HttpStatusWithoutGrpcStatusIsMapped) {
  // http-grpc-status-mapping.md
  const std::pair<int, StatusCode> cases[] = {
      {400, StatusCode::kInternal},         {401, StatusCode::kUnauthenticated},
      {403, StatusCode::kPermissionDenied}, {404, StatusCode::kUnimplemented},
      {429, StatusCode::kUnavailable},      {502, StatusCode::kUnavailable},
      {503, StatusCode::kUnavailable},      {504, StatusCode::kUnavailable},
      {500, StatusCode::kUnknown},          {418, StatusCode::kUnknown},
  };
  for (const auto& [http_status, code] : cases) {
    const Status status = CallScripted(
        *loop_,
        TrailersOnly({{":status", std::to_string(http_status)}, {"content-type", "text/html"}}));
    EXPECT_EQ(status.code(), code) << http_status << ": " << status.ToString();
  }
  // Non-200 response headers without END_STREAM fail the call at once.
  Script proxy_error;
  proxy_error.headers = {{":status", "503"}, {"content-type", "text/plain"}};
  proxy_error.data = "upstream connect error";
  proxy_error.data_end_stream = false;
  EXPECT_EQ(CallScripted(*loop_, proxy_error).code(), StatusCode::kUnavailable);
}

TEST_F(ScriptedPeerTest, GrpcStatusWinsOverTheHttpStatus) {
  Fields fields = {{":status", "404"},
                   {"content-type", "application/grpc"},
                   {"grpc-status", "5"},
                   {"grpc-message", "gone%20away"}};
  const Status status = CallScripted(*loop_, TrailersOnly(fields));
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "gone away");
}

TEST_F(ScriptedPeerTest, MissingOrInvalidGrpcStatusIsUnknown) {
  Script missing;
  missing.headers = kGrpcHeaders;
  missing.data = Framed("response");
  missing.trailers = Fields{{"x-other", "1"}};
  EXPECT_EQ(CallScripted(*loop_, missing).code(), StatusCode::kUnknown);

  Script invalid = missing;
  invalid.trailers = Fields{{"grpc-status", "OK"}};
  EXPECT_EQ(CallScripted(*loop_, invalid).code(), StatusCode::kUnknown);

  Script out_of_range = missing;
  out_of_range.trailers = Fields{{"grpc-status", "99"}};
  EXPECT_EQ(CallScripted(*loop_, out_of_range).code(), StatusCode::kUnknown);
}

TEST_F(ScriptedPeerTest, BrokenPercentEncodingIsKept) {
  Fields fields = kGrpcHeaders;
  fields.emplace_back("grpc-status", "3");
  fields.emplace_back("grpc-message", "bad %zz escape and %4");
  const Status status = CallScripted(*loop_, TrailersOnly(fields));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "bad %zz escape and %4");
}

TEST_F(ScriptedPeerTest, NonGrpcContentTypeIsUnknown) {
  Script html;
  html.headers = {{":status", "200"}, {"content-type", "text/html"}};
  html.data = "<html></html>";
  html.data_end_stream = true;
  EXPECT_EQ(CallScripted(*loop_, html).code(), StatusCode::kUnknown);
}

TEST_F(ScriptedPeerTest, EndOfStreamWithoutTrailersIsInternal) {
  Script script;
  script.headers = kGrpcHeaders;
  script.data = Framed("response");
  script.data_end_stream = true;
  EXPECT_EQ(CallScripted(*loop_, script).code(), StatusCode::kInternal);
}

TEST_F(ScriptedPeerTest, TruncatedMessageBeforeOkTrailersIsInternal) {
  Script script;
  script.headers = kGrpcHeaders;
  script.data = Framed("response").substr(0, 7);
  script.trailers = Fields{{"grpc-status", "0"}};
  EXPECT_EQ(CallScripted(*loop_, script).code(), StatusCode::kInternal);
}

TEST_F(ScriptedPeerTest, CompressedResponseWithoutEncodingIsInternal) {
  Script script;
  script.headers = kGrpcHeaders;
  script.data = Framed("response");
  script.data[0] = 1;
  script.trailers = Fields{{"grpc-status", "0"}};
  const Status status = CallScripted(*loop_, script);
  EXPECT_EQ(status.code(), StatusCode::kInternal) << status.ToString();
}

TEST_F(ScriptedPeerTest, RstStreamCodesAreMapped) {
  const std::pair<uint32_t, StatusCode> cases[] = {
      {NGHTTP2_NO_ERROR, StatusCode::kInternal},
      {NGHTTP2_PROTOCOL_ERROR, StatusCode::kInternal},
      {NGHTTP2_REFUSED_STREAM, StatusCode::kUnavailable},
      {NGHTTP2_CANCEL, StatusCode::kCancelled},
      {NGHTTP2_ENHANCE_YOUR_CALM, StatusCode::kResourceExhausted},
      {NGHTTP2_INADEQUATE_SECURITY, StatusCode::kPermissionDenied},
  };
  for (const auto& [rst, code] : cases) {
    Script script;
    script.rst_stream = rst;
    const Status status = CallScripted(*loop_, script);
    EXPECT_EQ(status.code(), code) << "RST_STREAM " << rst << ": " << status.ToString();
  }
}

TEST_F(ScriptedPeerTest, GoAwayBelowOurStreamIsUnavailable) {
  Script script;
  script.goaway_last_stream_id = 0;
  const Status status = CallScripted(*loop_, script);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
}

TEST_F(ScriptedPeerTest, OversizeResponseMetadataIsResourceExhausted) {
  Fields fields = kGrpcHeaders;
  fields.emplace_back("x-huge", std::string(4000, 'h'));
  fields.emplace_back("grpc-status", "0");
  ClientConnectionOptions options;
  options.max_metadata_size = 2048;
  const Status status = CallScripted(*loop_, TrailersOnly(fields), options);
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.ToString();
}

// A6 transparent retry: which failures mean the server application never
// saw the call.
TEST_F(ScriptedPeerTest, RefusedStreamIsRefusedDelivery) {
  Script script;
  script.rst_stream = NGHTTP2_REFUSED_STREAM;
  ClientCall::Delivery delivery = ClientCall::Delivery::kMaybeProcessed;
  const Status status = CallScripted(*loop_, script, {}, &delivery);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_EQ(delivery, ClientCall::Delivery::kRefused);
}

TEST_F(ScriptedPeerTest, StreamAboveGoAwayLastStreamIdIsRefusedDelivery) {
  Script script;
  script.goaway_last_stream_id = 0;
  ClientCall::Delivery delivery = ClientCall::Delivery::kMaybeProcessed;
  const Status status = CallScripted(*loop_, script, {}, &delivery);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_EQ(delivery, ClientCall::Delivery::kRefused);
}

TEST_F(ScriptedPeerTest, OtherFailuresMayHaveBeenProcessed) {
  Script cancelled;
  cancelled.rst_stream = NGHTTP2_CANCEL;
  ClientCall::Delivery delivery = ClientCall::Delivery::kNotSent;
  EXPECT_EQ(CallScripted(*loop_, cancelled, {}, &delivery).code(), StatusCode::kCancelled);
  EXPECT_EQ(delivery, ClientCall::Delivery::kMaybeProcessed);

  Fields unavailable = kGrpcHeaders;
  unavailable.emplace_back("grpc-status", "14");
  delivery = ClientCall::Delivery::kNotSent;
  EXPECT_EQ(CallScripted(*loop_, TrailersOnly(unavailable), {}, &delivery).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(delivery, ClientCall::Delivery::kMaybeProcessed);
}

// A call started on a connection that received GOAWAY never leaves the
// client.
TEST_F(ScriptedPeerTest, CallOnAConnectionThatReceivedGoAwayIsNotSent) {
  auto listener = TcpListener::Bind(*loop_, SocketAddress::Loopback4(0));
  ASSERT_TRUE(listener.ok());
  loop_->BlockOn([&]() -> Task<void> {
    TaskGroup group(*loop_);
    group.Spawn([](TcpListener& listener) -> Task<void> {
      StatusOr<std::unique_ptr<TcpSocket>> socket = co_await listener.Accept();
      if (!socket.ok()) co_return;
      Script script;
      script.goaway_last_stream_id = 0;
      ScriptedServer server(std::move(script));
      co_await server.Serve(**socket);
    }(**listener));
    co_await RunChecksThenJoin(group, [&]() -> Task<void> {
      ClientConnectionOptions options;
      options.connect_timeout = milliseconds(5000);
      auto conn = co_await ClientConnection::Connect(*loop_, (*listener)->local_address(), options);
      CO_ASSERT_OK(conn);
      const auto deadline = Loop::Clock::now() + std::chrono::seconds(10);
      StatusOr<std::string> first =
          co_await UnaryCall(**conn, "/scripted.Service/Call", "request", {}, deadline);
      EXPECT_EQ(first.status().code(), StatusCode::kUnavailable);
      EXPECT_FALSE((*conn)->usable());
      std::unique_ptr<ClientCall> after_goaway = (*conn)->StartCall("/scripted.Service/Call");
      EXPECT_TRUE(after_goaway->finished());
      EXPECT_EQ(after_goaway->status().code(), StatusCode::kUnavailable);
      EXPECT_EQ(after_goaway->delivery(), ClientCall::Delivery::kNotSent);
      co_await (*conn)->Close();
    });
  }());
}

// Request metadata larger than any header block nghttp2 sends, to a peer
// that sets no SETTINGS_MAX_HEADER_LIST_SIZE: RESOURCE_EXHAUSTED naming the
// cause, not UNAVAILABLE "The length of the frame is invalid".
TEST_F(ScriptedPeerTest, OversizeRequestMetadataIsResourceExhausted) {
  Fields fields = kGrpcHeaders;
  fields.emplace_back("grpc-status", "0");
  ClientCall::Delivery delivery = ClientCall::Delivery::kNotSent;
  const Status status = CallScripted(*loop_, TrailersOnly(fields), {}, &delivery,
                                     {{"x-big", std::string(130 * 1024, 'm')}});
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.ToString();
  EXPECT_NE(status.message().find("metadata"), std::string::npos) << status.ToString();
  EXPECT_EQ(delivery, ClientCall::Delivery::kMaybeProcessed);
}

}  // namespace
}  // namespace uxds::http2::testing
