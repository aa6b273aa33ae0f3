#include "xds/certificate_providers.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace uxds {

namespace {

using Json = nlohmann::json;

// google.protobuf.Duration's JSON form (proto3 JSON mapping): decimal
// seconds with up to nine fraction digits and an "s", e.g. "60s", "0.5s".
std::optional<std::chrono::nanoseconds> ParseJsonDuration(std::string_view text) {
  if (text.size() < 2 || text.back() != 's') return std::nullopt;
  text.remove_suffix(1);
  bool negative = false;
  if (text.front() == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  const size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  if (whole.empty() || whole.size() > 12) return std::nullopt;
  if (dot != std::string_view::npos && (fraction.empty() || fraction.size() > 9)) {
    return std::nullopt;
  }
  int64_t seconds = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  int64_t nanos = 0;
  for (size_t i = 0; i < 9; ++i) {
    const char c = i < fraction.size() ? fraction[i] : '0';
    if (c < '0' || c > '9') return std::nullopt;
    nanos = nanos * 10 + (c - '0');
  }
  // Duration's range: +-315,576,000,000 seconds.
  if (seconds > 315'576'000'000) return std::nullopt;
  // A valid Duration can exceed what int64 nanoseconds hold (about 292
  // years): saturate rather than overflow.
  constexpr int64_t kMaxNanosecondSeconds =
      std::chrono::nanoseconds::max().count() / 1'000'000'000 - 1;
  if (seconds > kMaxNanosecondSeconds) {
    return negative ? std::chrono::nanoseconds::min() : std::chrono::nanoseconds::max();
  }
  std::chrono::nanoseconds value = std::chrono::seconds(seconds) + std::chrono::nanoseconds(nanos);
  return negative ? -value : value;
}

void ReadFileField(const Json& config, const char* name, std::string& out,
                   ValidationErrors& errors) {
  auto it = config.find(name);
  if (it == config.end()) return;
  if (!it->is_string()) {
    auto field = errors.Scope(std::string(".") + name);
    errors.Add("is not a string");
    return;
  }
  out = it->get<std::string>();
}

}  // namespace

std::optional<std::chrono::milliseconds> ParseRefreshInterval(const std::string* text,
                                                              ValidationErrors& errors,
                                                              RefreshClampLog log) {
  std::optional<std::chrono::nanoseconds> interval;
  if (text != nullptr) interval = ParseJsonDuration(*text);
  if (!interval.has_value()) {
    errors.Add("is not a google.protobuf.Duration (e.g. \"600s\")");
    return std::nullopt;
  }
  if (*interval < kMinRefreshInterval) {
    // gRPC's file watcher reads at most once a second and says so, rather
    // than refusing the config: a bootstrap gRPC takes, uxds takes.
    if (log == RefreshClampLog::kLog) {
      std::string_view field = errors.CurrentField();
      if (!field.empty() && field.front() == '.') field.remove_prefix(1);
      Log(LogSeverity::kWarning, std::string(field) + " \"" + *text +
                                     "\" is below the minimum of 1s: the files are read every 1s");
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(kMinRefreshInterval);
  }
  if (*interval > FileWatcherConfig::kMaxRefreshInterval) {
    // Reading once a year is reading never in practice; the cap keeps the
    // reading thread's deadline arithmetic in range.
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        FileWatcherConfig::kMaxRefreshInterval);
  }
  return std::chrono::ceil<std::chrono::milliseconds>(*interval);
}

FileWatcherConfig ParseFileWatcherConfig(std::string_view config_json, ValidationErrors& errors,
                                         RefreshClampLog log) {
  FileWatcherConfig config;
  Json json = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    errors.Add("is not an object");
    return config;
  }
  ReadFileField(json, "certificate_file", config.certificate_file, errors);
  ReadFileField(json, "private_key_file", config.private_key_file, errors);
  ReadFileField(json, "ca_certificate_file", config.ca_certificate_file, errors);
  if (auto it = json.find("refresh_interval"); it != json.end()) {
    auto field = errors.Scope(".refresh_interval");
    const std::string text = it->is_string() ? it->get<std::string>() : std::string();
    if (auto interval = ParseRefreshInterval(it->is_string() ? &text : nullptr, errors, log)) {
      config.refresh_interval = *interval;
    }
  }
  if (!errors.FieldOrSubfieldsHaveErrors()) {
    if (Status status = ValidateFileWatcherConfig(config); !status.ok()) {
      errors.Add(status.message());
    }
  }
  return config;
}

void CheckCertificateProvider(const CertificateProviderConfig& provider, ValidationErrors& errors,
                              RefreshClampLog log) {
  if (provider.plugin_name != kFileWatcherPlugin) {
    auto field = errors.Scope(".plugin_name");
    errors.Add("unrecognized plugin name \"" + provider.plugin_name +
               "\" (supported: file_watcher)");
    return;
  }
  auto field = errors.Scope(".config");
  (void)ParseFileWatcherConfig(provider.config_json, errors, log);
}

StatusOr<std::shared_ptr<FileWatcherCertificateProvider>> CertificateProviderFor(
    const Bootstrap& bootstrap, std::string_view instance_name) {
  auto it = bootstrap.certificate_providers.find(instance_name);
  if (it == bootstrap.certificate_providers.end()) {
    return NotFoundError("certificate provider instance \"" + std::string(instance_name) +
                         "\" is not in the bootstrap's certificate_providers");
  }
  // A bootstrap built in code may not have been validated.
  ValidationErrors errors;
  FileWatcherConfig config;
  {
    auto providers = errors.Scope(".certificate_providers");
    auto instance = errors.Scope("[\"" + it->first + "\"]");
    CheckCertificateProvider(it->second, errors, RefreshClampLog::kQuiet);
    if (errors.ok()) {
      auto field = errors.Scope(".config");
      config = ParseFileWatcherConfig(it->second.config_json, errors, RefreshClampLog::kQuiet);
    }
  }
  if (!errors.ok()) return errors.ToStatus("errors validating bootstrap");
  return FileWatcherCertificateProvider::Shared(config);
}

CertificateInstance::CertificateInstance(const Bootstrap& bootstrap, std::string name)
    : name_(std::move(name)), provider_(CertificateProviderFor(bootstrap, name_)) {
  if (!provider_.ok()) provider_ = Status(StatusCode::kUnavailable, provider_.status().message());
}

Task<StatusOr<std::shared_ptr<const CertificateMaterial>>> CertificateInstance::Material(
    Loop& loop) const {
  if (!provider_.ok()) co_return provider_.status();
  FileWatcherCertificateProvider& provider = **provider_;
  const Status waited = co_await provider.WaitForFirstRead(loop);
  if (!waited.ok()) co_return waited;
  std::shared_ptr<const CertificateMaterial> material = provider.Current();
  if (material != nullptr) co_return material;
  // A29: no good read yet (a file missing or bad): nothing to secure a
  // connection with. The provider logged why; ask it to look again now.
  provider.RefreshNow();
  co_return UnavailableError("certificate provider instance \"" + name_ +
                             "\" has no certificates: " + provider.last_error().message());
}

}  // namespace uxds
