// The epoll backend's wait for a non-blocking connect (tcp_socket_epoll.cc),
// apart from TcpSocket so that a test can drive it with a socket of its own.
#pragma once

#include "uxds/loop.h"
#include "uxds/task.h"

namespace uxds::detail {

// Waits until the connect in progress on `fd` (connect() said EINPROGRESS)
// ends: 0 once connected, else its errno. ETIMEDOUT once `deadline` has
// passed, whatever woke the wait in the same turn; ECANCELED when the task is
// cancelled.
Task<int> AwaitEpollConnect(Loop& loop, int fd, Loop::Clock::time_point deadline);

}  // namespace uxds::detail
