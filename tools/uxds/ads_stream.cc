#include "ads_stream.h"

#include <utility>
#include <vector>

#include "google/rpc/status.pb.h"
#include "json_line_printer.h"

namespace uxds::tool {
namespace {

using envoy::service::discovery::v3::DiscoveryRequest;
using envoy::service::discovery::v3::DiscoveryResponse;

constexpr char kWildcardName[] = "*";

bool IsServedType(const std::string& type_url) {
  return type_url == kListenerTypeUrl || type_url == kRouteConfigurationTypeUrl ||
         type_url == kClusterTypeUrl || type_url == kClusterLoadAssignmentTypeUrl;
}

// What the client holds once `name` is sent from `snapshot`: "r" + bytes for
// a resource, "e" + code + message for a TP3 error (errors.json wins over a
// file of the same name); nullopt when the snapshot has neither.
std::optional<std::string> ContentOf(const Snapshot& snapshot, const std::string& type_url,
                                     const std::string& name) {
  if (auto type = snapshot.errors.find(type_url); type != snapshot.errors.end()) {
    if (auto error = type->second.find(name); error != type->second.end()) {
      return "e" + std::to_string(static_cast<int>(error->second.code)) + ":" +
             error->second.message;
    }
  }
  if (auto type = snapshot.resources.find(type_url); type != snapshot.resources.end()) {
    if (auto resource = type->second.find(name); resource != type->second.end()) {
      return "r" + resource->second;
    }
  }
  return std::nullopt;
}

void AddToResponse(const Snapshot& snapshot, const std::string& type_url, const std::string& name,
                   DiscoveryResponse& response) {
  if (auto type = snapshot.errors.find(type_url); type != snapshot.errors.end()) {
    if (auto error = type->second.find(name); error != type->second.end()) {
      // TP3: the error replaces the resource for this name.
      auto* entry = response.add_resource_errors();
      entry->mutable_resource_name()->set_name(name);
      entry->mutable_error_detail()->set_code(static_cast<int>(error->second.code));
      entry->mutable_error_detail()->set_message(error->second.message);
      return;
    }
  }
  const std::string& bytes = snapshot.resources.at(type_url).at(name);
  auto* any = response.add_resources();
  any->set_type_url(type_url);
  any->set_value(bytes);
}

}  // namespace

AdsStream::AdsStream(AggregatedDiscoveryService& service, ServerCall& call)
    : service_(service), call_(call), wake_(call.loop()), drained_(call.loop()) {
  service_.streams_.insert(this);
}

AdsStream::~AdsStream() { service_.streams_.erase(this); }

Task<Status> AdsStream::Run() {
  TaskGroup reader(call_.loop(), &call_.cancel_state());
  reader.Spawn(ReadRequests());
  Status result;
  bool running = true;
  while (running) {
    while (running && !requests_.empty()) {
      const DiscoveryRequest request = std::move(requests_.front());
      requests_.pop_front();
      drained_.NotifyAll();
      result = HandleRequest(request);
      running = result.ok();
      // The control plane ends this stream: its log says whose and why
      // (the client sees only the status, and retries).
      if (!running) LogStreamEnded(result);
    }
    const Snapshot* answered = service_.snapshot().get();
    for (auto it = subscriptions_.begin(); running && it != subscriptions_.end(); ++it) {
      std::optional<DiscoveryResponse> response = ResponseFor(it->first, it->second);
      if (!response.has_value()) continue;
      result = co_await call_.Write(response->SerializeAsString());
      running = result.ok();
    }
    if (!running) break;
    // Nothing may slip by between these checks and the wait: a request read
    // or a snapshot published during a Write() is seen here.
    if (!requests_.empty() || service_.snapshot().get() != answered) continue;
    if (reading_done_) {
      result = read_end_;
      break;
    }
    if (!(co_await wake_.Wait()).ok()) {
      result = CancelledError("call cancelled");
      break;
    }
  }
  co_await reader.CancelAndJoin();
  co_return result;
}

Task<void> AdsStream::ReadRequests() {
  while (true) {
    while (requests_.size() >= kMaxQueuedRequests) {
      if (!(co_await drained_.Wait()).ok()) co_return;
    }
    std::optional<std::string> message = co_await call_.Read();
    if (!message.has_value()) {
      read_end_ = call_.cancelled() ? CancelledError("call cancelled") : OkStatus();
      break;
    }
    DiscoveryRequest request;
    if (!request.ParseFromString(*message)) {
      read_end_ = InvalidArgumentError("DiscoveryRequest: message does not parse");
      break;
    }
    requests_.push_back(std::move(request));
    wake_.NotifyAll();
  }
  reading_done_ = true;
  wake_.NotifyAll();
}

void AdsStream::LogRequest(const DiscoveryRequest& request) const {
  nlohmann::ordered_json line = {{"event", "request"},
                                 {"type", request.type_url()},
                                 {"names", request.resource_names()},
                                 {"version", request.version_info()},
                                 {"nonce", request.response_nonce()}};
  if (request.has_error_detail()) line["nack"] = request.error_detail().message();
  service_.printer().Print(line);
}

void AdsStream::LogStreamEnded(const Status& status) const {
  service_.printer().Print({{"event", "stream_ended"},
                            {"peer", call_.peer()},
                            {"code", std::string(StatusCodeName(status.code()))},
                            {"message", status.message()}});
}

Status AdsStream::HandleRequest(const DiscoveryRequest& request) {
  LogRequest(request);
  if (static_cast<size_t>(request.resource_names_size()) > kMaxNamesPerRequest) {
    return ResourceExhaustedError("DiscoveryRequest.resource_names: more than " +
                                  std::to_string(kMaxNamesPerRequest) + " names");
  }
  // Another type is subscribed to nothing we serve: logged, never answered.
  if (!IsServedType(request.type_url())) return OkStatus();
  Subscription& subscription = subscriptions_[request.type_url()];
  const bool answered_before = !subscription.last_nonce.empty();
  // A request echoing an older nonce was sent before the client saw our
  // latest response, which it will ACK or NACK with the current names.
  if (answered_before && request.response_nonce() != subscription.last_nonce) {
    return OkStatus();
  }
  std::set<std::string> names;
  bool wildcard_named = false;
  for (const std::string& name : request.resource_names()) {
    if (name == kWildcardName) {
      wildcard_named = true;
    } else {
      names.insert(name);
    }
  }
  // A wildcard subscription (LDS / CDS only): "*", or no names in the first
  // request of the type and in every one since.
  const bool full_state = IsFullStateType(request.type_url());
  const bool wildcard =
      full_state &&
      (wildcard_named || (names.empty() && (!answered_before || subscription.wildcard)));
  if (!answered_before || (wildcard && !subscription.wildcard)) subscription.answer_due = true;
  for (const std::string& name : names) {
    if (subscription.names.count(name) == 0) subscription.answer_due = true;
  }
  if (!wildcard) {
    for (const std::string& name : subscription.names) {
      if (names.count(name) == 0) subscription.sent.erase(name);
    }
  }
  subscription.names = std::move(names);
  subscription.wildcard = wildcard;
  return OkStatus();
}

std::optional<DiscoveryResponse> AdsStream::ResponseFor(const std::string& type_url,
                                                        Subscription& subscription) {
  const Snapshot& snapshot = *service_.snapshot();
  std::set<std::string> names = subscription.names;
  if (subscription.wildcard) {
    if (auto type = snapshot.resources.find(type_url); type != snapshot.resources.end()) {
      for (const auto& [name, bytes] : type->second) names.insert(name);
    }
    if (auto type = snapshot.errors.find(type_url); type != snapshot.errors.end()) {
      for (const auto& [name, error] : type->second) names.insert(name);
    }
  }
  std::map<std::string, std::string> current;
  for (const std::string& name : names) {
    if (std::optional<std::string> content = ContentOf(snapshot, type_url, name)) {
      current.emplace(name, *std::move(content));
    }
  }
  std::vector<std::string> to_send;
  if (IsFullStateType(type_url)) {
    // Every subscribed resource, whenever any of them changed (or left).
    if (!subscription.answer_due && current == subscription.sent) return std::nullopt;
    for (const auto& [name, content] : current) to_send.push_back(name);
    subscription.sent = current;
  } else {
    for (const auto& [name, content] : current) {
      auto sent = subscription.sent.find(name);
      if (sent == subscription.sent.end() || sent->second != content) to_send.push_back(name);
    }
    if (!subscription.answer_due && to_send.empty()) return std::nullopt;
    for (auto it = subscription.sent.begin(); it != subscription.sent.end();) {
      // Gone from the snapshot: sent again should it come back.
      it = current.count(it->first) == 0 ? subscription.sent.erase(it) : std::next(it);
    }
    for (const std::string& name : to_send) subscription.sent[name] = current[name];
  }
  DiscoveryResponse response;
  response.set_version_info(snapshot.version);
  response.set_type_url(type_url);
  response.set_nonce(service_.NextNonce());
  for (const std::string& name : to_send) AddToResponse(snapshot, type_url, name, response);
  subscription.answer_due = false;
  subscription.last_nonce = response.nonce();
  subscription.last_version = snapshot.version;
  return response;
}

}  // namespace uxds::tool
