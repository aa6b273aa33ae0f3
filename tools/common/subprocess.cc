#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace uxds {

Subprocess Subprocess::Start(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& extra_env, bool pipe_stdin,
                             const std::string& stderr_file) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  int stdin_pipe[2] = {-1, -1};
  if (pipe_stdin && pipe2(stdin_pipe, O_CLOEXEC) != 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
  if (pipe_stdin) posix_spawn_file_actions_adddup2(&actions, stdin_pipe[0], STDIN_FILENO);
  if (!stderr_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  }

  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    // Peers are not ours to sanitize: keep ASan's runtime out of them.
    if (key == "LD_PRELOAD") continue;
    if (extra_env.count(key) == 0) env_storage.push_back(entry);
  }
  for (const auto& [k, v] : extra_env) env_storage.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  Subprocess p;
  int rc = posix_spawnp(&p.pid_, cargv[0], &actions, nullptr, cargv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipefd[1]);
  if (pipe_stdin) close(stdin_pipe[0]);
  if (rc != 0) {
    close(pipefd[0]);
    if (pipe_stdin) close(stdin_pipe[1]);
    throw std::runtime_error("posix_spawnp " + argv[0] + ": " + std::strerror(rc));
  }
  p.stdout_fd_ = pipefd[0];
  p.stdin_fd_ = stdin_pipe[1];
  return p;
}

Subprocess::Subprocess(Subprocess&& o) noexcept { *this = std::move(o); }
Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  std::swap(pid_, o.pid_);
  std::swap(stdout_fd_, o.stdout_fd_);
  std::swap(stdin_fd_, o.stdin_fd_);
  std::swap(buffer_, o.buffer_);
  std::swap(lines_, o.lines_);
  std::swap(exit_code_, o.exit_code_);
  return *this;
}

Subprocess::~Subprocess() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (pid_ > 0 && !exit_code_) {
    kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::optional<std::string> Subprocess::ReadLine(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // A zero timeout still looks once at what the child has written.
  bool looked = false;
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      lines_.push_back(line);
      return line;
    }
    if (stdout_fd_ < 0) return std::nullopt;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 && looked) return std::nullopt;
    looked = true;
    pollfd pfd{stdout_fd_, POLLIN, 0};
    int r = poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) {
      close(stdout_fd_);
      stdout_fd_ = -1;
      if (!buffer_.empty()) {
        std::string line = std::move(buffer_);
        buffer_.clear();
        lines_.push_back(line);
        return line;
      }
      return std::nullopt;
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

bool Subprocess::WriteLine(const std::string& line) {
  if (stdin_fd_ < 0) return false;
  const std::string data = line + "\n";
  size_t written = 0;
  while (written < data.size()) {
    // A child that stopped reading gives EPIPE (or SIGPIPE, unless the
    // caller ignores it).
    const ssize_t n = write(stdin_fd_, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::string> Subprocess::WaitForLine(const std::string& prefix,
                                                   std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    auto line = ReadLine(left);
    if (!line) return std::nullopt;
    if (line->rfind(prefix, 0) == 0) return line->substr(prefix.size());
  }
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0 && !exit_code_) kill(pid_, sig);
}

bool Subprocess::running() { return Wait(std::chrono::milliseconds(0)) == -1; }

int Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return *exit_code_;
  if (pid_ <= 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return *exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace uxds
