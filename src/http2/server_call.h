// Http2ServerCall: one incoming gRPC call on an HTTP/2 stream, handed to its
// Handler as the public uxds::ServerCall (include/uxds/service_registry.h
// says what a handler may do with it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http2/http2_stream.h"
#include "http2/metadata.h"
#include "uxds/cancel.h"
#include "uxds/loop.h"
#include "uxds/service_registry.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2 {

namespace detail {
class ServerSession;
}

// Handlers see the call through the public interface.
using ServerCall = ::uxds::ServerCall;

class Http2ServerCall final : public ServerCall, private detail::Http2Stream {
 public:
  // From the loop thread's block cache, as every stream.
  using detail::Http2Stream::operator new;
  using detail::Http2Stream::operator delete;

  ~Http2ServerCall() override;

  // ServerCall
  const std::string& method() const override { return path_; }
  const std::string& authority() const override { return authority_; }
  const Metadata& request_metadata() const override { return request_metadata_; }
  std::optional<Loop::Clock::time_point> deadline() const override { return deadline_; }
  const std::string& content_type() const override { return *content_type_; }
  const std::string& peer() const override;
  const ConnectionInfo& connection() const override;
  Loop& loop() const override { return loop_; }
  Task<std::optional<std::string>> Read() override;
  Task<Status> Write(std::string_view message) override;
  void AddInitialMetadata(std::string key, std::string value) override;
  void AddTrailingMetadata(std::string key, std::string value) override;
  Status SendInitialMetadata() override;
  bool cancelled() const override { return cancelled_; }
  CancelState& cancel_state() override { return cancel_state_; }

 private:
  friend class detail::ServerSession;

  Http2ServerCall(detail::ServerSession* session, CancelState* parent_cancel,
                  size_t max_receive_message_size, size_t max_metadata_size);

  // Sends the final status: trailers after the messages written, or a
  // Trailers-Only response. No-op once finished or cancelled.
  void FinishWithStatus(const Status& status);
  // Answers a request that never reaches a handler, with `http_status`.
  void RespondWithoutHandler(int http_status, const Status& status,
                             const std::vector<std::pair<std::string, std::string>>& extra = {});
  // Ends the call from our side: status to the client, handler cancelled.
  void Abort(const Status& status);
  // The call is dead (client RST, deadline, lost connection).
  void MarkCancelled();
  void StartDeadlineTimer();

  // detail::Http2Stream
  void OnHeader(uint8_t category, std::string_view name, std::string_view value) override;
  void OnHeadersComplete(uint8_t category, bool end_stream) override;
  void OnDataEndStream() override;
  void OnReceiveError(Status status) override;
  void OnStreamClose(uint32_t error_code) override;
  void OnSessionClosed(const Status& reason) override;
  void OnSendEnd(uint32_t* data_flags) override;
  void OnFinalHeadersSent() override;

  detail::ServerSession* server_session_;
  CancelState cancel_state_;
  const size_t max_metadata_size_;

  // Request headers.
  std::string method_;  // :method
  std::string path_;
  std::string authority_;
  // The request's content-type. The usual value is one byte over
  // std::string's inline size: it points to a shared constant instead of
  // being copied for every call.
  const std::string* content_type_ = &content_type_value_;
  std::string content_type_value_;
  std::optional<std::string> grpc_timeout_;
  std::optional<std::string> grpc_encoding_;
  Metadata request_metadata_;
  size_t header_list_size_ = 0;
  bool authority_seen_ = false;  // an :authority header, even an empty one
  bool header_list_too_large_ = false;
  std::optional<Loop::Clock::time_point> deadline_;
  std::unique_ptr<Timer> deadline_timer_;

  bool remote_end_ = false;    // the client half-closed
  bool headers_sent_ = false;  // response HEADERS submitted
  bool finished_ = false;      // final status submitted
  bool cancelled_ = false;
  bool handler_done_ = false;  // handler returned, or there is none
  Metadata initial_metadata_;
  Metadata trailing_metadata_;
  // Trailers waiting for the last DATA frame (submitted from OnSendEnd).
  // Set when the call finished after writing: its status, sent as
  // trailers after the last DATA frame.
  std::optional<Status> pending_status_;
};

}  // namespace uxds::http2
