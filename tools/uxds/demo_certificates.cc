#include "demo_certificates.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec_key.h>
#include <openssl/evp.h>
#include <openssl/nid.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

namespace uxds::tool {
namespace {

constexpr long kValidSeconds = 24 * 3600;

bssl::UniquePtr<EVP_PKEY> NewKey() {
  bssl::UniquePtr<EC_KEY> ec(EC_KEY_new_by_curve_name(NID_X9_62_prime256v1));
  if (ec == nullptr || EC_KEY_generate_key(ec.get()) != 1) return nullptr;
  bssl::UniquePtr<EVP_PKEY> key(EVP_PKEY_new());
  if (key == nullptr || EVP_PKEY_assign_EC_KEY(key.get(), ec.release()) != 1) return nullptr;
  return key;
}

// Adds one extension in OpenSSL's config syntax ("critical,CA:TRUE",
// "URI:spiffe://...,IP:127.0.0.1").
bool AddExtension(X509* certificate, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  bssl::UniquePtr<X509_EXTENSION> extension(X509V3_EXT_nconf_nid(nullptr, &context, nid, value));
  return extension != nullptr && X509_add_ext(certificate, extension.get(), -1) == 1;
}

// A certificate for `key` named `common_name`, signed by `issuer_key`
// (`issuer` null: self-signed, a CA).
bssl::UniquePtr<X509> NewCertificate(EVP_PKEY* key, const char* common_name, long serial,
                                     X509* issuer, EVP_PKEY* issuer_key, const char* sans) {
  bssl::UniquePtr<X509> certificate(X509_new());
  if (certificate == nullptr) return nullptr;
  X509* x = certificate.get();
  bssl::UniquePtr<X509_NAME> name(X509_NAME_new());
  const bool ok =
      name != nullptr && X509_set_version(x, X509_VERSION_3) == 1 &&
      ASN1_INTEGER_set(X509_get_serialNumber(x), serial) == 1 &&
      X509_gmtime_adj(X509_getm_notBefore(x), -3600) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(x), kValidSeconds) != nullptr &&
      X509_set_pubkey(x, key) == 1 &&
      X509_NAME_add_entry_by_txt(name.get(), "CN", MBSTRING_ASC,
                                 reinterpret_cast<const uint8_t*>(common_name), -1, -1, 0) == 1 &&
      X509_set_subject_name(x, name.get()) == 1 &&
      X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name.get()) ==
          1 &&
      AddExtension(x, issuer != nullptr ? issuer : x, NID_basic_constraints,
                   issuer == nullptr ? "critical,CA:TRUE" : "critical,CA:FALSE") &&
      (issuer != nullptr || AddExtension(x, x, NID_key_usage, "critical,keyCertSign,cRLSign")) &&
      (sans == nullptr || AddExtension(x, issuer, NID_subject_alt_name, sans)) &&
      X509_sign(x, issuer_key, EVP_sha256()) != 0;
  if (!ok) return nullptr;
  return certificate;
}

Status WritePem(const std::string& path, X509* certificate, EVP_PKEY* key) {
  bssl::UniquePtr<BIO> out(BIO_new_file(path.c_str(), "w"));
  if (out == nullptr) return InternalError(path + ": cannot write");
  if (key != nullptr) ::chmod(path.c_str(), 0600);
  const bool ok =
      certificate != nullptr
          ? PEM_write_bio_X509(out.get(), certificate) == 1
          : PEM_write_bio_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  if (!ok) return InternalError(path + ": cannot write the PEM");
  return OkStatus();
}

}  // namespace

StatusOr<DemoCertificateFiles> WriteDemoCertificates(const std::string& dir) {
  DemoCertificateFiles files{dir + "/ca.pem", dir + "/server.pem", dir + "/server.key",
                             dir + "/client.pem", dir + "/client.key"};
  bssl::UniquePtr<EVP_PKEY> ca_key = NewKey();
  bssl::UniquePtr<EVP_PKEY> server_key = NewKey();
  bssl::UniquePtr<EVP_PKEY> client_key = NewKey();
  if (ca_key == nullptr || server_key == nullptr || client_key == nullptr) {
    return InternalError("cannot make the demo's keys");
  }
  bssl::UniquePtr<X509> ca =
      NewCertificate(ca_key.get(), "uxds demo CA", 1, nullptr, ca_key.get(), nullptr);
  if (ca == nullptr) return InternalError("cannot make the demo's CA certificate");
  const std::string server_sans = std::string("URI:") + kDemoServerSan + ",IP:127.0.0.1";
  const std::string client_sans = std::string("URI:") + kDemoClientSan;
  bssl::UniquePtr<X509> server = NewCertificate(server_key.get(), "uxds demo server", 2, ca.get(),
                                                ca_key.get(), server_sans.c_str());
  bssl::UniquePtr<X509> client = NewCertificate(client_key.get(), "uxds demo client", 3, ca.get(),
                                                ca_key.get(), client_sans.c_str());
  if (server == nullptr || client == nullptr) {
    return InternalError("cannot make the demo's certificates");
  }
  for (const Status& written : {WritePem(files.ca_cert, ca.get(), nullptr),
                                WritePem(files.server_cert, server.get(), nullptr),
                                WritePem(files.server_key, nullptr, server_key.get()),
                                WritePem(files.client_cert, client.get(), nullptr),
                                WritePem(files.client_key, nullptr, client_key.get())}) {
    if (!written.ok()) return written;
  }
  return files;
}

}  // namespace uxds::tool
