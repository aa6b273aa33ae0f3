#include "http2/server_session.h"

#include <algorithm>
#include <coroutine>
#include <random>
#include <vector>

#include "http2/grpc_protocol.h"
#include "http2/server_call.h"

namespace uxds::http2::detail {
namespace {

Http2SessionOptions SessionOptionsFor(const ServerOptions& options) {
  Http2SessionOptions session;
  session.max_receive_message_size = options.max_receive_message_size;
  session.initial_stream_window_size = options.initial_stream_window_size;
  session.max_header_list_size = options.max_metadata_size;
  session.max_concurrent_streams = options.max_concurrent_streams;
  session.max_buffered_bytes = options.max_buffered_bytes;
  session.keepalive_time = options.keepalive_time;
  session.keepalive_timeout = options.keepalive_timeout;
  session.memory_budget = ShareMemoryBudget(options).shared_memory_budget;
  return session;
}

// Awaits `task` under `cancel` instead of the awaiting task's CancelState:
// the handler is cancelled with its call, not only with the connection.
template <typename T>
class RunUnder {
 public:
  RunUnder(Task<T> task, CancelState* cancel) : task_(std::move(task)), cancel_(cancel) {}
  bool await_ready() noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
    auto& promise = task_.handle().promise();
    promise.continuation = awaiting;
    promise.cancel = cancel_;
    return task_.handle();
  }
  T await_resume() { return task_.handle().promise().take(); }

 private:
  Task<T> task_;
  CancelState* cancel_;
};

// now + `duration`, saturated: kNoTimeLimit (or any duration past the
// clock's range) never comes.
Loop::Clock::time_point DeadlineAfter(std::chrono::milliseconds duration) {
  const Loop::Clock::time_point now = Loop::Clock::now();
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(Loop::Clock::time_point::max() - now);
  if (duration >= room) return Loop::Clock::time_point::max();
  return now + duration;
}

// A9: "A random jitter of +/-10% will be added to MaxConnectionAge to
// spread out connection storms."
std::chrono::milliseconds Jittered(std::chrono::milliseconds age) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> factor(0.9, 1.1);
  const double jittered = static_cast<double>(age.count()) * factor(rng);
  if (jittered >= static_cast<double>(kNoTimeLimit.count())) return kNoTimeLimit;
  return std::chrono::milliseconds(static_cast<int64_t>(jittered));
}

}  // namespace

ServerSession::ServerSession(Loop& loop, std::unique_ptr<ByteStream> transport,
                             std::shared_ptr<const ServiceRegistry> registry,
                             const ServerOptions& options, ConnectionInfo connection_info)
    : Http2Session(loop, std::move(transport), Role::kServer, SessionOptionsFor(options)),
      registry_(std::move(registry)),
      server_options_(options),
      connection_info_(std::move(connection_info)),
      handlers_(loop),
      calls_changed_(loop),
      idle_since_(Loop::Clock::now()) {}

ServerSession::~ServerSession() { calls_.clear(); }

Http2Stream* ServerSession::OnBeginRequest(int32_t /*stream_id*/) {
  if (closing()) return nullptr;
  std::unique_ptr<Http2ServerCall> call(
      new Http2ServerCall(this, &handlers_.cancel_state(), server_options_.max_receive_message_size,
                          server_options_.max_metadata_size));
  Http2ServerCall* raw = call.get();
  calls_.emplace(raw, std::move(call));
  return raw;
}

void ServerSession::OnRequestHeaders(Http2ServerCall* call) {
  // Requests a gRPC server must refuse, answered as gRPC servers do: an HTTP
  // status for non-gRPC clients plus grpc-status for gRPC ones.
  if (call->header_list_too_large_) {
    call->RespondWithoutHandler(
        431, ResourceExhaustedError("request metadata exceeds the limit of " +
                                    std::to_string(server_options_.max_metadata_size) + " bytes"));
    return;
  }
  if (call->method_ != "POST") {
    call->RespondWithoutHandler(
        405, InternalError("gRPC requires :method POST, got \"" + call->method_ + "\""));
    return;
  }
  // PROTOCOL-HTTP2: "If Content-Type does not begin with "application/grpc",
  // gRPC servers SHOULD respond with HTTP status of 415".
  if (!IsGrpcContentType(call->content_type())) {
    call->RespondWithoutHandler(
        415, InternalError("invalid gRPC request content-type \"" + call->content_type() + "\""));
    return;
  }
  if (call->grpc_encoding_ && *call->grpc_encoding_ != "identity") {
    call->RespondWithoutHandler(
        200, UnimplementedError("grpc-encoding \"" + *call->grpc_encoding_ + "\" is not supported"),
        {{"grpc-accept-encoding", "identity"}});
    return;
  }
  if (call->grpc_timeout_) {
    std::optional<std::chrono::nanoseconds> timeout = ParseGrpcTimeout(*call->grpc_timeout_);
    if (!timeout) {
      call->RespondWithoutHandler(
          400, InternalError("malformed grpc-timeout \"" + *call->grpc_timeout_ + "\""));
      return;
    }
    call->deadline_ = Loop::Clock::now() + *timeout;
  }
  const Handler* handler = registry_->Find(call->path_);
  if (handler == nullptr) {
    call->RespondWithoutHandler(200, UnimplementedError("unknown method " + call->path_));
    return;
  }
  call->StartDeadlineTimer();
  handlers_.Spawn(RunHandler(call, handler));
}

Task<void> ServerSession::RunHandler(Http2ServerCall* call, const Handler* handler) {
  if (!call->cancelled_) {
    Status status = co_await RunUnder<Status>((*handler)(*call), &call->cancel_state_);
    if (!call->cancelled_) call->FinishWithStatus(status);
  }
  call->handler_done_ = true;
  MaybeRelease(call);
}

