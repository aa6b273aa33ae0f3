// When io_uring cannot be set up (here: a seccomp filter makes io_uring_setup
// fail with EPERM, as container runtimes do), Loop::Create falls back to
// epoll and says so in one log line; forced to io_uring, it fails naming the
// syscall and the cause.
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <string>

#include "runtime/tcp_socket.h"
#include "uxds/log.h"
#include "uxds/loop.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;

bool DenyIoUringSetup() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Runs `body` in a forked child whose io_uring_setup fails with EPERM, and
// returns what it wrote.
std::string RunWithoutIoUring(const std::function<std::string()>& body) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(pipefd[0]);
    std::string message = "could not install the seccomp filter";
    if (DenyIoUringSetup()) message = body();
    ssize_t n = write(pipefd[1], message.data(), message.size());
    (void)n;
    _exit(0);
  }
  close(pipefd[1]);
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got;
}

TEST(IoUringUnavailableTest, ForcedIoUringFailsNamingTheSyscallAndCause) {
  std::string got = RunWithoutIoUring([] {
    setenv("UXDS_RUNTIME", "io_uring", 1);
    auto loop = Loop::Create();
    return loop.ok() ? std::string("created a loop") : loop.status().ToString();
  });
  EXPECT_EQ(got.rfind("UNAVAILABLE: io_uring_setup: Operation not permitted (EPERM): io_uring is "
                      "not available here",
                      0),
            0u)
      << got;
}

// The fallback loop is a working one: a connection over loopback carries a
// message both ways, and a timer fires.
Task<std::string> RoundTrip(Loop& loop) {
  auto listener = TcpListener::Bind(loop, SocketAddress::Loopback4(0));
  if (!listener.ok()) co_return listener.status().ToString();
  auto client = co_await TcpSocket::Connect(loop, (*listener)->local_address(), 5s);
  auto server = co_await (*listener)->Accept();
  if (!client.ok() || !server.ok()) co_return "connect or accept failed";
  std::vector<uint8_t> ping = {'p', 'i', 'n', 'g'};
  if (!(co_await (*client)->Write(ping)).ok()) co_return "write failed";
  std::vector<uint8_t> buf(16);
  auto n = co_await (*server)->Read(buf);
  if (!n.ok()) co_return n.status().ToString();
  if (!(co_await SleepFor(loop, 2ms)).ok()) co_return "sleep failed";
  co_return std::string(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(*n));
}

TEST(IoUringUnavailableTest, CreateFallsBackToEpollAndLogsWhy) {
  std::string got = RunWithoutIoUring([] {
    unsetenv("UXDS_RUNTIME");
    std::string logged;
    SetLogSink([&logged](LogSeverity severity, std::string_view message) {
      logged += std::string(LogSeverityName(severity)) + " " + std::string(message) + "\n";
    });
    auto loop = Loop::Create();
    if (!loop.ok()) return loop.status().ToString();
    std::string backend = RuntimeBackendName((*loop)->backend());
    std::string echoed = (*loop)->BlockOn(RoundTrip(**loop));
    SetLogSink({});
    return backend + "|" + echoed + "|" + logged;
  });
  EXPECT_EQ(got,
            "epoll|ping|WARNING uxds: runtime: epoll (fallback, io_uring_setup: Operation not "
            "permitted (EPERM): io_uring is not available here (a kernel without it, a seccomp "
            "profile that blocks the io_uring_setup syscall, or kernel.io_uring_disabled))\n");
}

}  // namespace
}  // namespace uxds
