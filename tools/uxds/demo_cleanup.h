// What `uxds demo` leaves running or on disk (its child processes, its
// temporary directory), kept where any thread can end it: however the demo
// ends (SIGINT, SIGTERM, its stdout's reader going away, a failed write),
// its control plane and servers stop and its directory goes with it.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "commands.h"

namespace uxds::tool {

class DemoCleanup {
 public:
  // How long a child has after SIGTERM before SIGKILL.
  static constexpr std::chrono::milliseconds kStopGrace{700};

  static DemoCleanup& Get();

  void AddChild(pid_t pid);
  // Before the child is reaped (its pid may be reused after).
  void RemoveChild(pid_t pid);
  void SetScratchDir(const std::string& path);

  // Stops every child (SIGTERM, SIGKILL after kStopGrace), reaps them,
  // removes the directory, and exits the process with `exit_code`. From any
  // thread; a second caller waits for the first one's exit.
  [[noreturn]] void StopAllAndExit(int exit_code);
  // While another thread stops everything, the demo's own thread waits here
  // for the exit instead of reporting the children it sees go.
  void PauseIfStopping() {
    if (stopping_flag_.load()) StopAllAndExit(kExitRuntimeError);
  }

 private:
  std::mutex mutex_;
  std::set<pid_t> children_;
  std::string scratch_dir_;
  bool stopping_ = false;
  std::atomic<bool> stopping_flag_{false};
};

// A thread that takes SIGINT and SIGTERM (blocked on every thread before it
// starts: `signals`) and notices when stdout's reader goes away (a pipe
// whose reader exited: `uxds demo | head -1`); either ends the demo through
// DemoCleanup. Stops watching when destroyed.
class DemoStopWatcher {
 public:
  explicit DemoStopWatcher(const sigset_t& signals);
  ~DemoStopWatcher();
  DemoStopWatcher(const DemoStopWatcher&) = delete;
  DemoStopWatcher& operator=(const DemoStopWatcher&) = delete;

 private:
  void Watch(int signal_fd);

  int wake_fd_ = -1;  // an eventfd: written by the destructor
  std::thread thread_;
};

}  // namespace uxds::tool
