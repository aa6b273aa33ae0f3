// A uxds HTTP/2 server serving grpc.testing.TestService on 127.0.0.1, on a
// loop thread of its own (as deployed), for benchmarks whose client runs on
// the benchmark thread.
#pragma once

#include <functional>
#include <memory>

#include "http2/server.h"
#include "test_service/test_service.h"
#include "uxds/runtime.h"

namespace uxds {

// Puts something in front of the TestService's registry (e.g. the xDS
// server's routing); empty: the registry is served as it is.
using RegistryWrapper = std::function<std::shared_ptr<const http2::ServiceRegistry>(
    std::shared_ptr<const http2::ServiceRegistry>)>;

// Server on its own loop thread (as deployed); client on the benchmark thread.
class ServerFixture {
 public:
  explicit ServerFixture(const LoopOptions& options, http2::ServerOptions server_options = {},
                         const RegistryWrapper& wrap = {}) {
    thread_ = std::move(*LoopThread::Start(options));
    auto registry = std::make_shared<http2::ServiceRegistry>();
    test_service::RegisterTestService(*registry, "bench");
    std::shared_ptr<const http2::ServiceRegistry> served = registry;
    if (wrap) served = wrap(std::move(served));
    thread_->RunSync([&] {
      server_ = std::move(*http2::Server::Listen(thread_->loop(), SocketAddress::Loopback4(0),
                                                 served, std::move(server_options)));
      thread_->loop().Spawn(server_->Serve());
    });
  }
  ~ServerFixture() {
    bool done = false;
    thread_->RunSync([&] {
      thread_->loop().Spawn([](http2::Server& s, bool& d) -> Task<void> {
        co_await s.Shutdown(std::chrono::milliseconds(100));
        d = true;
      }(*server_, done));
    });
    while (true) {
      bool finished = false;
      thread_->RunSync([&] { finished = done; });
      if (finished) break;
    }
    thread_->RunSync([&] { server_.reset(); });
  }
  uint16_t port() const { return server_->port(); }

 private:
  std::unique_ptr<LoopThread> thread_;
  std::unique_ptr<http2::Server> server_;
};

}  // namespace uxds
