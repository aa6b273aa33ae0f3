// HostResolver: getaddrinfo off the loop. A lookup of a host name can block
// for seconds (a slow or unreachable DNS server); the control loop must not.
// One worker thread per resolver runs the lookups in order and posts each
// result back to the loop, where the awaiting task resumes.
//
//   HostResolver resolver(loop);
//   StatusOr<std::vector<SocketAddress>> addresses =
//       co_await resolver.Resolve("xds.example.com", "443");
//
// Loop-thread only, except the worker. Destroying the resolver (before its
// loop) ends every wait: a task still awaiting Resolve() resumes with
// CANCELLED (or with its result, if that had arrived). Queued lookups are
// dropped; a running one ends on the worker and is dropped there: nothing
// reaches the loop any more. The worker is detached, so the destructor never
// waits for a slow lookup.
#pragma once

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
  // Lookups run in order on one worker.
  static constexpr int kMaxWorkers = 1;

  // Runs on the worker; tests may give one that blocks on purpose. It must
  // not touch the loop.
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
  // then skipped; a running one ends on the worker and is dropped), or when
  // the resolver is destroyed first.
  Task<StatusOr<std::vector<SocketAddress>>> Resolve(std::string host, std::string port);

  // The blocking lookup the worker runs.
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
