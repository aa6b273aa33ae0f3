// ServiceRegistry: the methods a server answers, by HTTP/2 :path.
//
// Built once, then shared read-only (shared_ptr<const ServiceRegistry>) by
// every connection; the xDS-enabled server can hand different registries to
// connections accepted under different filter chains.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "http2/server_call.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::http2 {

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

}  // namespace uxds::http2