void ServerSession::MaybeRelease(Http2ServerCall* call) {
  if (!call->handler_done_ || !call->stream_closed_) return;
  calls_.erase(call);
  if (calls_.empty()) idle_since_ = Loop::Clock::now();
  calls_changed_.NotifyAll();
}

void ServerSession::FailAllStreams(const Status& reason) {
  std::vector<Http2ServerCall*> calls;
  calls.reserve(calls_.size());
  for (auto& [raw, owned] : calls_) calls.push_back(raw);
  for (Http2ServerCall* call : calls) {
    call->OnSessionClosed(reason);
    MaybeRelease(call);
  }
  calls_changed_.NotifyAll();
}

void ServerSession::WatchForPreface() { SpawnTask(PrefaceWatchdog()); }

Task<void> ServerSession::PrefaceWatchdog() {
  const Status settings = co_await WaitForPeerSettings(server_options_.handshake_timeout);
  if (settings.code() == StatusCode::kDeadlineExceeded) {
    CloseNow(UnavailableError(settings.message()));
  }
}

void ServerSession::ManageConnection() {
  const bool idle_limit = server_options_.max_connection_idle.count() > 0;
  const bool age_limit = server_options_.max_connection_age.count() > 0 &&
                         server_options_.max_connection_age < kNoTimeLimit;
  if (idle_limit || age_limit) SpawnTask(ConnectionManager());
}

Task<void> ServerSession::ConnectionManager() {
  using Clock = Loop::Clock;
  const std::chrono::milliseconds idle = server_options_.max_connection_idle;
  const std::chrono::milliseconds age = server_options_.max_connection_age;
  const Clock::time_point aged =
      age.count() > 0 ? DeadlineAfter(Jittered(age)) : Clock::time_point::max();
  Timer timer(loop());
  // Wakes on every change of calls_ (a call ending restarts the idle
  // clock) and on the timer; a call starting needs no wake-up: the timer
  // finds calls_ non-empty and waits for the next change.
  while (!closing() && !draining_) {
    const Clock::time_point now = Clock::now();
    Clock::time_point idle_at = Clock::time_point::max();
    if (idle.count() > 0 && calls_.empty()) {
      idle_at = idle_since_ + std::min(idle, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 Clock::time_point::max() - idle_since_));
    }
    if (now >= aged) {
      StartDrain(server_options_.max_connection_age_grace,
                 UnavailableError("connection reached max_connection_age (" +
                                  std::to_string(age.count()) + " ms)"));
      co_return;
    }
    if (now >= idle_at) {
      StartDrain(server_options_.max_connection_age_grace,
                 UnavailableError("connection idle for max_connection_idle (" +
                                  std::to_string(idle.count()) + " ms)"));
      co_return;
    }
    const Clock::time_point next = std::min(aged, idle_at);
    if (next == Clock::time_point::max()) {
      timer.Cancel();
    } else {
      timer.Start(next - now, [this] { calls_changed_.NotifyAll(); });
    }
    const Status awaited = co_await calls_changed_.Wait();
    if (!awaited.ok()) co_return;
  }
}

void ServerSession::Drain(std::chrono::milliseconds grace) {
  StartDrain(grace, UnavailableError("server drained the connection"));
}

void ServerSession::StartDrain(std::chrono::milliseconds grace, Status reason) {
  if (closing()) return;
  const Loop::Clock::time_point deadline = DeadlineAfter(grace);
  if (draining_) {
    // A server shutting down with a shorter grace than the drain already
    // under way (a Listener update's drain grace time, A36) bounds it too,
    // as gRPC's server shutdown deadline bounds every connection.
    if (deadline < drain_deadline_) {
      drain_deadline_ = deadline;
      calls_changed_.NotifyAll();
    }
    return;
  }
  draining_ = true;
  drain_deadline_ = deadline;
  SpawnTask(DrainTask(grace, std::move(reason)));
}

Task<void> ServerSession::DrainTask(std::chrono::milliseconds grace, Status reason) {
  set_end_reason(reason);
  // Two-phase GOAWAY, as gRPC servers do: a GOAWAY with the maximum stream id
  // tells the client to start no more calls; one PING round trip later every
  // call the client sent before seeing it has arrived, and the final GOAWAY
  // names the last stream we accept.
  nghttp2_submit_shutdown_notice(nghttp2());
  WakeWriter();
  // (min in milliseconds: kNoTimeLimit does not fit in nanoseconds)
  const Status pinged = co_await Ping(std::min(grace, kDrainPingTimeout));
  if (pinged.code() == StatusCode::kCancelled || closing()) co_return;
  nghttp2_submit_goaway(nghttp2(), NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(nghttp2()), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  WakeWriter();

  // In-flight calls finish, up to the grace time. The timer is re-armed
  // whenever a later Drain() has moved the deadline earlier.
  bool expired = false;
  Timer timer(loop());
  Loop::Clock::time_point armed_for{};
  while (!calls_.empty() && !expired && !closing()) {
    if ((!timer.pending() || armed_for != drain_deadline_) &&
        drain_deadline_ != Loop::Clock::time_point::max()) {
      armed_for = drain_deadline_;
      timer.Start(std::max(armed_for - Loop::Clock::now(), Loop::Clock::duration::zero()),
                  [this, &expired] {
                    expired = true;
                    calls_changed_.NotifyAll();
                  });
    }
    const Status awaited = co_await calls_changed_.Wait();
    if (!awaited.ok()) co_return;
  }
  timer.Cancel();
  if (closing()) co_return;
  if (!calls_.empty()) reason = UnavailableError("server drain grace period expired");
  BeginClose(std::move(reason), NGHTTP2_NO_ERROR);
}

}  // namespace uxds::http2::detail
