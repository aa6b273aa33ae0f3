#include "xds_fuzz_checks.h"

#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "xds_fuzz_resources.h"

namespace uxds::fuzz {
namespace {

bool IsDataErrorCode(StatusCode code) {
  // A88: NOT_FOUND and PERMISSION_DENIED from the server are data errors.
  return code == StatusCode::kNotFound || code == StatusCode::kPermissionDenied;
}

std::string Describe(const Status& status) {
  return "{" + std::to_string(static_cast<int>(status.code())) + " \"" + status.message() + "\"}";
}

// The watcher's error is the entry's: same code, and the entry's message
// (a notification may add the node ID to it).
bool SameError(const Status& told, const Status& entry) {
  return told.code() == entry.code() && told.message().find(entry.message()) != std::string::npos;
}

constexpr int kOtherCodes[] = {static_cast<int>(StatusCode::kPermissionDenied),
                               static_cast<int>(StatusCode::kUnavailable),
                               static_cast<int>(StatusCode::kInternal)};

}  // namespace

void Require(bool ok, int step, std::string_view check, std::string_view detail) {
  if (ok) return;
  std::fprintf(stderr, "xds_client_fuzzer: step %d: %.*s: %.*s\n", step,
               static_cast<int>(check.size()), check.data(), static_cast<int>(detail.size()),
               detail.data());
  std::fflush(stderr);
  __builtin_trap();
}

void RecordingWatcher::OnResourceChanged(StatusOr<XdsResourceData> changed) {
  ++changes;
  ++notifications;
  ambient = Status();
  if (changed.ok()) {
    resource = *std::move(changed);
    last_error = Status();
  } else {
    resource = nullptr;
    last_error = changed.status();
  }
}

void RecordingWatcher::OnAmbientError(Status status) {
  ++notifications;
  ambient = std::move(status);
}

bool Model::AnyWatch() const {
  for (const auto& names : watchers_) {
    for (const auto& watchers : names) {
      if (!watchers.empty()) return true;
    }
  }
  return false;
}

void Model::BeforeStep(int, const Step&) {
  for (int t = 0; t < kTypes; ++t) {
    for (int n = 0; n < kNames; ++n) {
      before_[t][n] = watchers_[t][n].empty()
                          ? std::nullopt
                          : client_.Lookup(ResourceType(t), PoolName(t, n), false);
    }
  }
}

void Model::Watch(int type, int name) {
  auto& watchers = watchers_[type][name];
  if (watchers.size() >= 2) return;
  auto watcher = std::make_shared<RecordingWatcher>();
  watchers.push_back(watcher);
  client_.WatchUntypedResource(ResourceType(type), PoolName(type, name), watcher);
}

void Model::Cancel(int type, int name) {
  auto& watchers = watchers_[type][name];
  if (watchers.empty()) return;
  client_.CancelWatch(ResourceType(type), PoolName(type, name), watchers.back().get());
  watchers.pop_back();
  // The last watcher gone, the entry is gone: a new one starts afresh.
  if (watchers.empty()) ever_had_[type][name] = false;
}

PendingAnswer Model::Respond(const Step& action) {
  PendingAnswer pending;
  bool type_watched = false;
  for (const auto& watchers : watchers_[action.type]) type_watched |= !watchers.empty();
  AdsStream* stream = server_.Current();
  // A response of a type the client does not subscribe to has no defined
  // answer; the fuzzer sends none.
  if (!type_watched || stream == nullptr) return pending;
  const std::string type_url(TypeUrl(action.type));
  envoy::service::discovery::v3::DiscoveryResponse response;
  response.set_type_url(type_url);
  response.set_version_info("v" + std::to_string(action.version + 1));
  auto add = [&](const std::string& value) {
    auto* any = response.add_resources();
    any->set_type_url(type_url);
    any->set_value(value);
  };
  for (int n = 0; n < kNames; ++n) {
    const std::string name = PoolName(action.type, n);
    switch (action.choices[n]) {
      case Choice::kAbsent:
        break;
      case Choice::kValid0:
      case Choice::kValid1:
      case Choice::kValid2:
        add(ValidResource(action.type, name, static_cast<int>(action.choices[n]) - 1));
        pending.has_valid_resource = true;
        break;
      case Choice::kInvalid:
        add(InvalidResource(action.type, name));
        pending.expect_nack = true;
        break;
      case Choice::kDuplicate:
        add(ValidResource(action.type, name, action.version));
        add(ValidResource(action.type, name, (action.version + 1) % 3));
        pending.expect_nack = true;         // A46 / gRPC: "duplicate resource name"
        pending.has_valid_resource = true;  // the first copy
        break;
      case Choice::kErrorNotFound:
      case Choice::kErrorOther: {
        const int code = action.choices[n] == Choice::kErrorNotFound
                             ? static_cast<int>(StatusCode::kNotFound)
                             : kOtherCodes[action.other_code];
        auto* error = response.add_resource_errors();
        error->mutable_resource_name()->set_name(name);
        error->mutable_error_detail()->set_code(code);
        error->mutable_error_detail()->set_message("fuzz error for " + name);
        sent_error_code_[action.type][n] = code;
        break;
      }
    }
  }
  if (action.extra_name) {
    add(ValidResource(action.type, UnrequestedName(action.type), 0));
    pending.has_valid_resource = true;
  }
  pending.active = true;
  pending.stream = stream->id;
  pending.type_url = type_url;
  pending.version_info = response.version_info();
  pending.nonce = server_.Send(*stream, std::move(response));
  return pending;
}

void Model::CloseStream() {
  AdsStream* stream = server_.Current();
  if (stream == nullptr) return;
  // A57: a stream that ends before the client received a response on it is
  // a server failure (transient error); one that carried a response is not.
  bool answered = false;
  for (const ReceivedRequest& request : stream->requests) {
    answered |= !request.response_nonce.empty();
  }
  server_failing_ = !answered;
  server_.Close(*stream);
}

std::string Model::Unsettled(const PendingAnswer& pending) const {
  AdsStream* stream = server_.Current();
  if (!AnyWatch()) {
    // The client closes its stream when nothing is watched.
    return stream == nullptr ? "" : "a stream is live with nothing watched";
  }
  if (stream == nullptr) return "no live stream";
  if (pending.active && (stream->id != pending.stream ||
                         stream->AnswerTo(pending.type_url, pending.nonce) == nullptr)) {
    return "no answer to nonce " + pending.nonce + " on stream " + std::to_string(pending.stream);
  }
  for (int t = 0; t < kTypes; ++t) {
    std::set<std::string> watched;
    for (int n = 0; n < kNames; ++n) {
      if (!watchers_[t][n].empty()) watched.insert(PoolName(t, n));
    }
    const ReceivedRequest* last = stream->LastRequest(std::string(TypeUrl(t)));
    std::set<std::string> subscribed;
    if (last != nullptr)
      subscribed.insert(last->resource_names.begin(), last->resource_names.end());
    if (subscribed != watched) {
      std::string why =
          std::string(TypeUrl(t)) + ": stream " + std::to_string(stream->id) + " subscribes";
      for (const std::string& name : subscribed) why += " " + name;
      why += "; watched:";
      for (const std::string& name : watched) why += " " + name;
      return why;
    }
  }
  return "";
}

std::string Model::Fingerprint() const {
  std::string fingerprint;
  for (int t = 0; t < kTypes; ++t) {
    for (int n = 0; n < kNames; ++n) {
      if (watchers_[t][n].empty()) continue;
      auto entry = client_.Lookup(ResourceType(t), PoolName(t, n), false);
      if (!entry.has_value()) {
        fingerprint += "none\n";
        continue;
      }
      fingerprint += std::to_string(static_cast<int>(entry->state)) +
                     (entry->has_resource ? " R " : " - ") + entry->version + " " +
                     Describe(entry->error) + " " + entry->failed_version + " " +
                     std::to_string(entry->watchers) + ":";
      for (const auto& watcher : watchers_[t][n]) {
        fingerprint += " " + std::to_string(watcher->notifications);
      }
      fingerprint += "\n";
    }
  }
  return fingerprint;
}

void Model::AfterStep(int step, const Step& action, const PendingAnswer& pending) {
  for (const std::string& violation : server_.TakeViolations()) {
    Require(false, step, "protocol", violation);
  }
  if (pending.active) {
    // A57: a response (ACKed or NACKed) clears a server failure.
    server_failing_ = false;
    CheckResponseEffect(step, action, pending);
  }
  if (action.kind == StepKind::kWaitPastTimer) CheckTimerEffect(step);
  for (int t = 0; t < kTypes; ++t) {
    for (int n = 0; n < kNames; ++n) CheckEntry(step, t, n);
  }
  CheckSnapshotHoldsWatchedNames(step);
  if (AnyWatch()) {
    // A78 grpc.xds_client.connected: cleared by a failure, set again by a
    // response.
    const XdsClientMetrics metrics = client_.GetMetrics();
    Require(metrics.servers.size() == 1, step, "metrics", "one server expected");
    Require(metrics.servers[0].connected == !server_failing_, step, "A78 connected",
            server_failing_ ? "connected while the server is failing" : "not connected");
  }
}

void Model::CheckResponseEffect(int step, const Step& action, const PendingAnswer& pending) {
  AdsStream* stream = server_.Current();
  const ReceivedRequest* answer =
      stream == nullptr ? nullptr : stream->AnswerTo(pending.type_url, pending.nonce);
  Require(answer != nullptr, step, "answer", "no ACK/NACK of " + pending.nonce);
  // A46: NACK exactly when the response held an invalid or duplicate resource.
  Require(answer->nack == pending.expect_nack, step, "A46 ACK/NACK",
          pending.expect_nack ? "ACKed a response with an invalid or duplicate resource"
                              : "NACKed a response of valid resources");
  // NOTES (A46, as gRPC): the version is accepted when the response has a
  // valid resource or no error; a NACK then carries the new version, else
  // the last accepted one (none, if the client forgot the type when nothing
  // of it was watched), never one only rejected.
  std::string& accepted = accepted_version_[action.type];
  if (!answer->nack || pending.has_valid_resource) accepted = pending.version_info;
  Require(answer->version_info == accepted || (answer->nack && answer->version_info.empty()), step,
          answer->nack ? "NACK version" : "ACK version",
          "answer to " + pending.version_info + " carries '" + answer->version_info +
              "', accepted '" + accepted + "'");
  const XdsResourceType& type = ResourceType(action.type);
  for (int n = 0; n < kNames; ++n) {
    if (watchers_[action.type][n].empty()) continue;
    const std::string name = PoolName(action.type, n);
    auto entry = client_.Lookup(type, name, false);
    Require(entry.has_value(), step, "cache", "no entry for watched " + name);
    const std::optional<XdsResourceSnapshot>& before = before_[action.type][n];
    const std::string what = name + " after choice " +
                             std::to_string(static_cast<int>(action.choices[n])) + ": state " +
                             std::string(XdsCacheStateName(entry->state));
    switch (action.choices[n]) {
      case Choice::kValid0:
      case Choice::kValid1:
      case Choice::kValid2:
        Require(entry->state == XdsCacheState::kAcked && entry->version == pending.version_info,
                step, "valid resource -> ACKED", what + ", version " + entry->version);
        break;
      case Choice::kInvalid:
        Require(
            entry->state == XdsCacheState::kNacked && entry->failed_version == pending.version_info,
            step, "invalid resource -> NACKED", what);
        break;
      case Choice::kDuplicate:
        break;  // only the NACK is specified
      case Choice::kErrorNotFound:
      case Choice::kErrorOther:
        // A88: "Set the cache entry's status to RECEIVED_ERROR and record the
        // error in the cache entry."
        Require(entry->state == XdsCacheState::kReceivedError &&
                    static_cast<int>(entry->error.code()) == sent_error_code_[action.type][n],
                step, "TP3 error -> RECEIVED_ERROR", what + ", error " + Describe(entry->error));
        break;
      case Choice::kAbsent:
        if (before.has_value() && type.all_resources_required_in_sotw() && before->has_resource &&
            (before->state == XdsCacheState::kAcked || before->state == XdsCacheState::kNacked)) {
          // A88: an LDS/CDS resource missing from a response is deleted.
          Require(entry->state == XdsCacheState::kDoesNotExist, step, "LDS/CDS deletion", what);
        } else if (before.has_value() && before->state != XdsCacheState::kRequested) {
          Require(entry->state == before->state, step, "absent name unchanged",
                  what + ", was " + std::string(XdsCacheStateName(before->state)));
        }
        break;
    }
  }
}

void Model::CheckTimerEffect(int step) {
  // A57: every watched name was subscribed on a live stream before the
  // wait, which outlasted the timer: nothing can still be waiting, and what
  // was waiting is DOES_NOT_EXIST, or TIMEOUT with
  // resource_timer_is_transient_error (A88). The timer never touches an
  // entry that got anything.
  for (int t = 0; t < kTypes; ++t) {
    for (int n = 0; n < kNames; ++n) {
      if (watchers_[t][n].empty()) continue;
      auto entry = client_.Lookup(ResourceType(t), PoolName(t, n), false);
      Require(entry.has_value(), step, "cache", "no entry for watched " + PoolName(t, n));
      const std::string what = PoolName(t, n) + " " + std::string(XdsCacheStateName(entry->state));
      const std::optional<XdsResourceSnapshot>& before = before_[t][n];
      if (!before.has_value() || before->state == XdsCacheState::kRequested) {
        const XdsCacheState expected = features_.resource_timer_is_transient_error
                                           ? XdsCacheState::kTimeout
                                           : XdsCacheState::kDoesNotExist;
        Require(entry->state == expected, step, "resource timer fired", what);
      } else {
        Require(entry->state == before->state, step, "resource timer left alone",
                what + ", was " + std::string(XdsCacheStateName(before->state)));
      }
    }
  }
}

void Model::CheckEntry(int step, int type, int name) {
  const auto& watchers = watchers_[type][name];
  if (watchers.empty()) return;
  const XdsResourceType& resource_type = ResourceType(type);
  const std::string label = PoolName(type, name);
  auto entry = client_.Lookup(resource_type, label, true);
  Require(entry.has_value(), step, "cache", "no entry for watched " + label);
  const bool fod = features_.fail_on_data_errors;
  const bool rtte = features_.resource_timer_is_transient_error;
  const std::string state = label + " " + std::string(XdsCacheStateName(entry->state)) +
                            (entry->has_resource ? " with resource" : " without resource") +
                            ", error " + Describe(entry->error);
  // A88 "Cache Entry States".
  switch (entry->state) {
    case XdsCacheState::kRequested:
      Require(!entry->has_resource && entry->error.ok(), step, "A88 REQUESTED", state);
      break;
    case XdsCacheState::kAcked:
      Require(entry->has_resource && entry->error.ok(), step, "A88 ACKED", state);
      break;
    case XdsCacheState::kNacked:
      Require(entry->error.code() == StatusCode::kInvalidArgument, step, "A88 NACKED", state);
      Require(!(fod && entry->has_resource), step, "A88 NACKED, fail_on_data_errors", state);
      break;
    case XdsCacheState::kDoesNotExist:
      Require(entry->error.code() == StatusCode::kNotFound, step, "A88 DOES_NOT_EXIST", state);
      Require(!(fod && entry->has_resource), step, "A88 DOES_NOT_EXIST, fail_on_data_errors",
              state);
      // Without a resource it is the timer's (not with the transient-error
      // timer) or a deletion that dropped it (only with fail_on_data_errors).
      Require(entry->has_resource || fod || !rtte, step, "A88 DOES_NOT_EXIST source", state);
      break;
    case XdsCacheState::kReceivedError:
      Require(!entry->error.ok(), step, "A88 RECEIVED_ERROR", state);
      Require(!(fod && IsDataErrorCode(entry->error.code()) && entry->has_resource), step,
              "A88 RECEIVED_ERROR, fail_on_data_errors", state);
      break;
    case XdsCacheState::kTimeout:
      Require(rtte && !entry->has_resource && entry->error.code() == StatusCode::kUnavailable, step,
              "A88 TIMEOUT", state);
      break;
  }
  // A88: without fail_on_data_errors no error drops a cached resource.
  Require(fod || !ever_had_[type][name] || entry->has_resource, step,
          "A88 resource kept without fail_on_data_errors", state);
  if (entry->has_resource) ever_had_[type][name] = true;
  Require(entry->watchers == watchers.size(), step, "watcher count", state);

  for (size_t w = 0; w < watchers.size(); ++w) {
    const RecordingWatcher& watcher = *watchers[w];
    const std::string who = state + "; watcher " + std::to_string(w) + " holds " +
                            (watcher.resource ? "a resource" : "none") + ", last error " +
                            Describe(watcher.last_error) + ", ambient " +
                            Describe(watcher.ambient) + ", " + std::to_string(watcher.changes) +
                            " changes";
    Require((watcher.resource != nullptr) == entry->has_resource, step,
            "A88 watcher resource = cache resource", who);
    Require(watcher.resource != nullptr || watcher.ambient.ok(), step,
            "A88 ambient error only with a resource", who);
    if (entry->has_resource) {
      Require(resource_type.ResourceToJson(watcher.resource) == entry->resource_json, step,
              "A88 watcher resource = cache resource (JSON)", who);
      if (server_failing_) {
        // A88: a transient error with a cached resource is ambient.
        Require(!watcher.ambient.ok(), step, "A88 server failure -> OnAmbientError", who);
      } else {
        Require(entry->error.ok() ? watcher.ambient.ok() : SameError(watcher.ambient, entry->error),
                step, "A88 ambient error = cache error", who);
      }
    } else if (entry->state != XdsCacheState::kRequested) {
      // A88: without a resource, errors come as OnResourceChanged(error).
      Require(watcher.changes > 0 && !watcher.last_error.ok(), step,
              "A88 error -> OnResourceChanged(error)", who);
      if (!server_failing_) {
        Require(SameError(watcher.last_error, entry->error), step,
                "A88 OnResourceChanged error = cache error", who);
      }
    }
  }
}

void Model::CheckSnapshotHoldsWatchedNames(int step) {
  size_t watched = 0;
  for (const auto& names : watchers_) {
    for (const auto& watchers : names) watched += watchers.empty() ? 0 : 1;
  }
  const std::vector<XdsResourceSnapshot> snapshot = client_.Snapshot();
  std::string names;
  for (const XdsResourceSnapshot& entry : snapshot) names += " " + entry.name;
  Require(snapshot.size() == watched, step, "cache holds exactly the watched names",
          std::to_string(watched) + " watched, cache:" + names);
}

void Model::Forget() {
  for (auto& names : watchers_) {
    for (auto& watchers : names) watchers.clear();
  }
}

}  // namespace uxds::fuzz
