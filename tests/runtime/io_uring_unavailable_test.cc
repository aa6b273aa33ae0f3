// When io_uring cannot be set up (here: a seccomp filter makes io_uring_setup
// fail with EPERM, as container runtimes do), Loop::Create names the syscall
// and the cause instead of crashing.
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

#include "uxds/loop.h"

namespace uxds {
namespace {

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

TEST(IoUringUnavailableTest, CreateFailsNamingTheSyscallAndCause) {
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    std::string message = "could not install the seccomp filter";
    if (DenyIoUringSetup()) {
      auto loop = Loop::Create();
      message = loop.ok() ? "created a loop" : loop.status().ToString();
    }
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
  EXPECT_EQ(got.rfind("UNAVAILABLE: io_uring_setup: Operation not permitted (EPERM): io_uring is "
                      "not available here",
                      0),
            0u)
      << got;
}

}  // namespace
}  // namespace uxds
