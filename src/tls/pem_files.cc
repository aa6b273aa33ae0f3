#include "tls/pem_files.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace uxds::tls_internal {

Status FileError(const ConfigFile& file, std::string_view why) {
  return InvalidArgumentError(std::string(file.field) + " " + file.path + ": " + std::string(why));
}

std::string TakeBoringSslReason() {
  uint32_t packed = ERR_peek_error();
  std::string reason;
  if (packed != 0) {
    const char* text = ERR_reason_error_string(packed);
    reason = text != nullptr ? text : "error " + std::to_string(ERR_GET_REASON(packed));
  }
  ERR_clear_error();
  return reason;
}

StatusOr<std::string> ReadConfigFile(const ConfigFile& file) {
  if (file.path.empty()) return InvalidArgumentError(std::string(file.field) + ": required");
  // O_NONBLOCK: opening a FIFO with no writer would wait for one, and the
  // thread that reads (a certificate provider's) is joined on a loop thread.
  int fd = open(file.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return FileError(file, std::string("cannot read: ") + std::strerror(errno));
  // Only a regular file ends: a FIFO, a socket or a device (/dev/zero, a
  // tty) could block or never reach end of file.
  struct stat info;
  if (fstat(fd, &info) != 0) {
    const int err = errno;
    close(fd);
    return FileError(file, std::string("cannot read: ") + std::strerror(err));
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return FileError(file, "is not a regular file");
  }
  if (info.st_size > kMaxConfigFileBytes) {
    close(fd);
    return FileError(file, "is larger than " + std::to_string(kMaxConfigFileBytes >> 20) + " MiB");
  }
  std::string contents;
  char buf[16384];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return FileError(file, std::string("cannot read: ") + std::strerror(err));
    }
    if (n == 0) break;
    contents.append(buf, static_cast<size_t>(n));
    if (contents.size() > static_cast<size_t>(kMaxConfigFileBytes)) {
      // Grown since fstat: a writer is still at it; the next read retries.
      close(fd);
      return FileError(file,
                       "is larger than " + std::to_string(kMaxConfigFileBytes >> 20) + " MiB");
    }
  }
  close(fd);
  return contents;
}

StatusOr<X509List> ParseCertificates(const ConfigFile& file, std::string_view pem) {
  bssl::UniquePtr<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509List certs;
  ERR_clear_error();
  while (true) {
    bssl::UniquePtr<X509> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    certs.push_back(std::move(cert));
  }
  uint32_t last = ERR_peek_last_error();
  // Running out of PEM blocks ends the loop with PEM_R_NO_START_LINE; any
  // other error means a block was malformed (a file cut short, say).
  bool clean_end = last == 0 || (ERR_GET_LIB(last) == ERR_LIB_PEM &&
                                 ERR_GET_REASON(last) == PEM_R_NO_START_LINE);
  if (!clean_end) return FileError(file, "invalid PEM certificate: " + TakeBoringSslReason());
  ERR_clear_error();
  if (certs.empty()) return FileError(file, "no certificate found");
  return certs;
}

StatusOr<X509List> LoadCertificates(const ConfigFile& file) {
  StatusOr<std::string> pem = ReadConfigFile(file);
  if (!pem.ok()) return pem.status();
  return ParseCertificates(file, *pem);
}

StatusOr<bssl::UniquePtr<EVP_PKEY>> ParsePrivateKey(const ConfigFile& file, std::string_view pem) {
  bssl::UniquePtr<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  ERR_clear_error();
  bssl::UniquePtr<EVP_PKEY> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    uint32_t last = ERR_peek_last_error();
    if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
      ERR_clear_error();
      return FileError(file, "no private key found");
    }
    return FileError(file, "invalid private key: " + TakeBoringSslReason());
  }
  return key;
}

StatusOr<bssl::UniquePtr<EVP_PKEY>> LoadPrivateKey(const ConfigFile& file) {
  StatusOr<std::string> pem = ReadConfigFile(file);
  if (!pem.ok()) return pem.status();
  return ParsePrivateKey(file, *pem);
}

Status CheckKeyMatchesCertificate(const ConfigFile& cert_file, X509* leaf,
                                  const ConfigFile& key_file, EVP_PKEY* key) {
  ERR_clear_error();
  if (X509_check_private_key(leaf, key) == 1) return OkStatus();
  std::string reason = TakeBoringSslReason();
  return FileError(key_file, "does not match the certificate in " + std::string(cert_file.field) +
                                 " " + cert_file.path + " (" + reason + ")");
}

}  // namespace uxds::tls_internal
