#include "support/test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace uxds::testing {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

void RunOrThrow(const std::vector<std::string>& argv) {
  Subprocess p = Subprocess::Start(argv);
  while (p.ReadLine(std::chrono::seconds(30))) {
  }
  int rc = p.Wait(std::chrono::seconds(60));
  if (rc != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + cmd);
  }
}

}  // namespace

std::string SourceRoot() { return EnvOr("UXDS_SOURCE_ROOT", "."); }
std::string BuildRoot() { return EnvOr("UXDS_BUILD_ROOT", "."); }
std::string Python() { return EnvOr("UXDS_PYTHON", "/usr/bin/python3"); }

TempDir::TempDir() {
  std::string tmpl = EnvOr("TMPDIR", "/tmp") + "/uxds-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << contents;
}

TestCertificates MakeTestCertificates(const std::string& dir) {
  TestCertificates c{dir + "/ca.pem",          dir + "/server.pem",     dir + "/server.key",
                     dir + "/client.pem",      dir + "/client.key",     dir + "/other_ca.pem",
                     dir + "/mesh_server.pem", dir + "/mesh_server.key"};
  // The last file made: its presence means all are there.
  if (std::filesystem::exists(c.mesh_server_key) && std::filesystem::exists(c.mesh_server_cert)) {
    return c;
  }
  auto make_ca = [&](const std::string& name, const std::string& cert) {
    RunOrThrow({"openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=" + name,
                "-keyout",
                dir + "/" + name + ".key",
                "-out",
                cert,
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign"});
  };
  auto make_leaf = [&](const std::string& name, const std::string& cert, const std::string& key,
                       const std::string& ext) {
    std::string csr = dir + "/" + name + ".csr";
    std::string extfile = dir + "/" + name + ".ext";
    WriteFile(extfile, ext);
    RunOrThrow({"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-subj", "/CN=" + name, "-keyout", key, "-out", csr});
    RunOrThrow({"openssl", "x509", "-req", "-in", csr, "-CA", c.ca_cert, "-CAkey",
                dir + "/uxds-test-ca.key", "-CAcreateserial", "-days", "2", "-extfile", extfile,
                "-out", cert});
  };
  make_ca("uxds-test-ca", c.ca_cert);
  make_leaf("server", c.server_cert, c.server_key,
            "subjectAltName=DNS:localhost,DNS:*.test.example.com,IP:127.0.0.1,IP:::1\n"
            "extendedKeyUsage=serverAuth\n");
  make_leaf("client", c.client_cert, c.client_key,
            "subjectAltName=DNS:client.test.example.com\nextendedKeyUsage=clientAuth\n");
  make_ca("uxds-other-ca", c.other_ca_cert);
  make_leaf("mesh_server", c.mesh_server_cert, c.mesh_server_key,
            "subjectAltName=URI:spiffe://td.example/ns/default/sa/backend,email:ops@example.com,"
            "DNS:*.svc.example.com,IP:2001:db8:0:0:0:0:0:1\n"
            "extendedKeyUsage=serverAuth\n");
  return c;
}

}  // namespace uxds::testing
