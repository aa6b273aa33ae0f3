// TlsEngine: a client engine against a server engine, ciphertext moved in
// memory by the test. Covers verification, ALPN, mutual TLS, close_notify,
// KeyUpdate and corrupted records without any I/O.
#include "tls/tls_engine.h"

#include <gtest/gtest.h>

#include <vector>

#include "tls/certificate_provider.h"
#include "tls/pem_files.h"
#include "tls_test_util.h"

namespace uxds {
namespace {

using testing::Certs;

struct Options {
  std::string server_name = "localhost";
  std::string client_ca;  // default: the suite's CA
  bool client_certificate = false;
  std::vector<std::string> client_alpn = {"h2"};
  std::vector<std::string> server_alpn = {"h2"};
  bool server_verifies_clients = false;
  bool server_requires_client_certificate = false;
  std::string server_cert;  // default: the suite's server certificate
  std::string server_key;
  ServerAuthorization server_authorization;
  // The server context made from provider material (TlsServerContext::
  // FromMaterial) instead of from files.
  bool server_from_material = false;
};

// What a certificate provider would have read: `cert` and `key` as the
// identity (if given), `ca` as the roots (if given).
std::shared_ptr<const CertificateMaterial> Material(const std::string& cert, const std::string& key,
                                                    const std::string& ca) {
  auto material = std::make_shared<CertificateMaterial>();
  if (!cert.empty()) {
    material->identity_chain = *tls_internal::LoadCertificates({"certificate_file", cert});
    material->private_key = std::move(*tls_internal::LoadPrivateKey({"private_key_file", key}));
  }
  if (!ca.empty()) material->roots = *tls_internal::LoadCertificates({"ca_certificate_file", ca});
  material->version = 1;
  return material;
}

// Moves every queued byte of ciphertext from `from` to `to`.
size_t Transfer(TlsEngine& from, TlsEngine& to) {
  std::vector<uint8_t> wire;
  from.TakeCiphertext(wire);
  to.PutCiphertext(wire);
  return wire.size();
}

struct Pair {
  std::unique_ptr<TlsEngine> client;
  std::unique_ptr<TlsEngine> server;
  Status client_result;
  Status server_result;
};

Pair MakePair(const Options& o = {}) {
  TlsClientConfig client_config;
  client_config.ca_certificate_file = o.client_ca.empty() ? Certs().ca_cert : o.client_ca;
  client_config.alpn = o.client_alpn;
  if (o.client_certificate) {
    client_config.certificate_file = Certs().client_cert;
    client_config.private_key_file = Certs().client_key;
  }
  TlsServerConfig server_config;
  client_config.server_authorization = o.server_authorization;
  server_config.certificate_chain_file =
      o.server_cert.empty() ? Certs().server_cert : o.server_cert;
  server_config.private_key_file = o.server_key.empty() ? Certs().server_key : o.server_key;
  server_config.alpn = o.server_alpn;
  if (o.server_verifies_clients) server_config.ca_certificate_file = Certs().ca_cert;
  server_config.require_client_certificate = o.server_requires_client_certificate;
  auto client_ctx = TlsClientContext::Create(client_config);
  auto server_ctx =
      o.server_from_material
          ? TlsServerContext::FromMaterial(
                Material(server_config.certificate_chain_file, server_config.private_key_file, ""),
                o.server_verifies_clients ? Material("", "", Certs().ca_cert) : nullptr,
                server_config)
          : TlsServerContext::Create(server_config);
  EXPECT_TRUE(client_ctx.ok()) << client_ctx.status().ToString();
  EXPECT_TRUE(server_ctx.ok()) << server_ctx.status().ToString();
  Pair p;
  auto client = TlsEngine::CreateClient(*client_ctx, o.server_name);
  auto server = TlsEngine::CreateServer(*server_ctx);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  p.client = std::move(*client);
  p.server = std::move(*server);
  return p;
}

// Runs both handshakes until each side is done or failed, or nothing moves.
void Handshake(Pair& p) {
  bool client_done = false, server_done = false;
  for (int round = 0; round < 20; ++round) {
    if (!client_done && p.client_result.ok()) {
      auto r = p.client->Handshake();
      if (!r.ok())
        p.client_result = r.status();
      else
        client_done = *r;
    }
    size_t moved = Transfer(*p.client, *p.server);
    if (!server_done && p.server_result.ok()) {
      auto r = p.server->Handshake();
      if (!r.ok())
        p.server_result = r.status();
      else
        server_done = *r;
    }
    moved += Transfer(*p.server, *p.client);
    if ((client_done || !p.client_result.ok()) && (server_done || !p.server_result.ok()) &&
        moved == 0) {
      return;
    }
  }
  ADD_FAILURE() << "handshake did not settle";
}

// Everything `reader` can decrypt right now.
std::vector<uint8_t> ReadAvailable(TlsEngine& reader, bool* end = nullptr) {
  std::vector<uint8_t> out, buf(10000);
  while (true) {
    auto r = reader.Read(buf);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || r->need_input) break;
    if (r->end) {
      if (end != nullptr) *end = true;
      break;
    }
    out.insert(out.end(), buf.begin(), buf.begin() + static_cast<long>(r->bytes));
  }
  return out;
}

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed);
  return v;
}

