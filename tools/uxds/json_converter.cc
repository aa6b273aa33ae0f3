#include "json_converter.h"

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <system_error>

#include "tool_config.h"

namespace uxds::tool {
namespace {

constexpr char kProgramName[] = "uxds-json-to-proto";
constexpr char kDescriptorSetName[] = "xds_resources_descriptors.pb";
// A huge resource takes the converter a while; a hung one must still end
// the wait.
constexpr auto kReplyTimeout = std::chrono::seconds(60);

std::filesystem::path RunningBinaryDir() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : self.parent_path();
}

// The first of: $env_var, each candidate; or an error listing them.
StatusOr<std::string> FindFile(const char* what, const char* env_var,
                               const std::vector<std::filesystem::path>& candidates) {
  if (const char* set = std::getenv(env_var); set != nullptr && *set != '\0') {
    if (access(set, R_OK) == 0) return std::string(set);
    return NotFoundError(std::string(what) + ": " + env_var + "=" + set + " is not readable");
  }
  std::string looked;
  for (const std::filesystem::path& candidate : candidates) {
    if (candidate.empty()) continue;
    if (access(candidate.c_str(), R_OK) == 0) return candidate.lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + candidate.lexically_normal().string();
  }
  return NotFoundError(std::string(what) + " not found (looked at " + looked + "; set " + env_var +
                       ")");
}

std::string JoinCommas(const std::vector<std::string>& parts) {
  std::string joined;
  for (const std::string& part : parts) joined += (joined.empty() ? "" : ",") + part;
  return joined;
}

StatusOr<std::string> HexToBytes(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return InternalError("converter reply: odd hex length");
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = nibble(hex[i]), low = nibble(hex[i + 1]);
    if (high < 0 || low < 0) return InternalError("converter reply: not hex");
    bytes.push_back(static_cast<char>(high * 16 + low));
  }
  return bytes;
}

// "word word ..." split at single spaces (empty words kept).
std::vector<std::string_view> SplitSpaces(std::string_view line, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) break;
    parts.push_back(line.substr(0, space));
    line.remove_prefix(space + 1);
  }
  parts.push_back(line);
  return parts;
}

StatusOr<size_t> ParseLineNumber(std::string_view text) {
  size_t number = 0;
  if (text.empty() || text.size() > 9) return InternalError("converter reply: bad line number");
  for (const char c : text) {
    if (c < '0' || c > '9') return InternalError("converter reply: bad line number");
    number = number * 10 + static_cast<size_t>(c - '0');
  }
  return number;
}

StatusOr<JsonConverter::Result> ParseReply(std::string_view reply) {
  if (reply.rfind("error ", 0) == 0) {
    const std::vector<std::string_view> parts = SplitSpaces(reply.substr(6), 2);
    StatusOr<size_t> line = ParseLineNumber(parts[0]);
    if (!line.ok()) return line.status();
    return JsonConverter::Result(
        JsonTextError{*line, parts.size() > 1 ? std::string(parts[1]) : std::string()});
  }
  if (reply.rfind("ok ", 0) != 0) {
    return InternalError("converter reply: \"" + std::string(reply.substr(0, 80)) + "\"");
  }
  const std::vector<std::string_view> parts = SplitSpaces(reply.substr(3), 4);
  if (parts.size() != 4) return InternalError("converter reply: too few fields");
  ConvertedMessage message;
  message.type_url = std::string(parts[0]);
  StatusOr<size_t> name_line = ParseLineNumber(parts[1]);
  if (!name_line.ok()) return name_line.status();
  message.name_line = *name_line;
  StatusOr<std::string> name = HexToBytes(parts[2]);
  if (!name.ok()) return name.status();
  message.name = *std::move(name);
  StatusOr<std::string> value = HexToBytes(parts[3]);
  if (!value.ok()) return value.status();
  message.value = *std::move(value);
  return JsonConverter::Result(std::move(message));
}

}  // namespace

StatusOr<std::string> FindJsonToProtoProgram() {
  const std::filesystem::path here = RunningBinaryDir();
  return FindFile(kProgramName, "UXDS_JSON_TO_PROTO",
                  {here.empty() ? here : here / kProgramName,
                   here.empty() ? here : here / ".." / "json_to_proto" / kProgramName,
                   std::filesystem::path(UXDS_INSTALL_LIBEXECDIR) / kProgramName});
}

StatusOr<std::string> FindResourceDescriptorSet() {
  const std::filesystem::path here = RunningBinaryDir();
  return FindFile(kDescriptorSetName, "UXDS_RESOURCE_DESCRIPTORS",
                  {here.empty() ? here : here / kDescriptorSetName,
                   here.empty() ? here : here / ".." / ".." / "proto" / kDescriptorSetName,
                   std::filesystem::path(UXDS_INSTALL_DATADIR) / kDescriptorSetName});
}

JsonConverter::JsonConverter(std::vector<std::string> message_types)
    : types_list_(JoinCommas(message_types)) {}

Status JsonConverter::Start() {
  StatusOr<std::string> program = FindJsonToProtoProgram();
  if (!program.ok()) return program.status();
  StatusOr<std::string> descriptors = FindResourceDescriptorSet();
  if (!descriptors.ok()) return descriptors.status();
  command_ = *program + " " + *descriptors;
  try {
    child_ = Subprocess::Start({*program, *descriptors}, {}, /*pipe_stdin=*/true);
  } catch (const std::exception& e) {
    return UnavailableError(std::string("cannot start ") + command_ + ": " + e.what());
  }
  return OkStatus();
}

StatusOr<JsonConverter::Result> JsonConverter::Convert(std::string_view text) {
  if (!child_.has_value()) {
    if (Status started = Start(); !started.ok()) return started;
  }
  const std::string request =
      types_list_ + " " + std::to_string(text.size()) + "\n" + std::string(text);
  std::optional<std::string> reply;
  if (child_->WriteLine(request)) reply = child_->ReadLine(kReplyTimeout);
  if (!reply.has_value()) {
    child_.reset();  // killed and reaped; the next call starts a fresh one
    return UnavailableError("the JSON converter (" + command_ + ") did not answer");
  }
  child_->ClearLines();
  return ParseReply(*reply);
}

}  // namespace uxds::tool
