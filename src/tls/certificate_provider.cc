#include "tls/certificate_provider.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "uxds/log.h"

namespace uxds {

using tls_internal::ConfigFile;

Status ValidateFileWatcherConfig(const FileWatcherConfig& config) {
  if (config.certificate_file.empty() != config.private_key_file.empty()) {
    return InvalidArgumentError(
        "fields \"certificate_file\" and \"private_key_file\" must be both set or both unset");
  }
  if (config.certificate_file.empty() && config.ca_certificate_file.empty()) {
    return InvalidArgumentError(
        "at least one of \"certificate_file\" and \"ca_certificate_file\" must be specified");
  }
  if (config.refresh_interval <= std::chrono::milliseconds::zero()) {
    return InvalidArgumentError("field \"refresh_interval\" must be positive");
  }
  if (config.refresh_interval > FileWatcherConfig::kMaxRefreshInterval) {
    return InvalidArgumentError("field \"refresh_interval\" must be at most a year");
  }
  return OkStatus();
}

namespace {

// A burst of changes (an editor's several writes, a secret volume's
// swap) is read once, this long after its last event, and no later than
// kLongestSettle after its first.
constexpr std::chrono::milliseconds kSettle{100};
constexpr std::chrono::milliseconds kLongestSettle{1000};
// A file that changes while it is read is read again, this many times.
constexpr int kReadAttempts = 3;

struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  timespec modified{};
  bool operator==(const FileIdentity& other) const {
    return device == other.device && inode == other.inode && size == other.size &&
           modified.tv_sec == other.modified.tv_sec && modified.tv_nsec == other.modified.tv_nsec;
  }
};

std::optional<FileIdentity> Identify(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileIdentity{info.st_dev, info.st_ino, info.st_size, info.st_mtim};
}

// The bytes of one file, read whole while it did not change: a file being
// rewritten as it is read is read again (gRPC's file_watcher compares
// modification times around its read the same way).
StatusOr<std::string> ReadSettledFile(const ConfigFile& file) {
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    std::optional<FileIdentity> before = Identify(file.path);
    StatusOr<std::string> contents = tls_internal::ReadConfigFile(file);
    if (!contents.ok()) return contents.status();
    if (before.has_value() && before == Identify(file.path)) return contents;
  }
  return tls_internal::FileError(file, "kept changing while it was read");
}

// The raw bytes of a config's files; empty for a file it does not name.
struct FileBytes {
  std::string identity;
  std::string key;
  std::string roots;
  bool operator==(const FileBytes&) const = default;
};

StatusOr<FileBytes> ReadFiles(const FileWatcherConfig& config) {
  FileBytes bytes;
  if (!config.certificate_file.empty()) {
    StatusOr<std::string> identity =
        ReadSettledFile(ConfigFile{"certificate_file", config.certificate_file});
    if (!identity.ok()) return identity.status();
    StatusOr<std::string> key =
        ReadSettledFile(ConfigFile{"private_key_file", config.private_key_file});
    if (!key.ok()) return key.status();
    bytes.identity = std::move(*identity);
    bytes.key = std::move(*key);
  }
  if (!config.ca_certificate_file.empty()) {
    StatusOr<std::string> roots =
        ReadSettledFile(ConfigFile{"ca_certificate_file", config.ca_certificate_file});
    if (!roots.ok()) return roots.status();
    bytes.roots = std::move(*roots);
  }
  return bytes;
}

