// TlsClientContext / TlsServerContext: loading files, and the errors a bad
// configuration produces.
#include <gtest/gtest.h>

#include "tls/tls.h"
#include "tls_test_util.h"

namespace uxds {
namespace {

using testing::CertificatesEnvironment;
using testing::Certs;

std::string Scratch(const std::string& name) { return CertificatesEnvironment::dir() + "/" + name; }

TlsClientConfig ValidClientConfig() {
  TlsClientConfig config;
  config.ca_certificate_file = Certs().ca_cert;
  return config;
}

TlsServerConfig ValidServerConfig() {
  TlsServerConfig config;
  config.certificate_chain_file = Certs().server_cert;
  config.private_key_file = Certs().server_key;
  return config;
}

TEST(TlsContextTest, ValidConfigurationsLoad) {
  auto client = TlsClientContext::Create(ValidClientConfig());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_NE((*client)->native_handle(), nullptr);

  TlsClientConfig mutual = ValidClientConfig();
  mutual.certificate_file = Certs().client_cert;
  mutual.private_key_file = Certs().client_key;
  auto mutual_client = TlsClientContext::Create(mutual);
  EXPECT_TRUE(mutual_client.ok()) << mutual_client.status().ToString();

  TlsServerConfig server = ValidServerConfig();
  server.ca_certificate_file = Certs().ca_cert;
  server.require_client_certificate = true;
  auto server_ctx = TlsServerContext::Create(server);
  EXPECT_TRUE(server_ctx.ok()) << server_ctx.status().ToString();
}

TEST(TlsContextTest, MissingCaFileNamesFieldPathAndErrno) {
  TlsClientConfig config = ValidClientConfig();
  config.ca_certificate_file = "/nonexistent/ca.pem";
  auto ctx = TlsClientContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.status().message(),
            "ca_certificate_file /nonexistent/ca.pem: cannot read: No such file or directory");
}

TEST(TlsContextTest, EmptyCaFieldIsRequired) {
  auto ctx = TlsClientContext::Create(TlsClientConfig{});
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.status().message(), "ca_certificate_file: required");
}

TEST(TlsContextTest, FileWithoutCertificates) {
  std::string path = Scratch("not_a_cert.pem");
  testing::WriteFile(path, "just some text\n");
  TlsClientConfig config = ValidClientConfig();
  config.ca_certificate_file = path;
  auto ctx = TlsClientContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.status().message(), "ca_certificate_file " + path + ": no certificate found");
}

TEST(TlsContextTest, CorruptPemCertificate) {
  std::string path = Scratch("corrupt.pem");
  testing::WriteFile(
      path, "-----BEGIN CERTIFICATE-----\n!!!!not base64!!!!\n-----END CERTIFICATE-----\n");
  TlsServerConfig config = ValidServerConfig();
  config.certificate_chain_file = path;
  auto ctx = TlsServerContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.status().message().rfind("certificate_chain_file " + path + ": invalid PEM", 0), 0u)
      << ctx.status().ToString();
}

TEST(TlsContextTest, KeyThatDoesNotMatchTheCertificate) {
  TlsServerConfig config = ValidServerConfig();
  config.private_key_file = Certs().client_key;
  auto ctx = TlsServerContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.status().message().rfind("private_key_file " + Certs().client_key +
                                             ": does not match the certificate in "
                                             "certificate_chain_file " +
                                             Certs().server_cert,
                                         0),
            0u)
      << ctx.status().ToString();
}

TEST(TlsContextTest, KeyFileWithoutAKey) {
  TlsServerConfig config = ValidServerConfig();
  config.private_key_file = Certs().server_cert;  // a certificate, not a key
  auto ctx = TlsServerContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().message(),
            "private_key_file " + Certs().server_cert + ": no private key found");
}

TEST(TlsContextTest, ClientCertificateNeedsItsKey) {
  TlsClientConfig config = ValidClientConfig();
  config.certificate_file = Certs().client_cert;
  auto ctx = TlsClientContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.status().message(), "private_key_file: required when certificate_file is set");
}

TEST(TlsContextTest, ServerNeedsCertificateAndKey) {
  TlsServerConfig config;
  auto ctx = TlsServerContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().message(), "certificate_chain_file: required");
  config.certificate_chain_file = Certs().server_cert;
  ctx = TlsServerContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().message(), "private_key_file: required");
}

TEST(TlsContextTest, RequiringClientCertificatesNeedsACaFile) {
  TlsServerConfig config = ValidServerConfig();
  config.require_client_certificate = true;
  auto ctx = TlsServerContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.status().message(),
            "ca_certificate_file: required when require_client_certificate is set");
}

TEST(TlsContextTest, AlpnNamesMustFitTheWireFormat) {
  TlsClientConfig config = ValidClientConfig();
  config.alpn = {"h2", ""};
  auto ctx = TlsClientContext::Create(config);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().message(), "alpn[1]: must be 1 to 255 bytes long");
  TlsServerConfig server = ValidServerConfig();
  server.alpn = {std::string(256, 'x')};
  auto server_ctx = TlsServerContext::Create(server);
  ASSERT_FALSE(server_ctx.ok());
  EXPECT_EQ(server_ctx.status().message(), "alpn[0]: must be 1 to 255 bytes long");
}

}  // namespace
}  // namespace uxds
