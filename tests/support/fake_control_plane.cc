#include "support/fake_control_plane.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <utility>

namespace uxds::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kCommandTimeout = std::chrono::seconds(30);
constexpr milliseconds kExitTimeout = std::chrono::seconds(10);

constexpr std::string_view kBase64Alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

milliseconds Remaining(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? left : milliseconds(0);
}

std::string StringField(const json& object, const char* key) {
  auto it = object.find(key);
  return (it != object.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

std::vector<std::string> StringList(const json& object, const char* key) {
  std::vector<std::string> out;
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) return out;
  for (const json& item : *it) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

ObservedRequest ParseRequest(const json& event) {
  ObservedRequest request;
  request.stream = event.value("stream", int64_t{0});
  request.type_url = StringField(event, "type_url");
  request.version_info = StringField(event, "version_info");
  request.resource_names = StringList(event, "resource_names");
  request.response_nonce = StringField(event, "response_nonce");
  if (auto it = event.find("error_detail"); it != event.end() && it->is_object()) {
    request.error_detail = ObservedErrorDetail{it->value("code", 0), StringField(*it, "message")};
  }
  if (auto it = event.find("node"); it != event.end() && it->is_object()) {
    const json& node = *it;
    ObservedNode observed;
    observed.id = StringField(node, "id");
    observed.cluster = StringField(node, "cluster");
    observed.user_agent_name = StringField(node, "user_agent_name");
    observed.user_agent_version = StringField(node, "user_agent_version");
    observed.client_features = StringList(node, "client_features");
    if (auto locality = node.find("locality"); locality != node.end()) {
      observed.locality_region = StringField(*locality, "region");
      observed.locality_zone = StringField(*locality, "zone");
      observed.locality_sub_zone = StringField(*locality, "sub_zone");
    }
    auto metadata = node.find("metadata");
    observed.metadata_json = metadata != node.end() ? metadata->dump() : "{}";
    request.node = std::move(observed);
  }
  return request;
}

json ResourceJson(const ResponseResource& resource) {
  json out = json::object();
  if (!resource.any_type_url.empty()) {
    out["type_url"] = resource.any_type_url;
    out["value_b64"] = Base64Encode(resource.value);
  } else {
    out["any_b64"] = Base64Encode(resource.serialized_any);
  }
  if (!resource.wrapper_name.empty()) out["wrapper_name"] = resource.wrapper_name;
  if (!resource.wrapper_version.empty()) out["wrapper_version"] = resource.wrapper_version;
  return out;
}

json ResourceErrorsJson(const std::vector<ResourceErrorToSend>& errors) {
  json out = json::array();
  for (const ResourceErrorToSend& error : errors) {
    out.push_back({{"name", error.name}, {"code", error.code}, {"message", error.message}});
  }
  return out;
}

void SetStream(json& command, std::optional<int64_t> stream) {
  if (stream) command["stream"] = *stream;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) group |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) group |= static_cast<uint8_t>(bytes[i + 2]);
    out += kBase64Alphabet[(group >> 18) & 63];
    out += kBase64Alphabet[(group >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64Alphabet[(group >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64Alphabet[group & 63] : '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t group = 0;
    int padding = 0;
    for (size_t j = 0; j < 4; ++j) {
      char c = text[i + j];
      uint32_t sextet = 0;
      if (c == '=' && i + 4 == text.size() && j >= 2) {
        ++padding;
      } else {
        size_t index = kBase64Alphabet.find(c);
        if (index == std::string_view::npos || padding > 0) return std::nullopt;
        sextet = static_cast<uint32_t>(index);
      }
      group = group << 6 | sextet;
    }
    out += static_cast<char>(group >> 16);
    if (padding < 2) out += static_cast<char>((group >> 8) & 0xff);
    if (padding < 1) out += static_cast<char>(group & 0xff);
  }
  return out;
}

// --- CommandedSubprocess --------------------------------------------------

std::optional<CommandedSubprocess> CommandedSubprocess::Start(std::vector<std::string> argv) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    ADD_FAILURE() << "socketpair: " << std::strerror(errno);
    return std::nullopt;
  }
  // The child's end must survive exec; ours stays close-on-exec, so that no
  // other child keeps the channel open and the peer sees end of file when
  // the test closes it.
  if (fcntl(fds[1], F_SETFD, 0) != 0) {
    ADD_FAILURE() << "fcntl: " << std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  argv.push_back("--command-fd");
  argv.push_back(std::to_string(fds[1]));
  std::optional<Subprocess> process;
  try {
    process.emplace(Subprocess::Start(argv));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "starting " << argv[0] << ": " << e.what();
  }
  close(fds[1]);
  if (!process) {
    close(fds[0]);
    return std::nullopt;
  }
  return CommandedSubprocess(std::move(*process), fds[0]);
}

CommandedSubprocess::CommandedSubprocess(Subprocess process, int command_fd)
    : process_(std::move(process)), command_fd_(command_fd) {}

CommandedSubprocess::CommandedSubprocess(CommandedSubprocess&& other) noexcept
    : process_(std::move(other.process_)), command_fd_(std::exchange(other.command_fd_, -1)) {}

CommandedSubprocess& CommandedSubprocess::operator=(CommandedSubprocess&& other) noexcept {
  std::swap(process_, other.process_);
  std::swap(command_fd_, other.command_fd_);
  return *this;
}

CommandedSubprocess::~CommandedSubprocess() {
  if (process_.pid() <= 0) return;  // moved from
  CloseCommands();
  // Reading to end of file lets the child write out what it still holds.
  auto deadline = std::chrono::steady_clock::now() + kExitTimeout;
  while (Remaining(deadline).count() > 0 && process_.ReadLine(Remaining(deadline))) {
  }
  process_.Wait(Remaining(deadline));
}

bool CommandedSubprocess::WriteLine(std::string_view line) {
  if (command_fd_ < 0) return false;
  std::string data(line);
  data += '\n';
  size_t written = 0;
  while (written < data.size()) {
    // MSG_NOSIGNAL: a peer that died must fail the test, not SIGPIPE it.
    ssize_t n = send(command_fd_, data.data() + written, data.size() - written, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

void CommandedSubprocess::CloseCommands() {
  if (command_fd_ >= 0) close(command_fd_);
  command_fd_ = -1;
}

// --- FakeControlPlane -----------------------------------------------------

std::unique_ptr<FakeControlPlane> FakeControlPlane::Start(const FakeControlPlaneOptions& options) {
  std::vector<std::string> argv = {Python(), SourceRoot() + "/tests/peers/fake_control_plane.py",
                                   "--port", std::to_string(options.port)};
  if (!options.tls_cert_file.empty()) {
    argv.insert(argv.end(),
                {"--tls-cert", options.tls_cert_file, "--tls-key", options.tls_key_file});
    if (!options.client_ca_file.empty()) {
      argv.insert(argv.end(), {"--client-ca", options.client_ca_file});
    }
  }
  std::optional<CommandedSubprocess> peer = CommandedSubprocess::Start(argv);
  if (!peer) return nullptr;
  std::optional<std::string> port = peer->process().WaitForLine("PORT ", options.start_timeout);
  if (!port) {
    ADD_FAILURE() << "fake control plane: no PORT line within " << options.start_timeout.count()
                  << " ms (its stderr is above)";
    return nullptr;
  }
  return std::unique_ptr<FakeControlPlane>(
      new FakeControlPlane(std::move(*peer), static_cast<uint16_t>(std::stoi(*port)),
                           options.fail_on_request_violations));
}

FakeControlPlane::FakeControlPlane(CommandedSubprocess peer, uint16_t port,
                                   bool fail_on_request_violations)
    : peer_(std::move(peer)),
      port_(port),
      fail_on_request_violations_(fail_on_request_violations) {}

FakeControlPlane::~FakeControlPlane() {
  if (!fail_on_request_violations_) return;
  for (const std::string& violation : TakeViolations()) {
    ADD_FAILURE() << "the client broke the ADS protocol: " << violation;
  }
}

std::vector<std::string> FakeControlPlane::TakeViolations() {
  // A reply follows every event the control plane wrote before it, and a
  // request's violations are written with the request.
  if (!output_closed_) SendCommand(R"({"cmd":"ping"})");
  return std::exchange(violations_, {});
}

FakeControlPlane::LineKind FakeControlPlane::ReadLineAndDispatch(milliseconds timeout,
                                                                 std::string* reply) {
  if (output_closed_) return LineKind::kClosed;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<std::string> line = peer_.process().ReadLine(timeout);
  if (!line) {
    if (Remaining(deadline).count() > 0) output_closed_ = true;  // end of file, not a timeout
    return output_closed_ ? LineKind::kClosed : LineKind::kTimeout;
  }
  json parsed = json::parse(*line, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    ADD_FAILURE() << "fake control plane printed a line that is not a JSON object: " << *line;
    return LineKind::kEvent;
  }
  if (!parsed.contains("event")) {
    *reply = std::move(*line);
    return LineKind::kReply;
  }
  ObservedEvent event;
  event.kind = StringField(parsed, "event");
  event.stream = parsed.value("stream", int64_t{0});
  event.json = std::move(*line);
  size_t index = events_.size();
  if (event.kind == "request") {
    event.request = ParseRequest(parsed);
    pending_requests_.push_back(index);
  } else if (event.kind == "response_sent") {
    event.type_url = StringField(parsed, "type_url");
    event.version_info = StringField(parsed, "version_info");
    event.nonce = StringField(parsed, "nonce");
    event.automatic = parsed.value("auto", false);
  } else if (event.kind == "stream_opened") {
    pending_opened_.push_back(index);
  } else if (event.kind == "stream_closed") {
    pending_closed_.push_back(index);
  } else if (event.kind == "lrs_stream_opened") {
    pending_lrs_opened_.push_back(index);
  } else if (event.kind == "lrs_stream_closed") {
    pending_lrs_closed_.push_back(index);
  } else if (event.kind == "lrs_request") {
    std::optional<std::string> bytes = Base64Decode(StringField(parsed, "data_b64"));
    if (!bytes.has_value()) ADD_FAILURE() << "lrs_request that is not base64: " << event.json;
    event.lrs_request = bytes.value_or("");
    pending_lrs_requests_.push_back(index);
  } else if (event.kind == "violation") {
    violations_.push_back(StringField(parsed, "message"));
  }
  events_.push_back(std::move(event));
  return LineKind::kEvent;
}

void FakeControlPlane::DrainAvailable() {
  std::string ignored_reply;  // a reply nobody waits for any more
  while (true) {
    LineKind kind = ReadLineAndDispatch(milliseconds(1), &ignored_reply);
    if (kind == LineKind::kTimeout || kind == LineKind::kClosed) return;
  }
}

std::optional<std::string> FakeControlPlane::SendCommand(const std::string& command) {
  json parsed = json::parse(command, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    ADD_FAILURE() << "fake control plane command is not a JSON object: " << command;
    return std::nullopt;
  }
  int64_t id = next_command_id_++;
  parsed["id"] = id;
  if (!peer_.WriteLine(parsed.dump())) {
    ADD_FAILURE() << "fake control plane is gone; command: " << command;
    return std::nullopt;
  }
  auto deadline = std::chrono::steady_clock::now() + kCommandTimeout;
  while (true) {
    std::string reply;
    LineKind kind = ReadLineAndDispatch(Remaining(deadline), &reply);
    if (kind == LineKind::kTimeout || kind == LineKind::kClosed) {
      ADD_FAILURE() << "fake control plane did not answer command " << command
                    << (kind == LineKind::kClosed ? " (it exited)" : " (timeout)");
      return std::nullopt;
    }
    if (kind != LineKind::kReply) continue;
    json answer = json::parse(reply, nullptr, /*allow_exceptions=*/false);
    if (answer.value("id", int64_t{0}) == id) return reply;
  }
}

std::optional<std::string> FakeControlPlane::Command(const std::string& command) {
  std::optional<std::string> reply = SendCommand(command);
  if (!reply) return std::nullopt;
  json answer = json::parse(*reply, nullptr, /*allow_exceptions=*/false);
  if (!answer.value("ok", false)) {
    ADD_FAILURE() << "fake control plane rejected " << command << ": "
                  << StringField(answer, "error");
    return std::nullopt;
  }
  return reply;
}

std::optional<std::string> FakeControlPlane::RawCommand(const std::string& json_command) {
  return SendCommand(json_command);
}

std::string FakeControlPlane::SendResponse(const ScriptedResponse& response) {
  json command = {{"cmd", "send"},
                  {"type_url", response.type_url},
                  {"version_info", response.version_info},
                  {"wrap_in_resource", response.wrap_in_resource},
                  {"resource_errors", ResourceErrorsJson(response.resource_errors)}};
  SetStream(command, response.stream);
  if (!response.nonce.empty()) command["nonce"] = response.nonce;
  if (!response.control_plane_identifier.empty()) {
    command["control_plane"] = response.control_plane_identifier;
  }
  json resources = json::array();
  for (const ResponseResource& resource : response.resources) {
    resources.push_back(ResourceJson(resource));
  }
  command["resources"] = std::move(resources);
  std::optional<std::string> reply = Command(command.dump());
  if (!reply) return "";
  return StringField(json::parse(*reply), "nonce");
}

bool FakeControlPlane::SendRawMessage(const std::string& bytes, std::optional<int64_t> stream) {
  json command = {{"cmd", "send_raw"}, {"data_b64", Base64Encode(bytes)}};
  SetStream(command, stream);
  return Command(command.dump()).has_value();
}

bool FakeControlPlane::CloseStream(int code, const std::string& message,
                                   std::optional<int64_t> stream) {
  json command = {{"cmd", "close_stream"}, {"code", code}, {"message", message}};
  SetStream(command, stream);
  return Command(command.dump()).has_value();
}

bool FakeControlPlane::CloseAllStreams(int code, const std::string& message) {
  json command = {{"cmd", "close_all_streams"}, {"code", code}, {"message", message}};
  return Command(command.dump()).has_value();
}

bool FakeControlPlane::StopListening() {
  return Command(R"({"cmd":"stop_listening"})").has_value();
}

bool FakeControlPlane::RestartListening() {
  return Command(R"({"cmd":"start_listening"})").has_value();
}

bool FakeControlPlane::DropAllConnections() {
  return Command(R"({"cmd":"drop_connections"})").has_value();
}

bool FakeControlPlane::FreezeConnections() {
  return Command(R"({"cmd":"freeze_connections"})").has_value();
}

bool FakeControlPlane::SetResources(const std::string& type_url,
                                    const std::map<std::string, ResponseResource>& resources,
                                    const std::string& version,
                                    const std::vector<ResourceErrorToSend>& resource_errors) {
  json by_name = json::object();
  for (const auto& [name, resource] : resources) by_name[name] = ResourceJson(resource);
  json command = {{"cmd", "set_resources"},
                  {"type_url", type_url},
                  {"version_info", version},
                  {"resources", std::move(by_name)},
                  {"resource_errors", ResourceErrorsJson(resource_errors)}};
  return Command(command.dump()).has_value();
}

bool FakeControlPlane::ClearResources(const std::string& type_url) {
  json command = {{"cmd", "clear_resources"}, {"type_url", type_url}};
  return Command(command.dump()).has_value();
}

bool FakeControlPlane::IgnoreRequests(bool ignore, const std::string& type_url) {
  json command = {{"cmd", "ignore_requests"}, {"ignore", ignore}, {"type_url", type_url}};
  return Command(command.dump()).has_value();
}

bool FakeControlPlane::DelayResponses(milliseconds delay) {
  json command = {{"cmd", "delay_responses"}, {"delay_ms", delay.count()}};
  return Command(command.dump()).has_value();
}

std::vector<int64_t> FakeControlPlane::OpenStreams() {
  std::vector<int64_t> out;
  std::optional<std::string> reply = Command(R"({"cmd":"streams"})");
  if (!reply) return out;
  for (const json& id : json::parse(*reply).value("streams", json::array())) {
    out.push_back(id.get<int64_t>());
  }
  return out;
}

std::optional<ObservedRequest> FakeControlPlane::TakeRequest(
    milliseconds timeout, bool (*match)(const ObservedRequest&, const void*), const void* context) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t scanned = 0;  // pending requests already found not to match
  while (true) {
    for (; scanned < pending_requests_.size(); ++scanned) {
      size_t index = pending_requests_[scanned];
      if (match(*events_[index].request, context)) {
        pending_requests_.erase(pending_requests_.begin() + static_cast<ptrdiff_t>(scanned));
        return events_[index].request;
      }
    }
    std::string ignored_reply;
    LineKind kind = ReadLineAndDispatch(Remaining(deadline), &ignored_reply);
    if (kind == LineKind::kTimeout || kind == LineKind::kClosed) return std::nullopt;
  }
}

std::optional<ObservedRequest> FakeControlPlane::NextRequest(milliseconds timeout,
                                                             const std::string& type_url) {
  return TakeRequest(
      timeout,
      [](const ObservedRequest& request, const void* context) {
        const auto& wanted = *static_cast<const std::string*>(context);
        return wanted.empty() || request.type_url == wanted;
      },
      &type_url);
}

std::optional<int64_t> FakeControlPlane::TakeStreamEvent(std::vector<size_t>& pending,
                                                         milliseconds timeout,
                                                         std::optional<int64_t> stream) {
  std::optional<size_t> index = TakeEvent(pending, timeout, stream);
  if (!index.has_value()) return std::nullopt;
  return events_[*index].stream;
}

std::optional<size_t> FakeControlPlane::TakeEvent(std::vector<size_t>& pending,
                                                  milliseconds timeout,
                                                  std::optional<int64_t> stream) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t scanned = 0;
  while (true) {
    for (; scanned < pending.size(); ++scanned) {
      const size_t index = pending[scanned];
      if (!stream || *stream == events_[index].stream) {
        pending.erase(pending.begin() + static_cast<ptrdiff_t>(scanned));
        return index;
      }
    }
    std::string ignored_reply;
    LineKind kind = ReadLineAndDispatch(Remaining(deadline), &ignored_reply);
    if (kind == LineKind::kTimeout || kind == LineKind::kClosed) return std::nullopt;
  }
}

std::optional<int64_t> FakeControlPlane::WaitForStreamOpened(milliseconds timeout) {
  return TakeStreamEvent(pending_opened_, timeout, std::nullopt);
}

std::optional<int64_t> FakeControlPlane::WaitForStreamClosed(milliseconds timeout,
                                                             std::optional<int64_t> stream) {
  return TakeStreamEvent(pending_closed_, timeout, stream);
}

std::optional<ObservedLrsRequest> FakeControlPlane::NextLrsRequest(milliseconds timeout,
                                                                   std::optional<int64_t> stream) {
  std::optional<size_t> index = TakeEvent(pending_lrs_requests_, timeout, stream);
  if (!index.has_value()) return std::nullopt;
  return ObservedLrsRequest{events_[*index].stream, events_[*index].lrs_request};
}

std::optional<int64_t> FakeControlPlane::WaitForLrsStreamOpened(milliseconds timeout) {
  return TakeStreamEvent(pending_lrs_opened_, timeout, std::nullopt);
}

std::optional<int64_t> FakeControlPlane::WaitForLrsStreamClosed(milliseconds timeout,
                                                                std::optional<int64_t> stream) {
  return TakeStreamEvent(pending_lrs_closed_, timeout, stream);
}

bool FakeControlPlane::SendLrsResponse(const std::string& bytes, std::optional<int64_t> stream) {
  json command = {{"cmd", "lrs_send"}, {"data_b64", Base64Encode(bytes)}};
  SetStream(command, stream);
  return Command(command.dump()).has_value();
}

bool FakeControlPlane::CloseLrsStream(int code, const std::string& message,
                                      std::optional<int64_t> stream) {
  json command = {{"cmd", "lrs_close_stream"}, {"code", code}, {"message", message}};
  SetStream(command, stream);
  return Command(command.dump()).has_value();
}

const std::vector<ObservedEvent>& FakeControlPlane::events() {
  DrainAvailable();
  return events_;
}

std::vector<ObservedRequest> FakeControlPlane::AllRequests() {
  DrainAvailable();
  std::vector<ObservedRequest> out;
  for (const ObservedEvent& event : events_) {
    if (event.request) out.push_back(*event.request);
  }
  return out;
}

}  // namespace uxds::testing
