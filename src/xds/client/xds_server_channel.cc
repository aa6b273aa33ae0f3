#include "xds/client/xds_server_channel.h"

#include <sys/socket.h>

#include <utility>
#include <vector>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "runtime/host_resolver.h"
#include "runtime/socket_address.h"
#include "xds/client/ads_protocol.h"
#include "xds/client/xds_server_connect.h"

namespace uxds::xds_internal {

XdsServerChannel::XdsServerChannel(const Environment& environment, XdsServerState& server)
    : env_(environment),
      server_(server),
      backoff_({environment.options.backoff_initial, environment.options.backoff_multiplier,
                environment.options.backoff_jitter, environment.options.backoff_max}),
      wake_idle_(environment.loop),
      resolver_(environment.loop) {}

XdsServerChannel::~XdsServerChannel() = default;

bool XdsServerChannel::HasSubscriptions() const {
  for (const auto& [type_url, state] : types_) {
    if (!state.names.empty()) return true;
  }
  return false;
}

void XdsServerChannel::Subscribe(const XdsResourceType& type, const std::string& key) {
  const bool was_idle = !HasSubscriptions();
  TypeState& state = types_[std::string(type.type_url())];
  state.type = &type;
  if (!state.names.emplace(key, ++last_subscription_serial_).second) return;
  ++state.changes;
  state.start_timers = true;
  if (was_idle) wake_idle_.Send(true);
  SendRequestFor(std::string(type.type_url()));
}

void XdsServerChannel::Unsubscribe(const XdsResourceType& type, const std::string& key) {
  auto it = types_.find(type.type_url());
  if (it == types_.end() || it->second.names.erase(key) == 0) return;
  ++it->second.changes;
  // The type's state (version, nonce) stays: a new watch of the type on this
  // stream still answers the last response.
  if (HasSubscriptions()) {
    SendRequestFor(it->first);
    return;
  }
  // NOTES: "Unsubscribing the last name of a server closes the stream."
  if (stream_ != nullptr) {
    closed_idle_ = true;
    stream_->call->Cancel();
    stream_->tasks->Cancel();
  }
}

void XdsServerChannel::SendRequestFor(const std::string& type_url) {
  if (stream_ == nullptr || stream_->ended) return;  // the next stream sends everything
  for (const std::string& pending : stream_->pending_types) {
    if (pending == type_url) return;  // the request is built when written: it will be current
  }
  stream_->pending_types.push_back(type_url);
  stream_->wake_writer.Send(true);
}

void XdsServerChannel::StartResourceTimers() {
  if (stream_ == nullptr || stream_->ended) return;
  for (auto& [type_url, state] : types_) {
    for (const auto& [name, serial] : state.names) {
      if (serial > state.serial_on_wire) continue;  // not named on the wire yet
      XdsCacheEntry* entry = env_.cache.Find(*state.type, name);
      if (entry != nullptr && &entry->server() == &server_)
        env_.cache.MaybeStartResourceTimer(*entry);
    }
  }
}

Task<bool> XdsServerChannel::StartTimersOfNamesOnWire(Stream& stream, TypeState& state) {
  // A71: only the server in use for an entry times it; a higher-priority
  // server retried meanwhile starts it once it is in use again.
  // 10 000 names are milliseconds of lookups: a slice at a time, resumed
  // at the name due next (names unsubscribed meanwhile are gone from the
  // map, ones subscribed meanwhile have a later serial and are skipped).
  auto it = state.names.begin();
  for (size_t looked_up = 0; it != state.names.end(); ++it) {
    if (++looked_up % kNamesPerSlice == 0) {
      const std::string resume_after = it->first;
      co_await env_.loop.Yield();
      if (stream.ended) co_return false;
      it = state.names.lower_bound(resume_after);
      if (it == state.names.end()) break;
    }
    if (it->second > state.serial_on_wire) continue;
    XdsCacheEntry* entry = env_.cache.Find(*state.type, it->first);
    if (entry != nullptr && &entry->server() == &server_)
      env_.cache.MaybeStartResourceTimer(*entry);
  }
  co_return true;
}

Task<std::optional<std::string>> XdsServerChannel::SerializeNames(Stream& stream, TypeState& state,
                                                                  uint64_t& serial) {
  // 100 000 names are milliseconds of copying: a slice at a time. If names
  // are (un)subscribed during a yield, the names are written again, in one
  // go: the request carries the names subscribed when it is written.
  std::string serialized;
  for (bool may_yield : {true, false}) {
    serialized.clear();
    serial = last_subscription_serial_;
    const uint64_t changes = state.changes;
    bool changed = false;
    size_t appended = 0;
    for (auto it = state.names.begin(); it != state.names.end(); ++it) {
      if (may_yield && ++appended % kNamesPerSlice == 0) {
        co_await env_.loop.Yield();
        if (stream.ended) co_return std::nullopt;
        if (state.changes != changes) {
          changed = true;
          break;
        }
      }
      AppendResourceName(it->first, serialized);
    }
    if (!changed) break;
  }
  co_return serialized;
}

void XdsServerChannel::ReportFailure(std::string_view what, const Status& status) {
  // Text as gRPC: "xDS channel for server <uri>: <what>".
  env_.events.OnServerFailure(
      server_, UnavailableError("xDS channel for server " + server_.config.server_uri + ": " +
                                std::string(what) + status.ToString()));
}

Task<void> XdsServerChannel::Run() {
  CancelState* cancel = co_await CurrentCancelState();
  while (cancel == nullptr || !cancel->cancelled()) {
    if (!HasSubscriptions()) {
      // A47 lets an implementation shut down a channel nobody uses.
      if (connection_ != nullptr) {
        co_await connection_->Close();
        connection_.reset();
      }
      backoff_.Reset();
      while (wake_idle_.TryReceive().has_value()) {
      }
      if (HasSubscriptions()) continue;
      const std::optional<bool> woken = co_await wake_idle_.Receive();
      if (!woken.has_value()) co_return;
      continue;
    }
    const bool seen_response = co_await RunStream(cancel);
    if (cancel != nullptr && cancel->cancelled()) co_return;
    if (std::exchange(closed_idle_, false)) continue;
    // A57: "The backoff state will be reset when an ADS stream attempt does
    // finally receive a response"; as gRPC, the next attempt still waits the
    // initial delay.
    if (seen_response) backoff_.Reset();
    const Status slept = co_await SleepFor(env_.loop, backoff_.NextDelay());
    if (!slept.ok()) co_return;
  }
}

Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> XdsServerChannel::Connect() {
  co_return co_await ConnectToXdsServer(env_.loop, resolver_, server_.config, env_.options,
                                        env_.options.max_ads_response_size, tls_);
}

Task<bool> XdsServerChannel::RunStream(CancelState* cancel) {
  if (connection_ == nullptr || !connection_->usable()) {
    if (connection_ != nullptr) {
      co_await connection_->Close();
      connection_.reset();
    }
    StatusOr<std::unique_ptr<http2::ClientConnection>> connection = co_await Connect();
    if (cancel != nullptr && cancel->cancelled()) co_return false;
    if (!connection.ok()) {
      // A57 / A88: a connectivity failure is a transient error.
      ReportFailure("connection failed: ", connection.status());
      co_return false;
    }
    connection_ = *std::move(connection);
  }
  if (!HasSubscriptions()) {
    closed_idle_ = true;
    co_return false;
  }
  // A78: "set to 1 when the stream is initially created".
  if (!std::exchange(started_stream_, true)) server_.connected = true;

  Stream stream(env_.loop);
  stream.call = connection_->StartCall(std::string(kAdsMethod));
  for (auto& [type_url, state] : types_) {
    state.nonce.clear();
    state.pending_nack = Status();
    state.start_timers = true;
    state.serial_on_wire = 0;
    if (!state.names.empty()) stream.pending_types.push_back(type_url);
  }
  TaskGroup tasks(env_.loop, cancel);
  stream.tasks = &tasks;
  stream_ = &stream;
  tasks.Spawn(ReadResponses(stream));
  tasks.Spawn(WriteRequests(stream));
  co_await tasks.Join();
  stream_ = nullptr;
  // Verdicts the stream never sent hold nothing back any more.
  for (auto& [type_url, state] : types_) {
    env_.notifications.Resume(std::exchange(state.unanswered_responses, {}));
  }
  co_return stream.seen_response && !stream.resource_exhausted;
}

Task<void> XdsServerChannel::ReadResponses(Stream& stream) {
  for (;;) {
    std::optional<std::string> message = co_await stream.call->Read();
    if (!message.has_value()) break;
    co_await HandleResponse(stream, *std::move(message));
  }
  const Status status = co_await stream.call->Finish();
  stream.ended = true;
  // A response over max_ads_response_size (or a server that says it is out
  // of resources) would be met again on the next stream: the backoff must
  // keep growing even though the stream had responses, or the client would
  // reconnect and download it again every initial delay.
  if (status.code() == StatusCode::kResourceExhausted) stream.resource_exhausted = true;
  // A57: timers run only while the stream is up; the next stream restarts
  // them, with their full duration, once it has sent the subscriptions.
  env_.cache.StopResourceTimers(server_);
  CancelState* cancel = co_await CurrentCancelState();
  const bool closed_by_us = closed_idle_ || (cancel != nullptr && cancel->cancelled());
  if (!stream.seen_response && !closed_by_us) {
    // A57: "If the ADS stream is closed without ever having received a
    // response from the server, then the XdsClient should consider that a
    // connectivity error." After a response it is retried silently.
    ReportFailure("xDS call failed with no responses received; status: ", status);
  }
  stream.tasks->Cancel();  // stops the writer
}

Task<void> XdsServerChannel::WriteRequests(Stream& stream) {
  for (;;) {
    while (stream.pending_types.empty()) {
      const std::optional<bool> woken = co_await stream.wake_writer.Receive();
      if (!woken.has_value()) co_return;
    }
    const std::string type_url = std::move(stream.pending_types.front());
    stream.pending_types.pop_front();
    TypeState& state = types_.find(type_url)->second;
    uint64_t serial = 0;
    std::optional<std::string> serialized;
    serialized = co_await SerializeNames(stream, state, serial);
    if (!serialized.has_value()) co_return;
    // The names are the current ones, so a name subscribed and unsubscribed
    // while its request was queued leaves an empty list. As the first request
    // of a type on a stream that is the legacy wildcard ("resource_names
    // empty ... means all resources", xDS protocol), which makes a server
    // send every Listener or Cluster it has: nothing is sent then. Later, an
    // empty list is how the last name is unsubscribed.
    if (state.names.empty() && !stream.requested_types.contains(type_url)) {
      // No verdict goes out for what this type received: it holds nothing
      // back.
      env_.notifications.Resume(std::exchange(state.unanswered_responses, {}));
      continue;
    }
    stream.requested_types.insert(type_url);
    // The rest is decided now, so the request carries the last accepted
    // version and the nonce of the last response of its type.
    AdsRequest request;
    request.type_url = type_url;
    request.version_info = state.version;
    request.response_nonce = state.nonce;
    request.error_detail = std::exchange(state.pending_nack, Status());
    const bool start_timers = std::exchange(state.start_timers, false);
    // NOTES: "The node goes only in the first request of each stream."
    if (!std::exchange(stream.node_sent, true)) request.node = &env_.node;
    AppendAdsRequestFields(request, *serialized);
    // The responses this request answers (coalesced ones included).
    const std::vector<uint64_t> answered = std::exchange(state.unanswered_responses, {});
    const Status written = co_await stream.call->Write(*std::move(serialized));
    if (!written.ok() || stream.ended) {
      env_.notifications.Resume(answered);
      co_return;
    }
    // A57: the timer of a resource starts once the request naming it has been
    // sent on a connected stream: on the wire, not merely buffered behind a
    // closed flow-control window or a stream the server has not admitted.
    const Status sent = co_await stream.call->WaitUntilWritten();
    // The verdict is out: the watchers may hear about the response now.
    env_.notifications.Resume(answered);
    if (!sent.ok() || stream.ended) co_return;
    state.serial_on_wire = serial;
    if (start_timers && !co_await StartTimersOfNamesOnWire(stream, state)) co_return;
  }
}

Task<void> XdsServerChannel::HandleResponse(Stream& stream, std::string serialized) {
  // The resources stay in `serialized` until they are applied: read at once,
  // a response of 10 000 of them would hold the loop for milliseconds.
  // NOTES: "A response that cannot be decoded at all, or whose type was never
  // watched, is ignored: no ACK, no NACK."
  AdsResponseReader reader(serialized);
  for (;;) {
    const AdsResponseReader::Progress progress = reader.Read(kFieldsPerSlice);
    if (progress == AdsResponseReader::Progress::kInvalid) co_return;
    if (progress == AdsResponseReader::Progress::kDone) break;
    co_await env_.loop.Yield();
  }
  AdsResponse& response = reader.response();
  auto it = types_.find(response.fields.type_url());
  if (it == types_.end()) co_return;
  TypeState& state = it->second;
  // The ACK/NACK goes out before any callback about this response runs:
  // slow callbacks must not keep the control plane waiting for its verdict.
  const uint64_t pause = env_.notifications.Pause();
  // A71: a higher-priority server that answers is used again from here on.
  if (!std::exchange(stream.seen_response, true)) env_.events.OnServerResponding(server_);
  const XdsDecodeContext context{env_.bootstrap, server_.config};
  AdsResponseApplier applier(response, *state.type, context, server_, env_.cache);
  // A response with thousands of resources is decoded a slice at a time, so
  // timers, the writer and the other streams of the loop are never held
  // back for long. Requests written meanwhile still answer the previous
  // response (the nonce changes only once this one is decided).
  while (!applier.ApplyResources(kResourcesPerSlice)) co_await env_.loop.Yield();
  // 100 000 names may be looked at for deletions: a slice at a time too.
  while (!applier.ApplyErrorsAndDeletions(state.names, kNamesPerSlice)) {
    co_await env_.loop.Yield();
  }
  state.nonce = response.fields.nonce();
  const AdsResponseOutcome& outcome = applier.outcome();
  env_.cache.CountResourceUpdates(server_, state.type->type_name(), outcome.valid_resources,
                                  outcome.invalid_resources);
  if (outcome.accept_version()) state.version = response.fields.version_info();
  state.pending_nack = outcome.NackStatus();
  state.unanswered_responses.push_back(pause);
  SendRequestFor(it->first);
}

Task<void> XdsServerChannel::CloseConnection() {
  if (connection_ != nullptr) {
    co_await connection_->Close();
    connection_.reset();
  }
}

}  // namespace uxds::xds_internal