// MakePair with the defaults changed by `configure`.
template <typename Configure>
Pair MakePairWith(Configure configure) {
  Options o;
  configure(o);
  return MakePair(o);
}

TEST(TlsEngineTest, HandshakeAgreesOnH2AndTls13) {
  Pair p = MakePair();
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok()) << p.client_result.ToString();
  ASSERT_TRUE(p.server_result.ok()) << p.server_result.ToString();
  EXPECT_TRUE(p.client->handshake_done());
  EXPECT_EQ(p.client->negotiated_alpn(), "h2");
  EXPECT_EQ(p.server->negotiated_alpn(), "h2");
  EXPECT_EQ(p.client->protocol_version(), "TLSv1.3");
  EXPECT_EQ(p.client->peer_certificate_subject(), "CN=server");
  EXPECT_EQ(p.server->peer_certificate_subject(), "");
}

TEST(TlsEngineTest, DataFlowsBothWays) {
  Pair p = MakePair();
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok() && p.server_result.ok());
  std::vector<uint8_t> up = Pattern(1 << 20, 1), down = Pattern(300000, 2);
  auto w = p.client->Write(up);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->bytes, up.size());
  w = p.server->Write(down);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->bytes, down.size());
  Transfer(*p.client, *p.server);
  Transfer(*p.server, *p.client);
  EXPECT_EQ(ReadAvailable(*p.server), up);
  EXPECT_EQ(ReadAvailable(*p.client), down);
}

TEST(TlsEngineTest, PartialRecordsNeedInput) {
  Pair p = MakePair();
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok() && p.server_result.ok());
  std::vector<uint8_t> msg = Pattern(100, 3);
  ASSERT_TRUE(p.client->Write(msg).ok());
  std::vector<uint8_t> wire;
  p.client->TakeCiphertext(wire);
  ASSERT_FALSE(wire.empty());
  // All but the last byte of the record: nothing to read yet.
  p.server->PutCiphertext(std::span<const uint8_t>(wire.data(), wire.size() - 1));
  std::vector<uint8_t> buf(1000);
  auto r = p.server->Read(buf);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->need_input);
  p.server->PutCiphertext(std::span<const uint8_t>(wire.data() + wire.size() - 1, 1));
  EXPECT_EQ(ReadAvailable(*p.server), msg);
}

