#include "uxds/service_registry.h"

namespace uxds {

Handler MakeUnaryHandler(UnaryHandler handler) {
  return [handler = std::move(handler)](ServerCall& call) -> Task<Status> {
    std::optional<std::string> request = co_await call.Read();
    if (call.cancelled()) co_return CancelledError("call cancelled");
    if (!request) co_return InternalError("unary call " + call.method() + " sent no request");
    if (std::optional<std::string> extra = co_await call.Read()) {
      co_return InternalError("unary call " + call.method() + " sent more than one request");
    }
    if (call.cancelled()) co_return CancelledError("call cancelled");
    StatusOr<std::string> response = co_await handler(call, std::move(*request));
    if (!response.ok()) co_return response.status();
    Status written = co_await call.Write(*response);
    if (!written.ok()) co_return written;
    co_return OkStatus();
  };
}

void ServiceRegistry::Register(std::string path, Handler handler) {
  handlers_.insert_or_assign(std::move(path), std::move(handler));
}

const Handler* ServiceRegistry::Find(std::string_view path) const {
  auto it = handlers_.find(path);
  if (it != handlers_.end()) return &it->second;
  return fallback_ ? &fallback_ : nullptr;
}

}  // namespace uxds
