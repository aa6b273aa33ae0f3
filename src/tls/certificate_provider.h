// A29's certificate providers: the `file_watcher` plugin, which reads an
// identity certificate chain, its private key and CA roots from files and
// re-reads them on an interval and when they change.
//
// Every read happens on the provider's own thread (file I/O blocks, and a
// loop thread must not), which wakes on the refresh interval and, through
// inotify on the files' directories, when one of them changes (Kubernetes
// secret volumes swap a symlink: the directory sees it). A read that fails
// (a file missing, half written, not PEM, a key that is not the
// certificate's) keeps the previous good material and logs one line per
// new error; the next good read replaces it.
//
// Consumers fetch `Current()` when they need it (a TLS context for a new
// connection, built once per material version) and may subscribe on their
// loop to hear of each read. Providers are shared: `Shared()` returns the one
// live provider for a config (A29: "a plugin of a given kind and
// configuration is instantiated only once").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tls/pem_files.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"

namespace uxds {

// A29: the file_watcher plugin's config ("certificate_file",
// "private_key_file", "ca_certificate_file", "refresh_interval").
struct FileWatcherConfig {
  // PEM chain, leaf first, and its PEM private key: both or neither.
  std::string certificate_file;
  std::string private_key_file;
  // PEM roots.
  std::string ca_certificate_file;
  // A29/A65: re-read this often; "600s" when the config leaves it out.
  std::chrono::milliseconds refresh_interval = std::chrono::minutes(10);
  // The longest refresh_interval a provider keeps: a year. Longer periods
  // are the same as never in practice, and would overflow the reading
  // thread's steady_clock deadline (nanoseconds) near 292 years.
  static constexpr std::chrono::hours kMaxRefreshInterval{24 * 365};

  friend bool operator==(const FileWatcherConfig&, const FileWatcherConfig&) = default;
};

// A29 (gRPC's file_watcher factory): certificate_file and private_key_file
// both or neither; at least one of certificate_file and
// ca_certificate_file; a positive refresh_interval. INVALID_ARGUMENT names
// the field.
Status ValidateFileWatcherConfig(const FileWatcherConfig& config);

// One good read of a provider's files. Immutable once published.
struct CertificateMaterial {
  // Empty without a certificate_file.
  tls_internal::X509List identity_chain;
  bssl::UniquePtr<EVP_PKEY> private_key;
  // Empty without a ca_certificate_file.
  tls_internal::X509List roots;
  // 1 for the first material, one more for each change.
  uint64_t version = 0;
};

class FileWatcherCertificateProvider {
 public:
  struct Options {
    // Off: only the refresh interval re-reads the files (tests of the
    // interval).
    bool watch_file_changes = true;
  };

  // The live provider for `config`, or a new one. Any thread; reads no file.
  static std::shared_ptr<FileWatcherCertificateProvider> Shared(const FileWatcherConfig& config);

  // Starts the provider's thread, which reads the files at once. Reads no
  // file itself. `config` must be valid (ValidateFileWatcherConfig).
  explicit FileWatcherCertificateProvider(FileWatcherConfig config, Options options);
  // Stops and joins the thread (it never blocks on anything but a file
  // read). Subscriptions may outlive the provider: they hear nothing more.
  ~FileWatcherCertificateProvider();
  FileWatcherCertificateProvider(const FileWatcherCertificateProvider&) = delete;
  FileWatcherCertificateProvider& operator=(const FileWatcherCertificateProvider&) = delete;

  const FileWatcherConfig& config() const { return config_; }

  // The newest good material; null until a read succeeded. Any thread.
  std::shared_ptr<const CertificateMaterial> Current() const;
  // Why the last read failed; OK after a good read or before any. Any thread.
  Status last_error() const;
  // Reads finished so far, good or not. Any thread.
  uint64_t reads() const;

  // Blocks until `reads()` reaches `count` or `timeout` passes; whether it
  // did. Not on a loop thread (for tests and for embedders that want the
  // first material before they start).
  bool WaitForReads(uint64_t count, std::chrono::milliseconds timeout) const;

  // Asks the thread to read the files now.
  void RefreshNow();

  // On `loop`: waits until the first read of the files ended, good or not
  // (then Current() and last_error() say how); CANCELLED if the waiting
  // task is cancelled.
  Task<Status> WaitForFirstRead(Loop& loop);

  // Calls `on_read` on `loop` after every read of the files, good or not
  // (Current()'s version says whether anything changed), until the
  // subscription is destroyed. Create it anywhere; destroy it on its loop,
  // before the loop ends.
  class Subscription;
  std::unique_ptr<Subscription> Subscribe(Loop& loop, std::function<void()> on_read);

 private:
  struct State;
  const FileWatcherConfig config_;
  std::shared_ptr<State> state_;
};

class FileWatcherCertificateProvider::Subscription {
 public:
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  friend class FileWatcherCertificateProvider;
  struct Watcher;
  Subscription(std::shared_ptr<State> state, std::shared_ptr<Watcher> watcher);
  std::shared_ptr<State> state_;
  std::shared_ptr<Watcher> watcher_;
};

}  // namespace uxds