TEST(TlsEngineTest, UnrelatedCaFailsVerification) {
  Pair p = MakePairWith([&](Options& o) { o.client_ca = Certs().other_ca_cert; });
  Handshake(p);
  ASSERT_FALSE(p.client_result.ok());
  EXPECT_EQ(p.client_result.code(), StatusCode::kUnavailable);
  EXPECT_EQ(p.client_result.message(),
            "CERTIFICATE_VERIFY_FAILED (certificate verify failed: unable to get local issuer "
            "certificate)");
  // The client's alert tells the server why.
  ASSERT_FALSE(p.server_result.ok());
  EXPECT_NE(p.server_result.message().find("ALERT"), std::string::npos)
      << p.server_result.ToString();
}

TEST(TlsEngineTest, WrongHostNameFailsVerification) {
  Pair p = MakePairWith([&](Options& o) { o.server_name = "wrong.example.org"; });
  Handshake(p);
  ASSERT_FALSE(p.client_result.ok());
  EXPECT_EQ(p.client_result.message(),
            "CERTIFICATE_VERIFY_FAILED (certificate verify failed: Hostname mismatch)");
}

TEST(TlsEngineTest, WildcardMatchesOneLabelOnly) {
  Pair ok = MakePairWith([&](Options& o) { o.server_name = "api.test.example.com"; });
  Handshake(ok);
  EXPECT_TRUE(ok.client_result.ok()) << ok.client_result.ToString();
  Pair bad = MakePairWith([&](Options& o) { o.server_name = "a.b.test.example.com"; });
  Handshake(bad);
  EXPECT_FALSE(bad.client_result.ok());
}

TEST(TlsEngineTest, IpLiteralsMatchIpAddressSans) {
  for (const char* name : {"127.0.0.1", "::1", "[::1]"}) {
    Pair p = MakePairWith([&](Options& o) { o.server_name = name; });
    Handshake(p);
    EXPECT_TRUE(p.client_result.ok()) << name << ": " << p.client_result.ToString();
  }
  Pair p = MakePairWith([&](Options& o) { o.server_name = "10.0.0.1"; });
  Handshake(p);
  ASSERT_FALSE(p.client_result.ok());
  EXPECT_EQ(p.client_result.message(),
            "CERTIFICATE_VERIFY_FAILED (certificate verify failed: IP address mismatch)");
}

// A29: a server_authorization sees the leaf's DNS, URI, email and IP SANs
// in certificate order, IPv6 in canonical form.
TEST(TlsEngineTest, ServerAuthorizationSeesTheLeafsSans) {
  std::vector<SubjectAltName> seen;
  Pair p = MakePairWith([&](Options& o) {
    o.server_cert = Certs().mesh_server_cert;
    o.server_key = Certs().mesh_server_key;
    o.server_name = "backend.svc.example.com";
    o.server_authorization = [&](const std::vector<SubjectAltName>& sans) {
      seen = sans;
      return true;
    };
  });
  Handshake(p);
  EXPECT_TRUE(p.client_result.ok()) << p.client_result.ToString();
  EXPECT_TRUE(p.server_result.ok()) << p.server_result.ToString();
  using Type = SubjectAltName::Type;
  const std::vector<SubjectAltName> expected = {
      {Type::kUri, "spiffe://td.example/ns/default/sa/backend"},
      {Type::kEmail, "ops@example.com"},
      {Type::kDns, "*.svc.example.com"},
      {Type::kIpAddress, "2001:db8::1"}};
  EXPECT_EQ(seen, expected);
}

// A29: the SAN check stands in for the server name check: a name the
// certificate does not hold passes when the check says yes, and a "no"
// fails the handshake whatever the name.
TEST(TlsEngineTest, ServerAuthorizationStandsInForTheNameCheck) {
  Pair allowed = MakePairWith([&](Options& o) {
    o.server_name = "wrong.example.org";
    o.server_authorization = [](const std::vector<SubjectAltName>&) { return true; };
  });
  Handshake(allowed);
  EXPECT_TRUE(allowed.client_result.ok()) << allowed.client_result.ToString();

  Pair refused = MakePairWith([&](Options& o) {
    o.server_name = "localhost";
    o.server_authorization = [](const std::vector<SubjectAltName>&) { return false; };
  });
  Handshake(refused);
  ASSERT_FALSE(refused.client_result.ok());
  EXPECT_EQ(refused.client_result.message(),
            "CERTIFICATE_VERIFY_FAILED (certificate check failure: no subject alternative name "
            "of the server's certificate is authorized)");
  EXPECT_FALSE(refused.server_result.ok());
}

