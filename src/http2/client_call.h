// ClientCall: one gRPC call (an HTTP/2 stream) on a ClientConnection.
//
// Unary, client-, server- and bidirectional streaming calls are all this
// class: Write() messages, WritesDone() to half-close, Read() until nullopt,
// then Finish() for the status. One Read() and one Write() may be pending at
// the same time (from two tasks); everything runs on the connection's loop.
//
// Cancelling the task that awaits one of these methods cancels the call.
// Destroying a call that has not finished cancels it (RST_STREAM CANCEL).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http2/http2_stream.h"
#include "http2/metadata.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2 {

namespace detail {
class ClientSession;
}

class ClientCall final : private detail::Http2Stream {
 public:
  // From the loop thread's block cache, as every stream.
  using detail::Http2Stream::operator new;
  using detail::Http2Stream::operator delete;

  // How far a call that failed got, for gRPC's transparent retry (A6): a
  // call the server application cannot have seen may be started again.
  enum class Delivery {
    // The request may have reached the server application (or the call
    // has not failed).
    kMaybeProcessed,
    // The request never left this client: the connection was unusable
    // (GOAWAY received, closed) when the call started, or closed or
    // refused the stream before its HEADERS were written.
    kNotSent,
    // The server's HTTP/2 layer saw the stream and refused it before its
    // application did: RST_STREAM REFUSED_STREAM, or a stream id above a
    // GOAWAY's last stream id. Nothing of a response arrived.
    kRefused,
  };

  ~ClientCall() override;

  // Sends one message. Returns once the message is queued and the stream's
  // send buffer is below its high-water mark, i.e. it waits while the peer's
  // flow-control window is exhausted. Not OK once the call has ended (the
  // final status if that is an error) or after WritesDone().
  Task<Status> Write(std::string_view message);
  // Waits until every message written so far has reached the transport
  // (Write() returns once a message is buffered, which may be long before:
  // the peer's flow-control window or MAX_CONCURRENT_STREAMS can hold it
  // back). OK then; the call's status if it ends first; CANCELLED.
  Task<Status> WaitUntilWritten();
  // Half-closes: END_STREAM follows the messages already written.
  Task<Status> WritesDone();
  // The next response message; nullopt once the response ended (Finish()
  // then has the status). Messages that arrived before an OK or error
  // status are still returned; a local failure (cancel, deadline, lost
  // connection) discards them.
  Task<std::optional<std::string>> Read();
  // Waits for the response headers: OK once initial_metadata() is set; the
  // final status when the call ended without them (a Trailers-Only response
  // or an error; then initial_metadata() stays empty).
  Task<Status> ReadInitialMetadata();
  // Waits for the final status: from the trailers, or a local error
  // (DEADLINE_EXCEEDED, CANCELLED, UNAVAILABLE when the connection is lost,
  // RESOURCE_EXHAUSTED for an oversize message, INTERNAL for a malformed
  // response). Response messages not read yet are discarded.
  Task<Status> Finish();
  // Ends the call with CANCELLED and sends RST_STREAM CANCEL. No-op once the
  // call has finished.
  void Cancel();

  bool finished() const { return finished_; }
  // The final status once finished(); OK before.
  const Status& status() const { return status_; }
  // Response headers (custom metadata only), once received.
  const Metadata& initial_metadata() const { return initial_metadata_; }
  // Trailers (or the Trailers-Only response), custom metadata only.
  const Metadata& trailing_metadata() const { return trailing_metadata_; }
  const std::string& path() const { return path_; }
  std::optional<Loop::Clock::time_point> deadline() const { return deadline_; }
  // Once finished with an error: whether the server application can have
  // seen the call.
  Delivery delivery() const { return delivery_; }

 private:
  friend class detail::ClientSession;

  ClientCall(detail::ClientSession* session, std::string path,
             std::optional<Loop::Clock::time_point> deadline, size_t max_receive_message_size,
             size_t max_metadata_size);

  // Ends the call before any stream was opened; `delivery` says whether it
  // may be started elsewhere (kNotSent) or not (kMaybeProcessed: e.g. its
  // metadata is invalid, its deadline passed).
  void FailBeforeStart(Status status, Delivery delivery = Delivery::kMaybeProcessed);
  // nghttp2 dropped the request before its HEADERS went out.
  void OnRequestRefused(Status status, Delivery delivery);
  // The connection closed; `delivery` is how far the call's stream got.
  void OnSessionClosedWith(const Status& reason, Delivery delivery);
  void StartDeadlineTimer();
  // Local failure: final status, queued messages dropped, RST_STREAM.
  void Fail(Status status, uint32_t rst_error_code);
  // Sets the final status and wakes every waiter.
  void Complete(Status status);
  void CompleteFromTrailers();
  Status StatusAfterFinish() const;
  void Detach();

  // detail::Http2Stream
  void OnHeader(uint8_t category, std::string_view name, std::string_view value) override;
  void OnHeadersComplete(uint8_t category, bool end_stream) override;
  void OnDataEndStream() override;
  void OnReceiveError(Status status) override;
  void OnStreamClose(uint32_t error_code) override;
  void OnSessionClosed(const Status& reason) override;

  detail::ClientSession* client_session_;
  const std::string path_;
  const std::optional<Loop::Clock::time_point> deadline_;
  const size_t max_metadata_size_;
  std::unique_ptr<Timer> deadline_timer_;
  bool finished_ = false;
  Status status_;
  Delivery delivery_ = Delivery::kMaybeProcessed;
  bool writes_done_ = false;

  // Response headers as they arrive.
  int http_status_ = 0;
  std::string content_type_;
  std::optional<std::string> grpc_status_;
  std::optional<std::string> grpc_message_;
  Metadata pending_metadata_;
  size_t header_list_size_ = 0;
  bool header_list_too_large_ = false;
  bool response_headers_received_ = false;
  Metadata initial_metadata_;
  Metadata trailing_metadata_;
};

}  // namespace uxds::http2
