// AcceptPause: what a server's accept loop does when it cannot take a
// connection, so that a connection flood neither spins the loop nor fills
// the log.
//  - An accept that fails (EMFILE, ENFILE: the process or the system is out
//    of descriptors; ENOBUFS, ENOMEM) pauses accepting until one of the
//    server's connections ends (freeing a descriptor) or kAcceptPause has
//    passed; the kernel keeps the waiting connections in the listen backlog.
//  - A connection refused at max_connections is closed at once.
// Each logs one warning line when it begins and one when accepting works
// again, at most once per kLogInterval.
//
// Loop thread only. The owner calls ConnectionEnded() whenever one of its
// connections ends, and joins its accept task before destroying this.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "uxds/async_condition.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds {

class AcceptPause {
 public:
  static constexpr std::chrono::milliseconds kAcceptPause{100};
  static constexpr std::chrono::seconds kLogInterval{10};

  // `server` names the listener in the log ("server on 127.0.0.1:8080").
  AcceptPause(Loop& loop, std::string server)
      : loop_(loop), server_(std::move(server)), ended_(loop) {}

  // An accept failed with `error`: logs (once per episode) and waits until a
  // connection ends or kAcceptPause passes. CANCELLED if the task is.
  Task<Status> AfterAcceptError(const Status& error);
  // A connection was refused because `limit` connections are served.
  void Refused(size_t limit);
  // A connection was accepted and is served: an episode ends.
  void Accepted();
  // One of the server's connections ended: wakes a paused accept.
  void ConnectionEnded() { ended_.NotifyAll(); }

  // Accept errors and refusals since creation (for tests and metrics).
  uint64_t accept_errors() const { return accept_errors_; }

 private:
  bool MayLog();

  Loop& loop_;
  const std::string server_;
  AsyncCondition ended_;
  enum class Episode { kNone, kAcceptFailing, kAtLimit };
  Episode episode_ = Episode::kNone;
  bool episode_logged_ = false;
  Loop::Clock::time_point last_log_{};
  bool logged_before_ = false;
  uint64_t accept_errors_ = 0;
};

}  // namespace uxds