// The chain is verified before the SANs are looked at: a server the roots
// do not vouch for fails even if its SANs would pass.
TEST(TlsEngineTest, ServerAuthorizationNeverSeesAnUnverifiedChain) {
  int calls = 0;
  Pair p = MakePairWith([&](Options& o) {
    o.client_ca = Certs().other_ca_cert;
    o.server_authorization = [&](const std::vector<SubjectAltName>&) {
      ++calls;
      return true;
    };
  });
  Handshake(p);
  ASSERT_FALSE(p.client_result.ok());
  EXPECT_EQ(p.client_result.message(),
            "CERTIFICATE_VERIFY_FAILED (certificate verify failed: unable to get local issuer "
            "certificate)");
  EXPECT_EQ(calls, 0);
}

TEST(TlsEngineTest, EmptyServerNameIsRejected) {
  TlsClientConfig config;
  config.ca_certificate_file = Certs().ca_cert;
  auto ctx = TlsClientContext::Create(config);
  ASSERT_TRUE(ctx.ok());
  auto engine = TlsEngine::CreateClient(*ctx, "");
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
}

TEST(TlsEngineTest, MutualTlsPresentsTheClientCertificate) {
  Pair p = MakePairWith([&](Options& o) {
    o.client_certificate = true;
    o.server_verifies_clients = true;
    o.server_requires_client_certificate = true;
  });
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok()) << p.client_result.ToString();
  ASSERT_TRUE(p.server_result.ok()) << p.server_result.ToString();
  EXPECT_EQ(p.server->peer_certificate_subject(), "CN=client");
}

// A29's server side: the identity from one provider's material, the roots
// that verify clients from another's.
TEST(TlsEngineTest, ServerContextFromProviderMaterial) {
  Pair plain = MakePairWith([&](Options& o) { o.server_from_material = true; });
  Handshake(plain);
  EXPECT_TRUE(plain.client_result.ok()) << plain.client_result.ToString();
  EXPECT_TRUE(plain.server_result.ok()) << plain.server_result.ToString();

  Pair mutual = MakePairWith([&](Options& o) {
    o.server_from_material = true;
    o.server_verifies_clients = true;
    o.server_requires_client_certificate = true;
    o.client_certificate = true;
  });
  Handshake(mutual);
  EXPECT_TRUE(mutual.client_result.ok()) << mutual.client_result.ToString();
  EXPECT_TRUE(mutual.server_result.ok()) << mutual.server_result.ToString();

  Pair anonymous = MakePairWith([&](Options& o) {
    o.server_from_material = true;
    o.server_verifies_clients = true;
    o.server_requires_client_certificate = true;
  });
  Handshake(anonymous);
  ASSERT_FALSE(anonymous.server_result.ok());
  EXPECT_EQ(anonymous.server_result.message(), "PEER_DID_NOT_RETURN_A_CERTIFICATE");
}

