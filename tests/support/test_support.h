// Shared helpers for the test suite: peer processes, temp dirs, certificates.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "uxds/log.h"

namespace uxds::testing {

// Paths the test environment provides (tests/meson.build sets them).
std::string SourceRoot();  // UXDS_SOURCE_ROOT
std::string BuildRoot();   // UXDS_BUILD_ROOT
std::string Python();      // UXDS_PYTHON: /usr/bin/python3, which has grpcio

// Subprocess (tools/common/subprocess.h): peers run as child processes.
using ::uxds::Subprocess;

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
  // A mesh workload's server certificate (A29 SAN checks), signed by ca_cert.
  // SAN: URI:spiffe://td.example/ns/default/sa/backend, email:ops@example.com,
  // DNS:*.svc.example.com, IP:2001:db8::1
  std::string mesh_server_cert;
  std::string mesh_server_key;
};
// Writes the files into `dir` (once per dir; later calls reuse them).
TestCertificates MakeTestCertificates(const std::string& dir);

// Log lines from every thread while it lives (the process-wide sink is
// put back to the default when it ends).
class LogCapture {
 public:
  LogCapture() {
    SetLogSink([this](LogSeverity, std::string_view message) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(message);
    });
  }
  ~LogCapture() { SetLogSink({}); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // Lines that contain `needle`.
  int Count(std::string_view needle) {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const std::string& line : lines_) n += line.find(needle) != std::string::npos;
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);

}  // namespace uxds::testing