StatusOr<std::unique_ptr<CertificateMaterial>> ParseFiles(const FileWatcherConfig& config,
                                                          const FileBytes& bytes) {
  auto material = std::make_unique<CertificateMaterial>();
  if (!config.certificate_file.empty()) {
    const ConfigFile cert_file{"certificate_file", config.certificate_file};
    const ConfigFile key_file{"private_key_file", config.private_key_file};
    StatusOr<tls_internal::X509List> chain =
        tls_internal::ParseCertificates(cert_file, bytes.identity);
    if (!chain.ok()) return chain.status();
    StatusOr<bssl::UniquePtr<EVP_PKEY>> key = tls_internal::ParsePrivateKey(key_file, bytes.key);
    if (!key.ok()) return key.status();
    // A rotation caught between its two files: the new key with the old
    // certificate, or the reverse.
    UXDS_RETURN_IF_ERROR(tls_internal::CheckKeyMatchesCertificate(cert_file, (*chain)[0].get(),
                                                                  key_file, key->get()));
    material->identity_chain = std::move(*chain);
    material->private_key = std::move(*key);
  }
  if (!config.ca_certificate_file.empty()) {
    StatusOr<tls_internal::X509List> roots = tls_internal::ParseCertificates(
        ConfigFile{"ca_certificate_file", config.ca_certificate_file}, bytes.roots);
    if (!roots.ok()) return roots.status();
    material->roots = std::move(*roots);
  }
  return material;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

struct FileWatcherCertificateProvider::Subscription::Watcher {
  Loop* loop;
  std::function<void()> on_read;
};

struct FileWatcherCertificateProvider::State {
  State(FileWatcherConfig c, Options o) : config(std::move(c)), options(o) {}

  const FileWatcherConfig config;
  const Options options;

  mutable std::mutex mu;
  mutable std::condition_variable read_done;
  std::shared_ptr<const CertificateMaterial> material;  // guarded by mu
  Status error;                                         // guarded by mu
  uint64_t reads = 0;                                   // guarded by mu
  // Guarded by mu. A subscription takes its watcher out under mu before it
  // frees it, so a listed watcher's loop is alive while mu is held; the
  // closures posted to it hold the watcher weakly.
  struct Listed {
    Subscription::Watcher* watcher;
    std::weak_ptr<Subscription::Watcher> weak;
  };
  std::vector<Listed> watchers;

  // The provider's thread only.
  FileBytes good_bytes;
  std::string logged_error;

  int wake_fd = -1;  // eventfd: a refresh asked for, or the end
  std::atomic<bool> stopping{false};
  std::thread thread;

  void Run();
  void ReadOnce();
  void Publish(std::unique_ptr<CertificateMaterial> fresh, Status failure);
};

void FileWatcherCertificateProvider::State::ReadOnce() {
  StatusOr<FileBytes> bytes = ReadFiles(config);
  Status failure = bytes.status();
  std::unique_ptr<CertificateMaterial> fresh;
  if (bytes.ok() && (*bytes != good_bytes || good_bytes == FileBytes{})) {
    StatusOr<std::unique_ptr<CertificateMaterial>> parsed = ParseFiles(config, *bytes);
    if (parsed.ok()) {
      good_bytes = std::move(*bytes);
      fresh = std::move(*parsed);
    } else {
      failure = parsed.status();
    }
  }
  // One line per new problem, and one when the files are good again.
  const std::string what = "certificate provider file_watcher: ";
  if (!failure.ok()) {
    if (failure.message() != logged_error) {
      logged_error = std::string(failure.message());
      Log(LogSeverity::kWarning,
          what + logged_error +
              (good_bytes == FileBytes{} ? "; no certificates yet"
                                         : "; keeping the certificates read before"));
    }
  } else if (!logged_error.empty()) {
    logged_error.clear();
    Log(LogSeverity::kInfo, what + "files read again");
  }
  Publish(std::move(fresh), std::move(failure));
}

void FileWatcherCertificateProvider::State::Publish(std::unique_ptr<CertificateMaterial> fresh,
                                                    Status failure) {
  std::lock_guard lock(mu);
  ++reads;
  error = std::move(failure);
  if (fresh != nullptr) {
    fresh->version = material != nullptr ? material->version + 1 : 1;
    material = std::move(fresh);
  }
  for (const Listed& listed : watchers) {
    listed.watcher->loop->Post([weak = listed.weak] {
      if (auto watcher = weak.lock()) watcher->on_read();
    });
  }
  read_done.notify_all();
}

void FileWatcherCertificateProvider::State::Run() {
  using Clock = std::chrono::steady_clock;
  int inotify_fd = -1;
  if (options.watch_file_changes) {
    inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd >= 0) {
      std::set<std::string> directories;
      for (const std::string* file :
           {&config.certificate_file, &config.private_key_file, &config.ca_certificate_file}) {
        if (!file->empty()) directories.insert(DirectoryOf(*file));
      }
      // Directories, not files: a file replaced by a rename (an atomic
      // write, a secret volume's symlink swap) is seen there.
      for (const std::string& directory : directories) {
        if (inotify_add_watch(inotify_fd, directory.c_str(),
                              IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
                                  IN_ATTRIB) < 0) {
          Log(LogSeverity::kWarning, "certificate provider file_watcher: cannot watch " +
                                         directory + ": " + std::strerror(errno) +
                                         "; reading every refresh_interval only");
        }
      }
    } else {
      // Out of inotify instances (fs.inotify.max_user_instances) or fds:
      // the interval alone re-reads, and an operator should know why a
      // rotation takes that long.
      Log(LogSeverity::kWarning, std::string("certificate provider file_watcher: inotify: ") +
                                     std::strerror(errno) +
                                     "; reading every refresh_interval only");
    }
  }
  Clock::time_point next_read = Clock::now();
  // When the burst of changes being waited out must be read; max: none.
  Clock::time_point burst_end = Clock::time_point::max();
  while (!stopping.load(std::memory_order_acquire)) {
    Clock::time_point now = Clock::now();
    if (now >= next_read) {
      ReadOnce();
      burst_end = Clock::time_point::max();
      now = Clock::now();
      next_read = now + config.refresh_interval;
    }
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_read - now).count();
    // Without its eventfd (none could be made) the thread looks for the end
    // every 100 ms instead of being woken.
    if (wake_fd < 0) wait = std::min<int64_t>(wait, 100);
    std::array<pollfd, 2> fds{pollfd{wake_fd, POLLIN, 0}, pollfd{inotify_fd, POLLIN, 0}};
    const int ready = poll(fds.data(), inotify_fd >= 0 ? 2 : 1,
                           static_cast<int>(std::clamp<int64_t>(wait, 0, INT_MAX)));
    if (ready <= 0) continue;
    now = Clock::now();
    if (fds[0].revents != 0) {
      uint64_t count;
      (void)!read(wake_fd, &count, sizeof count);
      next_read = now;  // RefreshNow(), or the end (checked above)
    }
    if (inotify_fd >= 0 && fds[1].revents != 0) {
      alignas(inotify_event) char events[4096];
      while (read(inotify_fd, events, sizeof events) > 0) {
      }
      if (burst_end == Clock::time_point::max()) burst_end = now + kLongestSettle;
      // Each event of a burst moves the read later, up to the burst's end.
      next_read = std::min(now + kSettle, burst_end);
    }
  }
  if (inotify_fd >= 0) close(inotify_fd);
}