TEST(TlsEngineTest, ServerContextFromMaterialNeedsAnIdentity) {
  TlsServerConfig config;
  auto roots_only = Material("", "", Certs().ca_cert);
  EXPECT_EQ(TlsServerContext::FromMaterial(roots_only, nullptr, config).status().message(),
            "certificate_chain_file: required");
  EXPECT_EQ(TlsServerContext::FromMaterial(nullptr, roots_only, config).status().message(),
            "certificate_chain_file: required");
  config.require_client_certificate = true;
  auto identity = Material(Certs().server_cert, Certs().server_key, "");
  EXPECT_EQ(TlsServerContext::FromMaterial(identity, nullptr, config).status().message(),
            "ca_certificate_file: required when require_client_certificate is set");
  EXPECT_EQ(TlsServerContext::FromMaterial(identity, identity, config).status().message(),
            "ca_certificate_file: required when require_client_certificate is set");
  auto context = TlsServerContext::FromMaterial(identity, roots_only, config);
  ASSERT_TRUE(context.ok()) << context.status().ToString();
  EXPECT_EQ((*context)->identity_material(), identity.get());
  EXPECT_EQ((*context)->roots_material(), roots_only.get());
}

TEST(TlsEngineTest, MissingClientCertificateIsRejectedWhenRequired) {
  Pair p = MakePairWith([&](Options& o) {
    o.server_verifies_clients = true;
    o.server_requires_client_certificate = true;
  });
  Handshake(p);
  ASSERT_FALSE(p.server_result.ok());
  EXPECT_EQ(p.server_result.message(), "PEER_DID_NOT_RETURN_A_CERTIFICATE");
  // In TLS 1.3 the client finishes first; the server's alert reaches it on
  // its first read.
  std::vector<uint8_t> buf(100);
  if (p.client_result.ok()) {
    auto r = p.client->Read(buf);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("CERTIFICATE_REQUIRED"), std::string::npos)
        << r.status().ToString();
  }
}

TEST(TlsEngineTest, OptionalClientCertificateMayBeAbsent) {
  Pair p = MakePairWith([&](Options& o) { o.server_verifies_clients = true; });
  Handshake(p);
  ASSERT_TRUE(p.server_result.ok()) << p.server_result.ToString();
  EXPECT_EQ(p.server->peer_certificate_subject(), "");
}

TEST(TlsEngineTest, NoCommonAlpnProtocolFailsBothSides) {
  Pair p = MakePairWith([&](Options& o) { o.client_alpn = {"http/1.1"}; });
  Handshake(p);
  ASSERT_FALSE(p.server_result.ok());
  EXPECT_NE(p.server_result.message().find("NO_APPLICATION_PROTOCOL"), std::string::npos)
      << p.server_result.ToString();
  ASSERT_FALSE(p.client_result.ok());
  EXPECT_NE(p.client_result.message().find("NO_APPLICATION_PROTOCOL"), std::string::npos)
      << p.client_result.ToString();
}

TEST(TlsEngineTest, ServerRefusesClientsThatOfferNoAlpn) {
  Pair p = MakePairWith([&](Options& o) { o.client_alpn = {}; });
  Handshake(p);
  EXPECT_FALSE(p.server_result.ok());
  EXPECT_FALSE(p.client_result.ok());
}

TEST(TlsEngineTest, ClientRefusesServersThatSelectNoAlpn) {
  Pair p = MakePairWith([&](Options& o) { o.server_alpn = {}; });
  Handshake(p);
  ASSERT_FALSE(p.client_result.ok());
  EXPECT_EQ(p.client_result.message(), "server selected no ALPN protocol (h2 is required)");
}

TEST(TlsEngineTest, AlpnCanBeTurnedOffOnBothSides) {
  Pair p = MakePairWith([&](Options& o) {
    o.client_alpn = {};
    o.server_alpn = {};
  });
  Handshake(p);
  EXPECT_TRUE(p.client_result.ok()) << p.client_result.ToString();
  EXPECT_TRUE(p.server_result.ok()) << p.server_result.ToString();
  EXPECT_EQ(p.client->negotiated_alpn(), "");
}

TEST(TlsEngineTest, ServerPicksItsPreferredCommonProtocol) {
  Pair p = MakePairWith([&](Options& o) {
    o.client_alpn = {"x-a", "x-b", "h2"};
    o.server_alpn = {"h2", "x-b"};
  });
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok()) << p.client_result.ToString();
  EXPECT_EQ(p.client->negotiated_alpn(), "h2");
}

