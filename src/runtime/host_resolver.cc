#include "runtime/host_resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace uxds {

// One lookup's meeting point on the loop thread. The awaiting task owns it; a
// posted result reaches it through a weak pointer, so a task that is done
// waiting (and its frame) is never touched again. It links itself into the
// resolver's waiting list; the resolver's destructor unlinks it and records
// its end here, so neither side reads the other once it is gone.
struct HostResolver::Request {
  explicit Request(HostResolver& r) : done(r.loop_), resolver(&r) { r.waiting_.push_back(this); }
  ~Request() {
    if (resolver != nullptr) std::erase(resolver->waiting_, this);
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // The first of the lookup's result and the resolver's end is kept.
  void Finish(StatusOr<std::vector<SocketAddress>> r) {
    if (done.is_set()) return;
    result = std::move(r);
    done.Set();
  }

  Event done;
  StatusOr<std::vector<SocketAddress>> result = UnavailableError("not resolved");
  HostResolver* resolver;  // nullptr once the resolver is gone
};

// What the resolver shares with its workers; each worker holds it, and the
// last one out frees it. `loop` is cleared (under `mu`) when the resolver
// goes, and a worker posts only under `mu` with `loop` set: the loop outlives
// the resolver, so nothing is ever posted to a loop that is gone.
struct HostResolver::Pool {
  struct Job {
    std::string host;
    std::string port;
    // Expired once the awaiting task is done: a lookup not started yet is
    // then skipped.
    std::weak_ptr<Request> request;
  };

  Pool(Loop& loop, Lookup lookup) : lookup(std::move(lookup)), loop(&loop) {}

  // Queues `job` and starts a worker unless an idle one is left for it.
  // Fails only when no worker exists and none can be started.
  static Status Submit(const std::shared_ptr<Pool>& pool, Job job);
  // A worker's thread: runs jobs until the resolver goes or it has been idle
  // for kWorkerIdleTime.
  static void Work(std::shared_ptr<Pool> pool);

  const Lookup lookup;
  std::mutex mu;
  std::condition_variable wake;
  Loop* loop;            // guarded by mu
  std::deque<Job> jobs;  // guarded by mu
  int workers = 0;       // guarded by mu: threads in Work()
  int idle = 0;          // guarded by mu: workers waiting for a job
};

Status HostResolver::Pool::Submit(const std::shared_ptr<Pool>& pool, Job job) {
  std::lock_guard lock(pool->mu);
  pool->jobs.push_back(std::move(job));
  // An idle worker that was notified but has not woken yet still counts as
  // idle, and is already claimed by a job ahead in the queue: compare with
  // the queue's length, not with zero.
  if (static_cast<int>(pool->jobs.size()) > pool->idle && pool->workers < kMaxWorkers) {
    try {
      std::thread(&Pool::Work, pool).detach();
      ++pool->workers;
    } catch (const std::system_error& e) {
      // Out of threads: a running worker takes the job once it is free.
      if (pool->workers == 0) {
        pool->jobs.pop_back();
        return UnavailableError(std::string("cannot start a host resolver thread: ") + e.what());
      }
    }
  }
  pool->wake.notify_one();
  return OkStatus();
}

void HostResolver::Pool::Work(std::shared_ptr<Pool> pool) {
  std::unique_lock lock(pool->mu);
  while (true) {
    ++pool->idle;
    const bool has_work = pool->wake.wait_for(
        lock, kWorkerIdleTime, [&] { return pool->loop == nullptr || !pool->jobs.empty(); });
    --pool->idle;
    if (!has_work || pool->loop == nullptr) break;
    Job job = std::move(pool->jobs.front());
    pool->jobs.pop_front();
    if (job.request.expired()) continue;
    lock.unlock();
    StatusOr<std::vector<SocketAddress>> result = pool->lookup(job.host, job.port);
    lock.lock();
    if (pool->loop == nullptr) break;  // the resolver is gone: the result is dropped
    pool->loop->Post([request = std::move(job.request), result = std::move(result)]() mutable {
      if (std::shared_ptr<Request> r = request.lock()) r->Finish(std::move(result));
    });
  }
  --pool->workers;
}

HostResolver::HostResolver(Loop& loop, Lookup lookup)
    : loop_(loop), pool_(std::make_shared<Pool>(loop, std::move(lookup))) {}

HostResolver::~HostResolver() {
  {
    std::lock_guard lock(pool_->mu);
    pool_->loop = nullptr;
    pool_->jobs.clear();
  }
  pool_->wake.notify_all();
  // Every task still waiting resumes on a later turn, with CANCELLED unless
  // its result came first; from its request alone, never from this resolver.
  for (Request* request : std::exchange(waiting_, {})) {
    request->resolver = nullptr;
    request->Finish(CancelledError("host resolver destroyed"));
  }
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
  auto request = std::make_shared<Request>(*this);
  Status submitted = Pool::Submit(pool_, Pool::Job{std::move(host), std::move(port), request});
  if (!submitted.ok()) co_return submitted;
  const Status waited = co_await request->done.Wait();
  // This resolver may be gone by now: only `request` is read from here on.
  if (!waited.ok()) co_return waited;
  co_return std::move(request->result);
}

}  // namespace uxds