std::shared_ptr<FileWatcherCertificateProvider> FileWatcherCertificateProvider::Shared(
    const FileWatcherConfig& config) {
  static std::mutex mu;
  static std::vector<std::pair<FileWatcherConfig, std::weak_ptr<FileWatcherCertificateProvider>>>
      live;
  std::lock_guard lock(mu);
  std::erase_if(live, [](const auto& entry) { return entry.second.expired(); });
  for (const auto& [known, weak] : live) {
    if (known != config) continue;
    if (auto provider = weak.lock()) return provider;
  }
  auto provider = std::make_shared<FileWatcherCertificateProvider>(config, Options{});
  live.emplace_back(config, provider);
  return provider;
}

FileWatcherCertificateProvider::FileWatcherCertificateProvider(FileWatcherConfig config,
                                                               Options options)
    : config_(config), state_(std::make_shared<State>(std::move(config), options)) {
  state_->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (state_->wake_fd < 0) {
    Log(LogSeverity::kWarning, std::string("certificate provider file_watcher: eventfd: ") +
                                   std::strerror(errno) + "; RefreshNow() waits for the interval");
  }
  state_->thread = std::thread([state = state_.get()] { state->Run(); });
}

FileWatcherCertificateProvider::~FileWatcherCertificateProvider() {
  state_->stopping.store(true, std::memory_order_release);
  const uint64_t one = 1;
  if (state_->wake_fd >= 0) (void)!write(state_->wake_fd, &one, sizeof one);
  state_->thread.join();
  if (state_->wake_fd >= 0) close(state_->wake_fd);
  state_->wake_fd = -1;
}

std::shared_ptr<const CertificateMaterial> FileWatcherCertificateProvider::Current() const {
  std::lock_guard lock(state_->mu);
  return state_->material;
}

Status FileWatcherCertificateProvider::last_error() const {
  std::lock_guard lock(state_->mu);
  return state_->error;
}

uint64_t FileWatcherCertificateProvider::reads() const {
  std::lock_guard lock(state_->mu);
  return state_->reads;
}

bool FileWatcherCertificateProvider::WaitForReads(uint64_t count,
                                                  std::chrono::milliseconds timeout) const {
  std::unique_lock lock(state_->mu);
  return state_->read_done.wait_for(lock, timeout, [&] { return state_->reads >= count; });
}

void FileWatcherCertificateProvider::RefreshNow() {
  const uint64_t one = 1;
  if (state_->wake_fd >= 0) (void)!write(state_->wake_fd, &one, sizeof one);
}

std::unique_ptr<FileWatcherCertificateProvider::Subscription>
FileWatcherCertificateProvider::Subscribe(Loop& loop, std::function<void()> on_read) {
  auto watcher =
      std::make_shared<Subscription::Watcher>(Subscription::Watcher{&loop, std::move(on_read)});
  {
    std::lock_guard lock(state_->mu);
    state_->watchers.push_back(State::Listed{watcher.get(), watcher});
  }
  return std::unique_ptr<Subscription>(new Subscription(state_, std::move(watcher)));
}

Task<Status> FileWatcherCertificateProvider::WaitForFirstRead(Loop& loop) {
  if (reads() > 0) co_return OkStatus();
  Event read(loop);
  std::unique_ptr<Subscription> subscription = Subscribe(loop, [&read] { read.Set(); });
  // A read that ended before the subscription was listed posted nothing.
  if (reads() > 0) co_return OkStatus();
  Status waited = co_await read.Wait();
  co_return waited;
}

FileWatcherCertificateProvider::Subscription::Subscription(std::shared_ptr<State> state,
                                                           std::shared_ptr<Watcher> watcher)
    : state_(std::move(state)), watcher_(std::move(watcher)) {}

FileWatcherCertificateProvider::Subscription::~Subscription() {
  std::lock_guard lock(state_->mu);
  std::erase_if(state_->watchers,
                [&](const State::Listed& listed) { return listed.watcher == watcher_.get(); });
}

}  // namespace uxds
