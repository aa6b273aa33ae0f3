// The certificates `uxds demo --mtls` makes for itself with BoringSSL: a CA,
// a server certificate for every demo server and a client certificate, so
// the demo runs over mutual TLS configured only by xDS (A29) with nothing
// to install.
#pragma once

#include <string>

#include "uxds/status.h"

namespace uxds::tool {

// The files WriteDemoCertificates() writes, in its directory.
struct DemoCertificateFiles {
  std::string ca_cert;      // ca.pem: the demo CA
  std::string server_cert;  // server.pem: SANs URI kDemoServerSan, IP 127.0.0.1
  std::string server_key;   // server.key
  std::string client_cert;  // client.pem: SAN URI kDemoClientSan
  std::string client_key;   // client.key
};

// The workloads' identities, as a mesh names them (SPIFFE IDs).
inline constexpr char kDemoServerSan[] = "spiffe://uxds-demo/ns/demo/sa/server";
inline constexpr char kDemoClientSan[] = "spiffe://uxds-demo/ns/demo/sa/client";

// Makes the CA and both certificates (P-256 keys, valid from an hour ago for
// a day) and writes them into `dir` (private keys mode 0600).
StatusOr<DemoCertificateFiles> WriteDemoCertificates(const std::string& dir);

}  // namespace uxds::tool
