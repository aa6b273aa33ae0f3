// The services a uxds server answers: handlers by gRPC method path, shared
// by uxds::Server (plain gRPC) and uxds::XdsServer (xDS-enabled).
//
//   auto registry = std::make_shared<uxds::ServiceRegistry>();
//   registry->Register("/demo.Echo/Say", uxds::MakeUnaryHandler(
//       [](uxds::ServerCall&, std::string request) -> uxds::Task<uxds::StatusOr<std::string>> {
//         co_return request;  // echo
//       }));
//
// Built once, then shared read-only (shared_ptr<const ServiceRegistry>) by
// every connection; the xDS-enabled server can hand different registries to
// connections accepted under different filter chains.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "uxds/cancel.h"
#include "uxds/connection_info.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds {

// gRPC custom metadata: lowercase keys; a key ending in "-bin" holds raw
// bytes (base64 on the wire), every other value printable ASCII.
using Metadata = std::vector<std::pair<std::string, std::string>>;

// One incoming gRPC call, handed to its Handler on the server's loop.
//
// The handler reads request messages, writes responses and returns the
// call's Status, which goes out in the trailers (a Trailers-Only response
// when nothing was written). The handler runs under the call's own
// cancellation: when the client cancels, the deadline passes or the
// connection goes away, every operation the handler awaits completes with
// CANCELLED, and cancelled() turns true; its returned status is then
// dropped.
class ServerCall {
 public:
  virtual ~ServerCall() = default;

  // ":path", e.g. "/grpc.testing.TestService/UnaryCall".
  virtual const std::string& method() const = 0;
  virtual const std::string& authority() const = 0;
  // Custom metadata of the request ("-bin" values decoded), plus user-agent.
  virtual const Metadata& request_metadata() const = 0;
  // From grpc-timeout; nullopt when the client set none.
  virtual std::optional<Loop::Clock::time_point> deadline() const = 0;
  // The request's content-type as the client sent it ("application/grpc",
  // "application/grpc+proto", ...).
  virtual const std::string& content_type() const = 0;
  // "127.0.0.1:54321" style.
  virtual const std::string& peer() const = 0;
  // Both ends' addresses and, over TLS, the client certificate's identities
  // (SANs, subject): what authorization decisions are made on.
  virtual const ConnectionInfo& connection() const = 0;
  virtual Loop& loop() const = 0;

  // The next request message; nullopt once the client half-closed, or the
  // call was cancelled.
  virtual Task<std::optional<std::string>> Read() = 0;
  // Sends one response message (the response headers first, if not yet
  // sent). Waits while the client's flow-control window is exhausted.
  // CANCELLED once the call is cancelled, FAILED_PRECONDITION once finished.
  virtual Task<Status> Write(std::string_view message) = 0;

  // Metadata for the response headers; only before they are sent (the first
  // Write() or SendInitialMetadata()).
  virtual void AddInitialMetadata(std::string key, std::string value) = 0;
  // Metadata for the trailers, sent with the returned status.
  virtual void AddTrailingMetadata(std::string key, std::string value) = 0;
  // Sends the response headers now (e.g. before a long wait for the first
  // message). INTERNAL if the initial metadata is invalid.
  virtual Status SendInitialMetadata() = 0;

  // The client cancelled, the deadline passed, or the connection is gone.
  virtual bool cancelled() const = 0;
  // Cancelled together with the call; what the handler runs under.
  virtual CancelState& cancel_state() = 0;
};

// Runs one call; the returned status goes to the client in the trailers.
using Handler = std::function<Task<Status>(ServerCall&)>;
// One request message in, one response message out.
using UnaryHandler = std::function<Task<StatusOr<std::string>>(ServerCall&, std::string request)>;

// Adapts a unary handler: reads exactly one request (INTERNAL when the client
// sends none or more than one, as gRPC does), writes the response.
Handler MakeUnaryHandler(UnaryHandler handler);

class ServiceRegistry {
 public:
  // `path` is "/<service>/<method>", e.g. "/grpc.testing.TestService/EmptyCall".
  // A second registration of the same path replaces the first.
  void Register(std::string path, Handler handler);
  // Serves every path that is not registered (a generic service, a proxy);
  // without one those calls end UNIMPLEMENTED.
  void SetFallbackHandler(Handler handler) { fallback_ = std::move(handler); }

  // The handler for `path`, or nullptr.
  const Handler* Find(std::string_view path) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, Handler, Hash, std::equal_to<>> handlers_;
  Handler fallback_;
};

}  // namespace uxds
