#include "http2/client_session.h"

#include <vector>

#include "http2/client_call.h"
#include "http2/grpc_protocol.h"
#include "http2/nv_list.h"

#ifndef UXDS_VERSION
#define UXDS_VERSION "dev"
#endif

namespace uxds::http2::detail {
namespace {

using Delivery = ClientCall::Delivery;

// nghttp2's own bound on a header block it sends (its default
// max_send_header_block_length, which we keep): a larger one is never
// sent (NGHTTP2_ERR_FRAME_SIZE_ERROR).
constexpr size_t kMaxSendHeaderBlock = 64 * 1024;

Http2SessionOptions SessionOptionsFor(const ClientConnectionOptions& options) {
  Http2SessionOptions session;
  session.max_receive_message_size = options.max_receive_message_size;
  session.initial_stream_window_size = options.initial_stream_window_size;
  session.max_buffered_bytes = options.max_buffered_bytes;
  session.max_header_list_size = options.max_metadata_size;
  session.keepalive_time = options.keepalive_time;
  session.keepalive_timeout = options.keepalive_timeout;
  return session;
}

}  // namespace

ClientSession::ClientSession(Loop& loop, std::unique_ptr<ByteStream> transport,
                             const ClientConnectionOptions& options, bool secure)
    : Http2Session(loop, std::move(transport), Role::kClient, SessionOptionsFor(options)),
      client_options_(options),
      scheme_(secure ? "https" : "http"),
      // PROTOCOL-HTTP2 "User Agents": "grpc-" Language ["-" Variant] "/" Version.
      user_agent_((options.user_agent_prefix.empty() ? "" : options.user_agent_prefix + " ") +
                  "grpc-c++-uxds/" UXDS_VERSION) {}

ClientSession::~ClientSession() {
  // Normally empty: closing fails and forgets every call.
  FailAllStreams(UnavailableError("connection to " + peer() + " destroyed"));
}

std::unique_ptr<ClientCall> ClientSession::StartCall(
    std::string path, const Metadata& metadata, std::optional<Loop::Clock::time_point> deadline) {
  std::unique_ptr<ClientCall> call(new ClientCall(this, std::move(path), deadline,
                                                  client_options_.max_receive_message_size,
                                                  client_options_.max_metadata_size));
  if (!usable()) {
    // A6: the call never left this client; the channel starts it elsewhere.
    call->FailBeforeStart(
        UnavailableError(
            closing() ? "connection to " + peer() + " is closed: " + close_reason().message()
                      : "connection to " + peer() + " received GOAWAY; start the call elsewhere"),
        Delivery::kNotSent);
    return call;
  }
  if (Status valid = ValidateMetadataToSend(metadata); !valid.ok()) {
    call->FailBeforeStart(std::move(valid));
    return call;
  }
  std::string timeout;
  if (deadline) {
    const auto remaining = *deadline - Loop::Clock::now();
    if (remaining <= Loop::Clock::duration::zero()) {
      call->FailBeforeStart(
          DeadlineExceededError("deadline exceeded before " + call->path() + " started"));
      return call;
    }
    timeout = EncodeGrpcTimeout(remaining);
  }

  // PROTOCOL-HTTP2 Call-Definition, reserved headers first, then Timeout,
  // then the rest of the call definition, then Custom-Metadata.
  NvList headers;
  headers.AddStatic(":method", "POST");
  headers.Add(":scheme", scheme_);
  headers.Add(":path", call->path());
  headers.Add(":authority", client_options_.authority);
  if (!timeout.empty()) headers.Add("grpc-timeout", timeout);
  headers.AddStatic("te", "trailers");
  headers.AddStatic("content-type", "application/grpc");
  headers.Add("user-agent", user_agent_);
  headers.AddStatic("grpc-accept-encoding", "identity");
  std::vector<std::string> encoded;  // base64 of -bin values, alive until submit
  encoded.reserve(metadata.size());
  for (const auto& [key, value] : metadata) {
    if (IsBinaryMetadataKey(key)) {
      encoded.push_back(Base64Encode(value));
      headers.Add(key, encoded.back());
    } else {
      headers.Add(key, value);
    }
  }

  // RFC 9113 section 6.5.2: the peer's SETTINGS_MAX_HEADER_LIST_SIZE is
  // what it accepts; gRPC fails a call whose metadata exceeds it with
  // RESOURCE_EXHAUSTED rather than sending it.
  size_t header_list_size = 0;
  for (const nghttp2_nv& nv : headers) {
    header_list_size +=
        HeaderFieldSize(std::string_view(reinterpret_cast<const char*>(nv.name), nv.namelen),
                        std::string_view(reinterpret_cast<const char*>(nv.value), nv.valuelen));
  }
  const uint32_t peer_limit =
      nghttp2_session_get_remote_settings(nghttp2(), NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE);
  if (header_list_size > peer_limit) {
    call->FailBeforeStart(ResourceExhaustedError(
        "request metadata of " + call->path() + " is " + std::to_string(header_list_size) +
        " bytes as an HTTP/2 header list, over the SETTINGS_MAX_HEADER_LIST_SIZE of " +
        std::to_string(peer_limit) + " bytes that " + peer() + " accepts"));
    return call;
  }

  const nghttp2_data_provider provider = StreamDataProvider();
  Http2Stream* stream = call.get();
  const int32_t stream_id =
      nghttp2_submit_request(nghttp2(), nullptr, headers.data(), headers.size(), &provider, stream);
  if (stream_id < 0) {
    // E.g. the stream ids are used up. Nothing was sent, but the connection
    // stays as it is, so a new pick could find it again: not retried.
    call->FailBeforeStart(UnavailableError("cannot start a stream on the connection to " + peer() +
                                           ": " + nghttp2_strerror(stream_id)));
    return call;
  }
  call->AttachToNghttp2(stream_id);
  calls_[stream_id] = call.get();
  call->StartDeadlineTimer();
  WakeWriter();
  return call;
}

void ClientSession::ForgetCall(int32_t stream_id) { calls_.erase(stream_id); }

void ClientSession::FailAllStreams(const Status& reason) {
  std::unordered_map<int32_t, ClientCall*> calls;
  calls.swap(calls_);
  for (auto& [id, call] : calls) call->OnSessionClosedWith(reason, DeliveryAtClose(id));
}

// A6: how far a stream got when its connection closed. nghttp2 opens a
// request's stream only as it serializes the HEADERS, so a stream it does
// not know was never written; one above a GOAWAY's last stream id was not
// processed by the server.
ClientCall::Delivery ClientSession::DeliveryAtClose(int32_t stream_id) const {
  if (nghttp2() == nullptr || nghttp2_session_find_stream(nghttp2(), stream_id) == nullptr) {
    return Delivery::kNotSent;
  }
  if (goaway_received() && stream_id > goaway_last_stream_id()) return Delivery::kRefused;
  return Delivery::kMaybeProcessed;
}

void ClientSession::OnRequestNotSent(int32_t stream_id, int lib_error_code) {
  auto it = calls_.find(stream_id);
  if (it == calls_.end()) return;
  ClientCall* call = it->second;
  if (lib_error_code == NGHTTP2_ERR_FRAME_SIZE_ERROR) {
    // The header block is larger than nghttp2 sends: the metadata is too
    // large (RESOURCE_EXHAUSTED, as for the peer's limit), and would be
    // anywhere.
    call->OnRequestRefused(
        ResourceExhaustedError("request metadata of " + call->path() +
                               " is too large to send: HTTP/2 header blocks are limited to " +
                               std::to_string(kMaxSendHeaderBlock) + " bytes"),
        Delivery::kMaybeProcessed);
    return;
  }
  // Typically NGHTTP2_ERR_START_STREAM_NOT_ALLOWED after a GOAWAY: the server
  // never saw the call, so it may be retried elsewhere (A6).
  call->OnRequestRefused(UnavailableError("call to " + call->path() + " was not sent to " + peer() +
                                          ": " + nghttp2_strerror(lib_error_code)),
                         Delivery::kNotSent);
}

}  // namespace uxds::http2::detail
