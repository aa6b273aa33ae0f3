// PEM certificates and private keys read from files: the TLS contexts'
// configuration files and a certificate provider's (A29 file_watcher).
// Errors name the field, the file and why: "ca_certificate_file /x/ca.pem:
// cannot read: No such file or directory".
#pragma once

// evp.h and x509.h: the UniquePtr deleters of the types below.
#include <openssl/base.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/status.h"

namespace uxds::tls_internal {

// Names a config file in error messages.
struct ConfigFile {
  std::string_view field;
  const std::string& path;
};

Status FileError(const ConfigFile& file, std::string_view why);

// The reason of the oldest queued BoringSSL error ("BAD_BASE64_DECODE"),
// then clears the queue.
std::string TakeBoringSslReason();

// The largest PEM file read: far above any certificate chain or root
// bundle (the system's roots are about 200 KiB).
inline constexpr int64_t kMaxConfigFileBytes = int64_t{16} << 20;

// Reads a whole (small) regular file; a FIFO, device or socket is refused,
// never waited on. Blocking: not on a loop thread's path.
StatusOr<std::string> ReadConfigFile(const ConfigFile& file);

using X509List = std::vector<bssl::UniquePtr<X509>>;

// Every certificate of `pem`, in order; at least one.
StatusOr<X509List> ParseCertificates(const ConfigFile& file, std::string_view pem);
StatusOr<X509List> LoadCertificates(const ConfigFile& file);

StatusOr<bssl::UniquePtr<EVP_PKEY>> ParsePrivateKey(const ConfigFile& file, std::string_view pem);
StatusOr<bssl::UniquePtr<EVP_PKEY>> LoadPrivateKey(const ConfigFile& file);

// OK when `key` is the private key of `leaf`; otherwise names both files.
Status CheckKeyMatchesCertificate(const ConfigFile& cert_file, X509* leaf,
                                  const ConfigFile& key_file, EVP_PKEY* key);

}  // namespace uxds::tls_internal
