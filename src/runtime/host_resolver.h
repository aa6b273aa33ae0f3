// HostResolver: getaddrinfo off the loop. A lookup of a host name can block
// for seconds (a slow or unreachable DNS server); the control loop must not,
// and neither must the other lookups. Each lookup runs on one of a few worker
// threads and posts its result back to the loop, where the awaiting task
// resumes.
//
//   HostResolver resolver(loop);
//   StatusOr<std::vector<SocketAddress>> addresses =
//       co_await resolver.Resolve("xds.example.com", "443");
//
// Workers: at most kMaxWorkers threads per resolver, started on demand when a
// lookup finds no idle one; a worker idle for kWorkerIdleTime exits. Bounded
// because getaddrinfo holds a whole thread for as long as the DNS server
// takes: unbounded, a burst of names behind a dead server would start a
// thread each. Four, because a process resolves a handful of names (xDS
// server URIs, LOGICAL_DNS clusters, LRS servers): four slow lookups at once
// already mean DNS itself is failing, and later ones wait in a queue, in
// order, for the first free worker.
//
// Loop-thread only, except the workers. Destroying the resolver (before its
// loop) ends every wait: a task still awaiting Resolve() resumes with
// CANCELLED (or with its result, if that had arrived). Queued lookups are
// dropped; running ones end on their worker and are dropped there: nothing
// reaches the loop any more. Workers are detached, so the destructor never
// waits for a slow lookup.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/socket_address.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds {

class HostResolver {
 public:
  static constexpr int kMaxWorkers = 4;
  static constexpr std::chrono::seconds kWorkerIdleTime{10};

  // Runs on the workers, several at once; tests may give one that blocks on
  // purpose. It must not touch the loop.
  using Lookup = std::function<StatusOr<std::vector<SocketAddress>>(const std::string& host,
                                                                    const std::string& port)>;
  explicit HostResolver(Loop& loop, Lookup lookup = &ResolveBlocking);
  ~HostResolver();
  HostResolver(const HostResolver&) = delete;
  HostResolver& operator=(const HostResolver&) = delete;

  // Every address of `host` (IPv4 and IPv6, in getaddrinfo's order, which
  // follows RFC 6724), with `port`. An IP literal is returned at once,
  // without a lookup. UNAVAILABLE when the name does not resolve; CANCELLED
  // when the awaiting task is cancelled first (a lookup not started yet is
  // then skipped; a running one ends on its worker and is dropped), or when
  // the resolver is destroyed first.
  Task<StatusOr<std::vector<SocketAddress>>> Resolve(std::string host, std::string port);

  // The blocking lookup the workers run.
  static StatusOr<std::vector<SocketAddress>> ResolveBlocking(const std::string& host,
                                                              const std::string& port);

 private:
  struct Pool;
  struct Request;
  Loop& loop_;
  std::shared_ptr<Pool> pool_;
  // Requests whose task may still wait: the destructor ends their waits.
  std::vector<Request*> waiting_;
};

}  // namespace uxds