TEST(TlsEngineTest, CloseNotifyEndsTheReadSideOnly) {
  Pair p = MakePair();
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok() && p.server_result.ok());
  std::vector<uint8_t> last = Pattern(5000, 4);
  ASSERT_TRUE(p.client->Write(last).ok());
  ASSERT_TRUE(p.client->Shutdown().ok());
  Transfer(*p.client, *p.server);
  bool end = false;
  EXPECT_EQ(ReadAvailable(*p.server, &end), last);
  EXPECT_TRUE(end);
  // Half-close: the server still answers, and the client still reads.
  std::vector<uint8_t> answer = Pattern(7000, 5);
  ASSERT_TRUE(p.server->Write(answer).ok());
  Transfer(*p.server, *p.client);
  EXPECT_EQ(ReadAvailable(*p.client), answer);
}

TEST(TlsEngineTest, TransportEofWithoutCloseNotifyReadsAsEnd) {
  Pair p = MakePair();
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok() && p.server_result.ok());
  Transfer(*p.server, *p.client);  // session tickets
  p.client->PutEndOfInput();
  bool end = false;
  EXPECT_TRUE(ReadAvailable(*p.client, &end).empty());
  EXPECT_TRUE(end);
}

TEST(TlsEngineTest, EofDuringHandshakeFailsIt) {
  Pair p = MakePair();
  auto r = p.client->Handshake();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_GT(p.client->ciphertext_pending(), 0u);  // the ClientHello
  p.client->PutEndOfInput();
  r = p.client->Handshake();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "connection closed by peer");
}

TEST(TlsEngineTest, KeyUpdateRoundTrip) {
  Pair p = MakePair();
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok() && p.server_result.ok());
  ASSERT_TRUE(p.client->RequestKeyUpdate().ok());
  std::vector<uint8_t> msg = Pattern(3000, 6);
  ASSERT_TRUE(p.client->Write(msg).ok());
  Transfer(*p.client, *p.server);
  EXPECT_EQ(ReadAvailable(*p.server), msg);
  // BoringSSL sends the requested KeyUpdate of its own ahead of the server's
  // next record (RFC 8446 §4.6.3); the client must then decrypt with the
  // server's new keys.
  std::vector<uint8_t> reply = Pattern(2000, 7);
  ASSERT_TRUE(p.server->Write(reply).ok());
  Transfer(*p.server, *p.client);
  EXPECT_EQ(ReadAvailable(*p.client), reply);
  ASSERT_TRUE(p.client->Write(msg).ok());
  Transfer(*p.client, *p.server);
  EXPECT_EQ(ReadAvailable(*p.server), msg);
}

TEST(TlsEngineTest, CorruptedRecordFailsAndQueuesAnAlert) {
  Pair p = MakePair();
  Handshake(p);
  ASSERT_TRUE(p.client_result.ok() && p.server_result.ok());
  Transfer(*p.server, *p.client);  // session tickets
  EXPECT_TRUE(ReadAvailable(*p.client).empty());
  std::vector<uint8_t> msg = Pattern(100, 8);
  ASSERT_TRUE(p.client->Write(msg).ok());
  std::vector<uint8_t> wire;
  p.client->TakeCiphertext(wire);
  ASSERT_FALSE(wire.empty());
  wire[wire.size() - 5] ^= 0x40;
  p.server->PutCiphertext(wire);
  std::vector<uint8_t> buf(1000);
  auto r = p.server->Read(buf);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "BAD_DECRYPT");
  // The read wrote: a bad_record_mac alert for the peer (TlsStream's Read
  // flushes what a read queues).
  ASSERT_GT(p.server->ciphertext_pending(), 0u);
  Transfer(*p.server, *p.client);
  r = p.client->Read(buf);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "SSLV3_ALERT_BAD_RECORD_MAC");
}

}  // namespace
}  // namespace uxds
