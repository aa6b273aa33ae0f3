// ServerCall: one incoming gRPC call, handed to its Handler.
//
// The handler reads request messages, writes responses and returns the
// call's Status, which goes out in the trailers (a Trailers-Only response
// when nothing was written). The handler runs under the call's own
// cancellation: when the client cancels, the deadline passes or the
// connection goes away, every operation the handler awaits completes with
// CANCELLED, and cancelled() turns true; its returned status is then
// dropped.
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
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2 {

namespace detail {
class ServerSession;
}

class ServerCall final : private detail::Http2Stream {
 public:
  ~ServerCall() override;

  // ":path", e.g. "/grpc.testing.TestService/UnaryCall".
  const std::string& method() const { return path_; }
  const std::string& authority() const { return authority_; }
  // Custom metadata of the request ("-bin" values decoded), plus user-agent.
  const Metadata& request_metadata() const { return request_metadata_; }
  // From grpc-timeout; nullopt when the client set none.
  std::optional<Loop::Clock::time_point> deadline() const { return deadline_; }
  // "127.0.0.1:54321" style.
  const std::string& peer() const;
  Loop& loop() const { return loop_; }

  // The next request message; nullopt once the client half-closed, or the
  // call was cancelled.
  Task<std::optional<std::string>> Read();
  // Sends one response message (the response headers first, if not yet
  // sent). Waits while the client's flow-control window is exhausted.
  // CANCELLED once the call is cancelled, FAILED_PRECONDITION once finished.
  Task<Status> Write(std::string_view message);

  // Metadata for the response headers; only before they are sent (the first
  // Write() or SendInitialMetadata()).
  void AddInitialMetadata(std::string key, std::string value);
  // Metadata for the trailers, sent with the returned status.
  void AddTrailingMetadata(std::string key, std::string value);
  // Sends the response headers now (e.g. before a long wait for the first
  // message). INTERNAL if the initial metadata is invalid.
  Status SendInitialMetadata();

  // The client cancelled, the deadline passed, or the connection is gone.
  bool cancelled() const { return cancelled_; }
  // Cancelled together with the call; what the handler runs under.
  CancelState& cancel_state() { return cancel_state_; }

 private:
  friend class detail::ServerSession;

  ServerCall(detail::ServerSession* session, CancelState* parent_cancel,
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
  std::vector<std::pair<std::string, std::string>> TrailerFields(const Status& status);

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
  std::string content_type_;
  std::optional<std::string> grpc_timeout_;
  std::optional<std::string> grpc_encoding_;
  Metadata request_metadata_;
  size_t header_list_size_ = 0;
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
  std::optional<std::vector<std::pair<std::string, std::string>>> pending_trailers_;
};

}  // namespace uxds::http2
