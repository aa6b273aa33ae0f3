// ClientSession: the client side of an HTTP/2 connection (internal to
// ClientConnection): submits requests and routes their events to ClientCalls.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "http2/client_call.h"
#include "http2/client_connection_options.h"
#include "http2/http2_session.h"
#include "http2/metadata.h"

namespace uxds::http2::detail {

class ClientSession final : public Http2Session {
 public:
  ClientSession(Loop& loop, std::unique_ptr<ByteStream> transport,
                const ClientConnectionOptions& options, bool secure);
  ~ClientSession() override;

  // Not closing and no GOAWAY received: new calls may start.
  bool usable() const { return !closing() && !goaway_received(); }
  std::unique_ptr<ClientCall> StartCall(std::string path, const Metadata& metadata,
                                        std::optional<Loop::Clock::time_point> deadline);
  // The call's stream closed or the call is going away.
  void ForgetCall(int32_t stream_id);

 protected:
  void FailAllStreams(const Status& reason) override;
  void OnRequestNotSent(int32_t stream_id, int lib_error_code) override;

 private:
  ClientCall::Delivery DeliveryAtClose(int32_t stream_id) const;

  const ClientConnectionOptions client_options_;
  const std::string scheme_;
  const std::string user_agent_;
  std::unordered_map<int32_t, ClientCall*> calls_;
};

}  // namespace uxds::http2::detail
