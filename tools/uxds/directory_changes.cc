#include "directory_changes.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <climits>  // NAME_MAX
#include <cstdint>
#include <cstring>

namespace uxds::tool {
namespace {

// What changes what DIR serves: a file written and closed, renamed in or
// out, created, deleted, or its times or mode changed (touch, chmod). A
// write still in progress (IN_MODIFY) counts too, so that a file written
// without a rename and never closed is still read again; the settling
// in Wait() keeps a burst of writes to one reload.
constexpr uint32_t kChangeEvents =
    IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB;
// The watch ends with the directory itself: deleted, moved away (DIR then
// names another directory, or none), or unmounted.
constexpr uint32_t kWatchEnds = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED;

}  // namespace

DirectoryChanges::DirectoryChanges(std::string dir, std::chrono::milliseconds poll_interval)
    : dir_(std::move(dir)), poll_interval_(poll_interval) {
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  TryWatch();
}

DirectoryChanges::~DirectoryChanges() {
  StopWatching();
  if (stop_fd_ >= 0) close(stop_fd_);
}

void DirectoryChanges::TryWatch() {
  if (stop_fd_ < 0) return;  // without a way to stop a wait, only poll
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ < 0) return;
  if (inotify_add_watch(inotify_fd_, dir_.c_str(), kChangeEvents | kWatchEnds | IN_ONLYDIR) < 0) {
    StopWatching();
  }
}

void DirectoryChanges::StopWatching() {
  if (inotify_fd_ >= 0) close(inotify_fd_);
  inotify_fd_ = -1;
}

void DirectoryChanges::Stop() {
  stopped_.store(true);
  if (stop_fd_ < 0) return;
  const uint64_t one = 1;
  // Fails only if the counter would overflow: it is readable either way.
  [[maybe_unused]] ssize_t written = write(stop_fd_, &one, sizeof(one));
}

int DirectoryChanges::WaitReadable(int timeout_ms) {
  pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const nfds_t count = inotify_fd_ >= 0 ? 2 : 1;
  int ready;
  // The tool blocks its signals on every thread (sigwait takes them), so
  // an interrupted wait is rare; it starts over.
  do {
    ready = poll(fds, count, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return -1;  // cannot wait at all: stop rather than spin
  if (ready == 0) return 0;
  if (fds[0].revents != 0) return -1;
  return 1;
}

bool DirectoryChanges::Drain() {
  // Events are read and dropped: the fingerprint says what changed. The
  // buffer holds at least one event with the longest name.
  alignas(inotify_event) char buffer[16 * (sizeof(inotify_event) + NAME_MAX + 1)];
  bool watch_ended = false;
  while (true) {
    const ssize_t got = read(inotify_fd_, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EAGAIN: drained (an error: nothing more to read)
    size_t offset = 0;
    while (offset + sizeof(inotify_event) <= static_cast<size_t>(got)) {
      inotify_event event;
      std::memcpy(&event, buffer + offset, sizeof(event));
      if ((event.mask & kWatchEnds) != 0) watch_ended = true;
      offset += sizeof(inotify_event) + event.len;
    }
  }
  return !watch_ended;
}

bool DirectoryChanges::Wait() {
  if (stopped_.load()) return false;
  if (inotify_fd_ < 0) {
    const int ready = WaitReadable(static_cast<int>(poll_interval_.count()));
    if (ready < 0 || stopped_.load()) return false;
    // Look again each time: the directory may exist again, or inotify may
    // have room now.
    TryWatch();
    return true;
  }
  // Watching: no timeout at all.
  if (WaitReadable(-1) < 0) return false;
  const auto settled_by = std::chrono::steady_clock::now() + kMaxSettle;
  while (true) {
    if (!Drain()) {
      StopWatching();
      TryWatch();  // DIR may already name a directory again
      return true;
    }
    if (std::chrono::steady_clock::now() >= settled_by) return true;
    const int ready = WaitReadable(static_cast<int>(kSettle.count()));
    if (ready < 0) return false;
    if (ready == 0) return true;
  }
}

}  // namespace uxds::tool
