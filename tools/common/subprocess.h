// Subprocess: a child process with its stdout captured line by line.
//
// The uxds tool starts peers with it (the demo's grpcio server and client),
// and the tests start every peer with it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace uxds {

// A child process (a peer: grpcio script, gRPC C++ program, h2load, openssl)
// with its stdout captured line by line; stderr is inherited unless
// redirected to a file.
// The destructor kills (SIGKILL) and reaps it if it is still running.
class Subprocess {
 public:
  // With `pipe_stdin` the child reads what WriteLine() sends, else it
  // inherits stdin. With `stderr_file` its stderr is appended to that file.
  static Subprocess Start(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env = {},
                          bool pipe_stdin = false, const std::string& stderr_file = "");
  Subprocess(Subprocess&&) noexcept;
  Subprocess& operator=(Subprocess&&) noexcept;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // The next stdout line, or nullopt on EOF / timeout. A zero timeout
  // takes a line the child has written already, without waiting.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  // Reads lines until one starts with `prefix`; returns the rest of it.
  std::optional<std::string> WaitForLine(const std::string& prefix,
                                         std::chrono::milliseconds timeout);
  // Every stdout line read so far.
  const std::vector<std::string>& lines() const { return lines_; }
  // Forgets the lines read so far (a long-lived child's lines add up).
  void ClearLines() { lines_.clear(); }
  // Writes `line` and a newline to the child's stdin (Start with
  // pipe_stdin); false if the child no longer reads it.
  bool WriteLine(const std::string& line);
  void Signal(int sig);
  // Exit code (128+signal when killed by a signal); -1 on timeout (still running).
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  bool running();

 private:
  Subprocess() = default;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stdin_fd_ = -1;
  std::string buffer_;
  std::vector<std::string> lines_;
  std::optional<int> exit_code_;
};

}  // namespace uxds
