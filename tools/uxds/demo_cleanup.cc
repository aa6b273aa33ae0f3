#include "demo_cleanup.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace uxds::tool {

DemoCleanup& DemoCleanup::Get() {
  static DemoCleanup* cleanup = new DemoCleanup();  // never destroyed: used up to _exit
  return *cleanup;
}

void DemoCleanup::AddChild(pid_t pid) {
  std::lock_guard lock(mutex_);
  // Started while the demo stops: it goes at once.
  if (stopping_) {
    kill(pid, SIGKILL);
    return;
  }
  children_.insert(pid);
}

void DemoCleanup::RemoveChild(pid_t pid) {
  std::lock_guard lock(mutex_);
  children_.erase(pid);
}

void DemoCleanup::SetScratchDir(const std::string& path) {
  std::lock_guard lock(mutex_);
  scratch_dir_ = path;
}

void DemoCleanup::StopAllAndExit(int exit_code) {
  std::set<pid_t> children;
  std::string scratch_dir;
  {
    std::unique_lock lock(mutex_);
    if (stopping_) {
      // The first caller exits the process; this thread waits for that.
      lock.unlock();
      while (true) pause();
    }
    stopping_ = true;
    stopping_flag_.store(true);
    children = children_;
    scratch_dir = scratch_dir_;
  }
  for (const pid_t pid : children) kill(pid, SIGTERM);
  // Reaped here, so that none is left a zombie of a process that is gone.
  const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  while (!children.empty()) {
    for (auto it = children.begin(); it != children.end();) {
      const pid_t reaped = waitpid(*it, nullptr, WNOHANG);
      // ECHILD: the demo's own thread reaped it already.
      it = reaped == *it || (reaped < 0 && errno == ECHILD) ? children.erase(it) : std::next(it);
    }
    if (children.empty() || std::chrono::steady_clock::now() >= deadline) break;
    usleep(10'000);
  }
  for (const pid_t pid : children) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (!scratch_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_dir, ignored);
  }
  std::fflush(stderr);
  _exit(exit_code);
}

DemoStopWatcher::DemoStopWatcher(const sigset_t& signals) {
  const int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this, signal_fd] { Watch(signal_fd); });
}

DemoStopWatcher::~DemoStopWatcher() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) std::perror("uxds demo: eventfd");
  thread_.join();
  close(wake_fd_);
}

void DemoStopWatcher::Watch(int signal_fd) {
  // events 0 on stdout: only POLLERR (the pipe's reader is gone) or POLLHUP
  // come back; POLLNVAL (stdout closed) stops watching it, the failed
  // writes tell.
  pollfd fds[3] = {{wake_fd_, POLLIN, 0}, {signal_fd, POLLIN, 0}, {STDOUT_FILENO, 0, 0}};
  while (true) {
    const int ready = poll(fds, 3, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (fds[0].revents & POLLIN)) break;
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info{};
      if (read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        const int sig = static_cast<int>(info.ssi_signo);
        std::fprintf(stderr, "uxds demo: %s: stopping the control plane and the servers\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM");
        DemoCleanup::Get().StopAllAndExit(128 + sig);
      }
    }
    if (fds[2].revents & POLLNVAL) fds[2].fd = -1;
    if (fds[2].revents & (POLLERR | POLLHUP)) {
      std::fprintf(stderr,
                   "uxds demo: stdout closed: stopping the control plane and the servers\n");
      DemoCleanup::Get().StopAllAndExit(1);
    }
  }
  close(signal_fd);
}

}  // namespace uxds::tool
