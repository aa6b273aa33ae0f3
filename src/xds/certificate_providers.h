// A29: the bootstrap's certificate provider instances ("certificate_providers")
// and the plugin uxds has for them, gRPC's `file_watcher`.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tls/certificate_provider.h"
#include "uxds/bootstrap.h"
#include "uxds/log.h"
#include "uxds/loop.h"
#include "uxds/task.h"
#include "xds/validation_errors.h"

namespace uxds {

// The only plugin, as gRPC names it.
inline constexpr std::string_view kFileWatcherPlugin = "file_watcher";

// The shortest period files are read at, as gRPC's file watcher has it: a
// shorter refresh_interval (zero or negative too) reads as this, with a log
// line.
inline constexpr std::chrono::seconds kMinRefreshInterval{1};

// Whether a clamp of refresh_interval is logged: once per bootstrap, when it
// is loaded, not again each time a provider is looked up.
enum class RefreshClampLog { kLog, kQuiet };

// A29/A65's "refresh_interval": a google.protobuf.Duration in its JSON form
// ("600s"), read as at least kMinRefreshInterval and at most a year. `text`
// is null for a value that is not a string. Reports at the current field of
// `errors` (the caller's ".refresh_interval", also named in the log line).
std::optional<std::chrono::milliseconds> ParseRefreshInterval(const std::string* text,
                                                              ValidationErrors& errors,
                                                              RefreshClampLog log);

// Parses a file_watcher "config" object (compact JSON text) and checks it
// by gRPC's rules; reports at the current field of `errors`, which the
// caller has scoped to the config.
FileWatcherConfig ParseFileWatcherConfig(std::string_view config_json, ValidationErrors& errors,
                                         RefreshClampLog log);

// At certificate_providers["<name>"]: the plugin is one uxds has (gRPC
// refuses a bootstrap naming another) and its config is valid.
void CheckCertificateProvider(const CertificateProviderConfig& provider, ValidationErrors& errors,
                              RefreshClampLog log);

// The provider for an instance that xDS security config names (A29's
// `instance_name`). Shared with every channel and server naming an instance
// of the same config; reads no file on the calling thread. NOT_FOUND when
// the bootstrap has no such instance (A29: the resource is NACKed).
StatusOr<std::shared_ptr<FileWatcherCertificateProvider>> CertificateProviderFor(
    const Bootstrap& bootstrap, std::string_view instance_name);

// One instance that xDS security config names, as a connection's handshake
// reads it (A29: the roots or the identity of a channel's or a server's
// connections). Immutable once made: any thread.
class CertificateInstance {
 public:
  // An instance the bootstrap lacks (the decoders NACK such resources, so
  // only a bootstrap built in code can) fails every Material().
  CertificateInstance(const Bootstrap& bootstrap, std::string name);

  const std::string& name() const { return name_; }

  // On `loop`: waits for the provider's first read of its files, then its
  // newest good material; UNAVAILABLE naming the instance when it has none
  // (it is then asked to read its files again now).
  Task<StatusOr<std::shared_ptr<const CertificateMaterial>>> Material(Loop& loop) const;

 private:
  std::string name_;
  StatusOr<std::shared_ptr<FileWatcherCertificateProvider>> provider_;
};

}  // namespace uxds
