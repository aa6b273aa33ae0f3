#include "runtime/epoll_poller.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "uxds/log.h"

namespace uxds::detail {

StatusOr<std::unique_ptr<EpollPoller>> EpollPoller::Create(Loop& loop, int wake_fd) {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return ErrnoToStatus(errno, "epoll_create1");
  // The eventfd is level-triggered: the loop drains it on every wake-up, and
  // a Post() written between the drain and the next wait must still wake.
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
    Status s = ErrnoToStatus(errno, "epoll_ctl(ADD eventfd)");
    close(epoll_fd);
    return s;
  }
  return std::unique_ptr<EpollPoller>(new EpollPoller(loop, epoll_fd, wake_fd));
}

EpollPoller::EpollPoller(Loop& loop, int epoll_fd, int wake_fd)
    : loop_(loop), epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

EpollPoller::~EpollPoller() { close(epoll_fd_); }

void EpollPoller::Wait(int64_t timeout_ns) {
  std::array<epoll_event, 128> events;
  int n;
  if (timeout_ns > 0 && has_epoll_pwait2_) {
    // epoll_pwait2 (Linux 5.11) keeps the timer heap's nanosecond deadlines.
    timespec ts{};
    ts.tv_sec = timeout_ns / 1'000'000'000;
    ts.tv_nsec = timeout_ns % 1'000'000'000;
    n = epoll_pwait2(epoll_fd_, events.data(), static_cast<int>(events.size()), &ts, nullptr);
    if (n < 0 && errno == ENOSYS) {
      has_epoll_pwait2_ = false;
      n = 0;
    }
  } else {
    int timeout_ms = -1;
    if (timeout_ns == 0) {
      timeout_ms = 0;
    } else if (timeout_ns > 0) {
      // Rounded up: waking before the deadline would only spin.
      timeout_ms =
          static_cast<int>(std::min<int64_t>((timeout_ns + 999'999) / 1'000'000, 24 * 3600 * 1000));
    }
    n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
  }
  if (n < 0) {
    if (errno != EINTR)
      Log(LogSeverity::kError, std::string("uxds: epoll_wait: ") + strerror(errno));
    return;
  }
  for (int i = 0; i < n; ++i) {
    if (events[i].data.ptr == nullptr) {
      uint64_t value;
      ssize_t r = read(wake_fd_, &value, sizeof value);
      (void)r;
      continue;
    }
    static_cast<FdWatch*>(events[i].data.ptr)->OnEvents(events[i].events);
  }
}

FdWatch::FdWatch(EpollPoller& poller, int fd)
    : loop_(poller.loop()), epoll_fd_(poller.epoll_fd()), fd_(fd) {
  epoll_event ev{};
  // Readable, writable, peer shutdown; errors and hang-ups are always on.
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = this;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd_, &ev) != 0) {
    registration_error_ = errno;
  } else {
    registered_ = true;
  }
}

FdWatch::~FdWatch() {
  Unregister();
  assert(reader_ == nullptr && writer_ == nullptr);
}

void FdWatch::Unregister() {
  if (registered_) {
    // Explicitly: closing the descriptor would not remove it while a forked
    // child still holds a copy, and its events would name a freed FdWatch.
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_, nullptr);
    registered_ = false;
  }
  if (registration_error_ == 0) registration_error_ = ECANCELED;
  Wake(Direction::kRead, -ECANCELED);
  Wake(Direction::kWrite, -ECANCELED);
}

void FdWatch::OnEvents(uint32_t events) {
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) Wake(Direction::kRead, 0);
  if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) Wake(Direction::kWrite, 0);
}

void FdWatch::Wake(Direction direction, int result) {
  if (Waiter* w = std::exchange(Slot(direction), nullptr)) w->Resume(result);
}

bool FdWatch::Waiter::Suspend(std::coroutine_handle<> h, CancelState* cancel) {
  if (cancel != nullptr && cancel->cancelled()) {
    result_ = -ECANCELED;
    return false;
  }
  if (!watch_.registered_) {
    result_ = -watch_.registration_error_;
    return false;
  }
  assert(watch_.Slot(direction_) == nullptr && "one waiter per direction");
  handle_ = h;
  watch_.Slot(direction_) = this;
  if (cancel != nullptr) cancel->Register(this);
  return true;
}

void FdWatch::Waiter::Resume(int result) {
  result_ = result;
  Unregister();
  watch_.loop_.Schedule(handle_);
}

void FdWatch::Waiter::OnCancel() {
  watch_.Slot(direction_) = nullptr;
  result_ = -ECANCELED;
  watch_.loop_.Schedule(handle_);
}

}  // namespace uxds::detail
