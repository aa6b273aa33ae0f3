#include "control_plane_snapshot.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <variant>

#include "common/json_text_positions.h"

namespace uxds::tool {
namespace {

constexpr char kErrorsFile[] = "errors.json";
// Bounds on what a directory may hold: a file larger than this is reported,
// not read, and a directory with more files is refused.
constexpr size_t kMaxFileBytes = 16u << 20;
constexpr size_t kMaxFiles = 100000;

// The *.json files of DIR (not errors.json, not hidden ones such as an
// editor's swap files), sorted so that every load sees them in one order.
StatusOr<std::vector<std::string>> ResourceFileNames(const std::string& dir) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) {
    return NotFoundError("cannot read directory " + dir + ": " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name.empty() || name[0] == '.' || name.size() <= 5 ||
        name.compare(name.size() - 5, 5, ".json") != 0) {
      continue;
    }
    names.push_back(name);
    if (names.size() > kMaxFiles) {
      closedir(handle);
      return ResourceExhaustedError(dir + ": more than " + std::to_string(kMaxFiles) +
                                    " .json files");
    }
  }
  closedir(handle);
  std::sort(names.begin(), names.end());
  return names;
}

// A file listed for this load that was deleted (or renamed away) before it
// could be read: absent from this load, as if listed a moment later. The
// directory watch sees the deletion and loads again anyway.
struct FileGone {};

// The file's text, a FileError, or FileGone.
std::variant<std::string, FileError, FileGone> ReadText(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return FileGone{};
    return FileError{path, 0, std::strerror(errno)};
  }
  if (!S_ISREG(info.st_mode)) return FileError{path, 0, "not a regular file"};
  if (static_cast<size_t>(info.st_size) > kMaxFileBytes) {
    return FileError{path, 0, "larger than " + std::to_string(kMaxFileBytes) + " bytes"};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    if (errno == ENOENT) return FileGone{};
    return FileError{path, 0, std::string("cannot open: ") + std::strerror(errno)};
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool IsServedTypeUrl(const std::string& type_url) {
  return type_url == kListenerTypeUrl || type_url == kRouteConfigurationTypeUrl ||
         type_url == kClusterTypeUrl || type_url == kClusterLoadAssignmentTypeUrl;
}

// DIR/errors.json: [{"type":"...","name":"...","code":"NOT_FOUND","message":"..."}].
void LoadErrorsFile(const std::string& path, const std::string& text, Snapshot& snapshot,
                    std::vector<FileError>& errors) {
  nlohmann::json list;
  try {
    list = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    errors.push_back({path, LineOfOffset(text, e.byte > 0 ? e.byte - 1 : 0), "invalid JSON"});
    return;
  }
  if (!list.is_array()) {
    errors.push_back({path, 1, "must be an array of {type, name, code, message}"});
    return;
  }
  // Keys are located by their n-th appearance, entry by entry.
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& entry = list[i];
    const std::string where = "[" + std::to_string(i) + "]";
    auto fail = [&](const std::string& key, const std::string& message) {
      size_t line = key.empty() ? 0 : LineOfKey(text, key, 0);
      errors.push_back(
          {path, line == 0 ? 1 : line, where + (key.empty() ? "" : "." + key) + ": " + message});
    };
    if (!entry.is_object()) {
      fail("", "must be an object");
      continue;
    }
    bool ok = true;
    for (const auto& [key, value] : entry.items()) {
      if (key != "type" && key != "name" && key != "code" && key != "message") {
        fail(key, "unknown field");
        ok = false;
      } else if (!value.is_string()) {
        fail(key, "must be a string");
        ok = false;
      }
    }
    if (!ok) continue;
    const std::string type = entry.value("type", "");
    const std::string name = entry.value("name", "");
    const std::string code_name = entry.value("code", "NOT_FOUND");
    if (!IsServedTypeUrl(type)) {
      fail("type", "\"" + type +
                       "\" is not a Listener, RouteConfiguration, Cluster or "
                       "ClusterLoadAssignment type URL");
      continue;
    }
    if (name.empty()) {
      fail("name", "must not be empty");
      continue;
    }
    const std::optional<StatusCode> code = StatusCodeFromName(code_name);
    if (!code.has_value() || *code == StatusCode::kOk) {
      fail("code", "\"" + code_name + "\" is not a non-OK gRPC status code name");
      continue;
    }
    snapshot.errors[type][name] = {*code, entry.value("message", "")};
  }
}

}  // namespace

