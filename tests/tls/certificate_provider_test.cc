// A29's file_watcher certificate provider against real files in a temporary
// directory: the first read, re-reads on change (inotify) and on the
// interval, bad and half-written files, sharing, and subscribers on a loop.
#include "tls/certificate_provider.h"

#include <gtest/gtest.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "tls_test_util.h"
#include "uxds/log.h"

namespace uxds {
namespace {

using namespace std::chrono_literals;
using testing::Certs;
using testing::LogCapture;

// Waits for `done` (a condition another thread makes true), up to 20 s:
// a bound against hangs, not a timing assertion.
template <typename Predicate>
bool Eventually(Predicate done) {
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// The leaf certificate of a PEM file.
bssl::UniquePtr<X509> LeafOf(const std::string& path) {
  const std::string field = "file";
  auto certs = tls_internal::LoadCertificates({field, path});
  EXPECT_TRUE(certs.ok()) << certs.status().ToString();
  return std::move((*certs)[0]);
}

bool SameCertificate(X509* a, X509* b) { return X509_cmp(a, b) == 0; }

// Replaces a file as deployment tools do: written beside it, then renamed
// over it in one step.
void ReplaceFile(const std::string& path, const std::string& contents) {
  const std::string staged = path + ".staged";
  testing::WriteFile(staged, contents);
  ASSERT_EQ(rename(staged.c_str(), path.c_str()), 0);
}

class CertificateProviderTest : public ::testing::Test {
 protected:
  // The provider's own copies of the test certificates: the server's
  // identity and the CA.
  void SetUp() override {
    config_.certificate_file = dir_.File("cert.pem");
    config_.private_key_file = dir_.File("key.pem");
    config_.ca_certificate_file = dir_.File("ca.pem");
    WriteIdentity(Certs().server_cert, Certs().server_key);
    testing::WriteFile(config_.ca_certificate_file, testing::ReadFile(Certs().ca_cert));
  }
  void WriteIdentity(const std::string& cert, const std::string& key) {
    ReplaceFile(config_.certificate_file, testing::ReadFile(cert));
    ReplaceFile(config_.private_key_file, testing::ReadFile(key));
  }
  std::unique_ptr<FileWatcherCertificateProvider> Start(bool watch_file_changes = true) {
    return std::make_unique<FileWatcherCertificateProvider>(
        config_, FileWatcherCertificateProvider::Options{watch_file_changes});
  }
  static uint64_t VersionOf(const FileWatcherCertificateProvider& provider) {
    auto material = provider.Current();
    return material != nullptr ? material->version : 0;
  }

  testing::TempDir dir_;
  FileWatcherConfig config_;
};

TEST_F(CertificateProviderTest, ReadsTheIdentityAndRootsOnItsOwnThread) {
  auto provider = Start();
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  std::shared_ptr<const CertificateMaterial> material = provider->Current();
  ASSERT_NE(material, nullptr) << provider->last_error().ToString();
  EXPECT_TRUE(provider->last_error().ok());
  EXPECT_EQ(material->version, 1u);
  ASSERT_EQ(material->identity_chain.size(), 1u);
  EXPECT_TRUE(
      SameCertificate(material->identity_chain[0].get(), LeafOf(Certs().server_cert).get()));
  EXPECT_EQ(X509_check_private_key(material->identity_chain[0].get(), material->private_key.get()),
            1);
  ASSERT_EQ(material->roots.size(), 1u);
  EXPECT_TRUE(SameCertificate(material->roots[0].get(), LeafOf(Certs().ca_cert).get()));
}

TEST_F(CertificateProviderTest, RootsAloneAreEnough) {
  config_.certificate_file.clear();
  config_.private_key_file.clear();
  auto provider = Start();
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  auto material = provider->Current();
  ASSERT_NE(material, nullptr) << provider->last_error().ToString();
  EXPECT_TRUE(material->identity_chain.empty());
  EXPECT_EQ(material->private_key, nullptr);
  EXPECT_EQ(material->roots.size(), 1u);
}

// A FIFO (or a device) where a PEM file should be is refused, never waited
// on: opening a FIFO without a writer, or reading /dev/zero, would hold the
// reading thread, and its join on a loop thread, forever.
TEST_F(CertificateProviderTest, AFileThatIsNotRegularIsRefusedNotWaitedOn) {
  ASSERT_EQ(unlink(config_.ca_certificate_file.c_str()), 0);
  ASSERT_EQ(mkfifo(config_.ca_certificate_file.c_str(), 0600), 0);
  {
    auto provider = Start();
    ASSERT_TRUE(provider->WaitForReads(1, 20s));
    EXPECT_EQ(provider->Current(), nullptr);
    EXPECT_EQ(provider->last_error().message(),
              "ca_certificate_file " + config_.ca_certificate_file + ": is not a regular file");
  }  // joins its thread
  config_.ca_certificate_file = "/dev/zero";
  auto provider = Start();
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  EXPECT_EQ(provider->last_error().message(),
            "ca_certificate_file /dev/zero: is not a regular file");
}

TEST_F(CertificateProviderTest, AChangedFileIsReadWithoutWaitingForTheInterval) {
  auto provider = Start();  // refresh_interval: 600 s
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  ASSERT_EQ(VersionOf(*provider), 1u);
  WriteIdentity(Certs().client_cert, Certs().client_key);
  auto client_leaf = LeafOf(Certs().client_cert);
  ASSERT_TRUE(Eventually([&] {
    auto material = provider->Current();
    return SameCertificate(material->identity_chain[0].get(), client_leaf.get());
  }));
  EXPECT_EQ(VersionOf(*provider), 2u);
  EXPECT_TRUE(provider->last_error().ok());
}

TEST_F(CertificateProviderTest, TheIntervalRereadsTheFiles) {
  config_.refresh_interval = 20ms;
  auto provider = Start(/*watch_file_changes=*/false);
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  // Reads of unchanged files publish nothing new.
  ASSERT_TRUE(provider->WaitForReads(4, 20s));
  EXPECT_EQ(VersionOf(*provider), 1u);
  WriteIdentity(Certs().client_cert, Certs().client_key);
  auto client_leaf = LeafOf(Certs().client_cert);
  ASSERT_TRUE(Eventually([&] {
    return SameCertificate(provider->Current()->identity_chain[0].get(), client_leaf.get());
  }));
}

TEST_F(CertificateProviderTest, RefreshNowReadsAtOnce) {
  auto provider = Start(/*watch_file_changes=*/false);  // refresh_interval: 600 s
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  WriteIdentity(Certs().client_cert, Certs().client_key);
  provider->RefreshNow();
  ASSERT_TRUE(provider->WaitForReads(2, 20s));
  auto client_leaf = LeafOf(Certs().client_cert);
  EXPECT_TRUE(SameCertificate(provider->Current()->identity_chain[0].get(), client_leaf.get()));
  EXPECT_EQ(VersionOf(*provider), 2u);
}

TEST_F(CertificateProviderTest, AHalfWrittenFileKeepsThePreviousMaterialAndLogsOneLine) {
  config_.refresh_interval = 10ms;
  LogCapture log;
  auto provider = Start(/*watch_file_changes=*/false);
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  auto before = provider->Current();
  ASSERT_NE(before, nullptr);
  // The certificate cut off halfway through its base64.
  const std::string pem = testing::ReadFile(Certs().client_cert);
  ReplaceFile(config_.certificate_file, pem.substr(0, pem.size() / 2));
  ASSERT_TRUE(Eventually([&] { return !provider->last_error().ok(); }));
  // Read again and again while the file stays bad.
  ASSERT_TRUE(provider->WaitForReads(provider->reads() + 5, 20s));
  EXPECT_EQ(provider->Current(), before);
  EXPECT_EQ(provider->last_error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(provider->last_error().message().find("certificate_file " + config_.certificate_file +
                                                  ": invalid PEM certificate"),
            std::string::npos)
      << provider->last_error().ToString();
  EXPECT_EQ(log.Count("certificate_file " + config_.certificate_file), 1);
  EXPECT_EQ(log.Count("keeping the certificates read before"), 1);

  // Put back, the same bytes as before: the error clears, nothing new is
  // published.
  ReplaceFile(config_.certificate_file, testing::ReadFile(Certs().server_cert));
  ASSERT_TRUE(Eventually([&] { return provider->last_error().ok(); }));
  EXPECT_EQ(provider->Current(), before);
  EXPECT_EQ(log.Count("files read again"), 1);
}

TEST_F(CertificateProviderTest, AKeyThatIsNotTheCertificatesIsRefused) {
  auto provider = Start();
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  auto before = provider->Current();
  ReplaceFile(config_.private_key_file, testing::ReadFile(Certs().client_key));
  ASSERT_TRUE(Eventually([&] { return !provider->last_error().ok(); }));
  EXPECT_NE(provider->last_error().message().find(
                "private_key_file " + config_.private_key_file +
                ": does not match the certificate in certificate_file " + config_.certificate_file),
            std::string::npos)
      << provider->last_error().ToString();
  EXPECT_EQ(provider->Current(), before);
  // The certificate that goes with it arrives: the pair is taken.
  ReplaceFile(config_.certificate_file, testing::ReadFile(Certs().client_cert));
  ASSERT_TRUE(Eventually([&] { return provider->last_error().ok(); }));
  EXPECT_EQ(VersionOf(*provider), 2u);
}

TEST_F(CertificateProviderTest, FilesThatAppearLaterAreRead) {
  config_.certificate_file = dir_.File("later/cert.pem");
  config_.private_key_file = dir_.File("later/key.pem");
  config_.ca_certificate_file = dir_.File("later/ca.pem");
  ASSERT_EQ(mkdir(dir_.File("later").c_str(), 0700), 0);
  LogCapture log;
  auto provider = Start();
  ASSERT_TRUE(provider->WaitForReads(1, 20s));
  EXPECT_EQ(provider->Current(), nullptr);
  EXPECT_NE(provider->last_error().message().find("cannot read: No such file or directory"),
            std::string::npos)
      << provider->last_error().ToString();
  EXPECT_EQ(log.Count("no certificates yet"), 1);
  testing::WriteFile(config_.ca_certificate_file, testing::ReadFile(Certs().ca_cert));
  WriteIdentity(Certs().server_cert, Certs().server_key);
  ASSERT_TRUE(Eventually([&] { return provider->Current() != nullptr; }));
  EXPECT_EQ(VersionOf(*provider), 1u);
}

TEST_F(CertificateProviderTest, OneProviderPerConfig) {
  auto first = FileWatcherCertificateProvider::Shared(config_);
  auto same = FileWatcherCertificateProvider::Shared(config_);
  EXPECT_EQ(first, same);
  FileWatcherConfig other = config_;
  other.refresh_interval = 1s;
  auto different = FileWatcherCertificateProvider::Shared(other);
  EXPECT_NE(first, different);
  std::weak_ptr<FileWatcherCertificateProvider> old = first;
  first.reset();
  EXPECT_FALSE(old.expired());  // `same` still owns it
  same.reset();
  // The last owner gone, the provider is too (the registry holds no
  // reference), and the next caller gets one of its own, whose thread
  // reads the files again.
  EXPECT_TRUE(old.expired());
  auto fresh = FileWatcherCertificateProvider::Shared(config_);
  ASSERT_TRUE(fresh->WaitForReads(1, 20s));
  EXPECT_NE(fresh->Current(), nullptr);
  EXPECT_EQ(fresh->reads(), 1u);
}

TEST_F(CertificateProviderTest, SubscribersHearOfChangesOnTheirOwnLoop) {
  auto loop_thread = LoopThread::Start();
  ASSERT_TRUE(loop_thread.ok()) << loop_thread.status().ToString();
  LoopThread& thread = **loop_thread;
  auto provider = Start();
  ASSERT_TRUE(provider->WaitForReads(1, 20s));

  std::thread::id loop_id;
  thread.RunSync([&] { loop_id = std::this_thread::get_id(); });
  std::atomic<int> heard{0};
  std::atomic<bool> on_loop{true};
  std::unique_ptr<FileWatcherCertificateProvider::Subscription> subscription;
  thread.RunSync([&] {
    subscription = provider->Subscribe(thread.loop(), [&] {
      if (std::this_thread::get_id() != loop_id) on_loop = false;
      ++heard;
    });
  });
  WriteIdentity(Certs().client_cert, Certs().client_key);
  ASSERT_TRUE(Eventually([&] { return heard.load() >= 1; }));
  EXPECT_TRUE(on_loop.load());

  // Gone on its loop: later changes reach nobody.
  thread.RunSync([&] { subscription.reset(); });
  const int before = heard.load();
  const uint64_t version = VersionOf(*provider);
  WriteIdentity(Certs().server_cert, Certs().server_key);
  ASSERT_TRUE(Eventually([&] { return VersionOf(*provider) > version; }));
  thread.RunSync([] {});  // what was posted before has run
  EXPECT_EQ(heard.load(), before);
}

TEST_F(CertificateProviderTest, ASubscriptionMayOutliveItsProvider) {
  auto loop_thread = LoopThread::Start();
  ASSERT_TRUE(loop_thread.ok());
  LoopThread& thread = **loop_thread;
  auto provider = Start();
  std::unique_ptr<FileWatcherCertificateProvider::Subscription> subscription;
  thread.RunSync([&] { subscription = provider->Subscribe(thread.loop(), [] {}); });
  // Destroyed at once, while its thread may still be reading.
  provider.reset();
  thread.RunSync([&] { subscription.reset(); });
}

TEST(FileWatcherConfigTest, GrpcsRules) {
  FileWatcherConfig config;
  config.certificate_file = "/c.pem";
  EXPECT_EQ(ValidateFileWatcherConfig(config).message(),
            "fields \"certificate_file\" and \"private_key_file\" must be both set or both unset");
  config = {};
  EXPECT_EQ(ValidateFileWatcherConfig(config).message(),
            "at least one of \"certificate_file\" and \"ca_certificate_file\" must be specified");
  config.ca_certificate_file = "/ca.pem";
  EXPECT_TRUE(ValidateFileWatcherConfig(config).ok());
  config.refresh_interval = 0ms;
  EXPECT_FALSE(ValidateFileWatcherConfig(config).ok());
}

}  // namespace
}  // namespace uxds
