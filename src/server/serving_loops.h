// ServingLoops: the loop threads a server serves on (one listening socket
// and its connections each), and the one way its owner's loop waits for
// work it hands them: RunOnEach.
//
//   auto loops = ServingLoops::Start(2);
//   co_await RunOnEach(home, (*loops)->loops(), [&](size_t i) { return Stop(i); });
//
// The threads are the server's; a task run on loop i owns what it tears
// down there (a listener is destroyed on the loop that serves it).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds::server {

class ServingLoops {
 public:
  // Starts `count` (>= 1) loop threads.
  static StatusOr<std::unique_ptr<ServingLoops>> Start(size_t count);
  // Stops and joins every thread (each Loop is destroyed on its own).
  ~ServingLoops();
  ServingLoops(const ServingLoops&) = delete;
  ServingLoops& operator=(const ServingLoops&) = delete;

  size_t size() const { return loops_.size(); }
  Loop& loop(size_t i) { return *loops_[i]; }
  // Runs `fn` on loop i's thread and waits for it (not from loop i).
  void RunSync(size_t i, std::function<void()> fn) { threads_[i]->RunSync(std::move(fn)); }
  const std::vector<Loop*>& loops() const { return loops_; }

 private:
  ServingLoops() = default;
  std::vector<std::unique_ptr<LoopThread>> threads_;
  std::vector<Loop*> loops_;
};

// How a server's connections reach its loops: each loop has a listening
// socket of its own on the shared port (SO_REUSEPORT), and the kernel picks
// one for each connection by a hash of its addresses, so accepting costs no
// loop a hop. Measured against one acceptor handing connections to the
// loops in turn (bench/accept_spread_server with
// tools/dev/accept_spread_compare.py; figures in docs/performance.md): on 2
// loops the acceptor was never faster, 0.86 to 1.00 of SO_REUSEPORT's
// requests/s under h2load 100x10, 4x64 and 2x64 on both backends. h2load
// opens its connections before it measures, so what differed was the
// spread (exact turns against the kernel's hash), and an even spread of a
// few connections bought nothing; the acceptor's own cost, a hop to another
// loop per connection, would only add to that for short connections. Many
// cores with a few long-lived connections each could weigh the other way:
// the hand-over itself is in the library (http2::Server::ServeAccepted)
// should a measurement there say so.
//
// The most loops a server takes: more is INVALID_ARGUMENT (a clear error
// rather than threads the process cannot start).
inline constexpr size_t kMaxServingLoops = 1024;

// A server's `loops` option: 0 means one loop per CPU (at most
// kMaxServingLoops).
size_t LoopCountFor(size_t requested);

// What each of `loops` loops gets of a request memory budget: an even
// share (the budget is loop-confined), but never less than two of the
// largest request messages (or the whole budget, if smaller), so that a
// server on many loops still takes a request of the size it allows
// without ending it for memory. 0 (no budget) stays 0.
size_t LoopShareOfBudget(size_t budget, size_t loops, size_t max_receive_message_size);

// On `home`'s thread: starts `make_task(i)` on `loops[i]` (called there),
// for every i, and returns on `home` once every one of them has ended.
// What the tasks did is visible to the caller when it returns. Await it
// from a task that is not cancelled (a ShutdownOnce teardown): a cancelled
// wait returns early, leaving the tasks running. The loops must run until
// their tasks end. Each task starts after whatever was posted to its loop
// before (Loop::Post runs closures in the order they were posted).
Task<void> RunOnEach(Loop& home, std::vector<Loop*> loops,
                     std::function<Task<void>(size_t)> make_task);

}  // namespace uxds::server