std::vector<std::string> ServedMessageTypes() {
  std::vector<std::string> types;
  for (const char* url : {kListenerTypeUrl, kRouteConfigurationTypeUrl, kClusterTypeUrl,
                          kClusterLoadAssignmentTypeUrl}) {
    types.emplace_back(std::string_view(url).substr(kTypeUrlPrefix.size()));
  }
  return types;
}

bool IsFullStateType(const std::string& type_url) {
  return type_url == kListenerTypeUrl || type_url == kClusterTypeUrl;
}

size_t Snapshot::resource_count() const {
  size_t count = 0;
  for (const auto& [type, named] : resources) count += named.size();
  return count;
}

StatusOr<std::string> DirectoryFingerprint(const std::string& dir) {
  StatusOr<std::vector<std::string>> names = ResourceFileNames(dir);
  if (!names.ok()) return names.status();
  names->push_back(kErrorsFile);
  std::string fingerprint;
  for (const std::string& name : *names) {
    struct stat info {};
    if (stat((dir + "/" + name).c_str(), &info) != 0) continue;
    fingerprint += name + '\0' + std::to_string(info.st_size) + ' ' +
                   std::to_string(info.st_mtim.tv_sec) + '.' +
                   std::to_string(info.st_mtim.tv_nsec) + ' ' + std::to_string(info.st_ino) + '\n';
  }
  return fingerprint;
}

StatusOr<DirectoryLoad> LoadDirectory(const std::string& dir, JsonConverter& converter) {
  StatusOr<std::vector<std::string>> names = ResourceFileNames(dir);
  if (!names.ok()) return names.status();
  auto snapshot = std::make_shared<Snapshot>();
  DirectoryLoad load;
  // type URL -> name -> the file that defined it (for duplicate reports).
  std::map<std::string, std::map<std::string, std::string>> defined_in;
  for (const std::string& name : *names) {
    const std::string path = dir + "/" + name;
    std::variant<std::string, FileError, FileGone> text = ReadText(path);
    if (std::holds_alternative<FileGone>(text)) continue;
    if (auto* error = std::get_if<FileError>(&text)) {
      load.errors.push_back(std::move(*error));
      continue;
    }
    const std::string& contents = std::get<std::string>(text);
    if (name == kErrorsFile) {
      LoadErrorsFile(path, contents, *snapshot, load.errors);
      continue;
    }
    StatusOr<JsonConverter::Result> converted = converter.Convert(contents);
    if (!converted.ok()) return converted.status();
    if (auto* error = std::get_if<JsonTextError>(&*converted)) {
      load.errors.push_back({path, error->line, error->message});
      continue;
    }
    ConvertedMessage& message = std::get<ConvertedMessage>(*converted);
    const size_t line = message.name_line == 0 ? 1 : message.name_line;
    if (message.name.empty()) {
      load.errors.push_back({path, line, "the resource has no name"});
      continue;
    }
    auto [it, inserted] = defined_in[message.type_url].emplace(message.name, path);
    if (!inserted) {
      load.errors.push_back({path, line,
                             "a second resource named \"" + message.name + "\" (the first is in " +
                                 it->second + ")"});
      continue;
    }
    snapshot->resources[message.type_url][message.name] = std::move(message.value);
  }
  if (load.errors.empty()) load.snapshot = std::move(snapshot);
  return load;
}

}  // namespace uxds::tool
