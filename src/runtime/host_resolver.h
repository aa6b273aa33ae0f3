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
// loop) detaches the worker: a lookup still running then is dropped when it
// returns, and nothing reaches the loop any more.
#pragma once

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
  using Lookup = StatusOr<std::vector<SocketAddress>> (*)(const std::string& host,
                                                          const std::string& port);
  // `lookup` runs on the worker; tests may give one that blocks on purpose.
  explicit HostResolver(Loop& loop, Lookup lookup = &ResolveBlocking);
  ~HostResolver();
  HostResolver(const HostResolver&) = delete;
  HostResolver& operator=(const HostResolver&) = delete;

  // Every address of `host` (IPv4 and IPv6, in getaddrinfo's order, which
  // follows RFC 6724), with `port`. An IP literal is returned at once,
  // without a lookup. UNAVAILABLE when the name does not resolve; CANCELLED
  // when the awaiting task is cancelled first (the lookup then runs to its
  // end on the worker and is dropped).
  Task<StatusOr<std::vector<SocketAddress>>> Resolve(std::string host, std::string port);

  // The blocking lookup the worker runs.
  static StatusOr<std::vector<SocketAddress>> ResolveBlocking(const std::string& host,
                                                              const std::string& port);

 private:
  struct Shared;
  struct Request;
  Loop& loop_;
  const Lookup lookup_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace uxds
