#include "runtime/host_resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace uxds {

// What the resolver and its worker share. `loop` is cleared (under `mu`)
// when the resolver goes, so the worker never posts to a loop that may be
// gone; the worker thread is detached and ends once it sees `stopping`.
struct HostResolver::Shared {
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::function<void()>> jobs;
  Loop* loop = nullptr;
  bool stopping = false;
  bool worker_started = false;
};

// One lookup: lives until both the awaiting task and the posted result are
// done with it, so either may finish first.
struct HostResolver::Request {
  explicit Request(Loop& loop) : done(loop) {}
  Event done;
  StatusOr<std::vector<SocketAddress>> result = UnavailableError("not resolved");
};

HostResolver::HostResolver(Loop& loop, Lookup lookup)
    : loop_(loop), lookup_(lookup), shared_(std::make_shared<Shared>()) {
  shared_->loop = &loop;
}

HostResolver::~HostResolver() {
  std::lock_guard lock(shared_->mu);
  shared_->loop = nullptr;
  shared_->stopping = true;
  shared_->jobs.clear();
  shared_->wake.notify_all();
}

StatusOr<std::vector<SocketAddress>> HostResolver::ResolveBlocking(const std::string& host,
                                                                   const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* results = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &results);
  if (rc != 0 || results == nullptr) {
    return UnavailableError("cannot resolve " + host + ":" + port + ": " +
                            (rc == EAI_SYSTEM ? std::string("system error") : ::gai_strerror(rc)));
  }
  std::vector<SocketAddress> addresses;
  for (const addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
    SocketAddress address = SocketAddress::FromSockaddr(ai->ai_addr, ai->ai_addrlen);
    // AI_ADDRCONFIG and /etc/hosts can repeat an address.
    bool seen = false;
    for (const SocketAddress& kept : addresses) seen = seen || kept == address;
    if (!seen) addresses.push_back(address);
  }
  ::freeaddrinfo(results);
  return addresses;
}

Task<StatusOr<std::vector<SocketAddress>>> HostResolver::Resolve(std::string host,
                                                                 std::string port) {
  const std::string literal =
      host.find(':') != std::string::npos ? "[" + host + "]:" + port : host + ":" + port;
  if (StatusOr<SocketAddress> address = SocketAddress::Parse(literal); address.ok()) {
    co_return std::vector<SocketAddress>{*address};
  }
  auto request = std::make_shared<Request>(loop_);
  {
    std::lock_guard lock(shared_->mu);
    shared_->jobs.push_back([shared = shared_, lookup = lookup_, request, host, port] {
      StatusOr<std::vector<SocketAddress>> result = lookup(host, port);
      std::lock_guard lock(shared->mu);
      if (shared->loop == nullptr) return;  // the resolver is gone
      shared->loop->Post([request, result = std::move(result)]() mutable {
        request->result = std::move(result);
        request->done.Set();
      });
    });
    if (!std::exchange(shared_->worker_started, true)) {
      std::thread([shared = shared_] {
        std::unique_lock lock(shared->mu);
        while (true) {
          shared->wake.wait(lock, [&] { return shared->stopping || !shared->jobs.empty(); });
          if (shared->stopping) return;
          std::function<void()> job = std::move(shared->jobs.front());
          shared->jobs.pop_front();
          lock.unlock();
          job();
          lock.lock();
        }
      }).detach();
    }
    shared_->wake.notify_one();
  }
  const Status waited = co_await request->done.Wait();
  if (!waited.ok()) co_return waited;
  co_return std::move(request->result);
}

}  // namespace uxds
