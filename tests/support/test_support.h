// Shared helpers for the test suite: peer processes, temp dirs, certificates.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace uxds::testing {

// Paths the test environment provides (tests/meson.build sets them).
std::string SourceRoot();  // UXDS_SOURCE_ROOT
std::string BuildRoot();   // UXDS_BUILD_ROOT
std::string Python();      // UXDS_PYTHON: /usr/bin/python3, which has grpcio

// A child process (a peer: grpcio script, gRPC C++ program, h2load, openssl)
// with its stdout captured line by line; stderr goes to the test's stderr.
// The destructor kills (SIGKILL) and reaps it if it is still running.
class Subprocess {
 public:
  static Subprocess Start(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& extra_env = {});
  Subprocess(Subprocess&&) noexcept;
  Subprocess& operator=(Subprocess&&) noexcept;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // The next stdout line, or nullopt on EOF / timeout.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  // Reads lines until one starts with `prefix`; returns the rest of it.
  std::optional<std::string> WaitForLine(const std::string& prefix,
                                         std::chrono::milliseconds timeout);
  // Every stdout line read so far.
  const std::vector<std::string>& lines() const { return lines_; }
  void Signal(int sig);
  // Exit code (128+signal when killed by a signal); -1 on timeout (still running).
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  bool running();

 private:
  Subprocess() = default;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  std::vector<std::string> lines_;
  std::optional<int> exit_code_;
};

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A CA and certificates made at test time with the openssl command.
struct TestCertificates {
  std::string ca_cert;      // PEM: the CA that signed the others
  std::string server_cert;  // SAN: DNS:localhost, DNS:*.test.example.com, IP:127.0.0.1, IP:::1
  std::string server_key;
  std::string client_cert;  // for mutual TLS
  std::string client_key;
  std::string other_ca_cert;  // an unrelated CA: verification against it must fail
};
// Writes the files into `dir` (once per dir; later calls reuse them).
TestCertificates MakeTestCertificates(const std::string& dir);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);

}  // namespace uxds::testing
