// Channel: calls to a service by name, the way a gRPC channel makes them.
//
// "xds:///name" resolves `name` through xDS (A27, A47, A74): the channel's
// XdsClient (from an XdsClientPool) watches the Listener, its routes, the
// clusters they name and their endpoints; each call is routed (A28), hashed
// (A42), picked by its cluster's LB policy (ring_hash or round_robin under
// priority failover) and run on that endpoint's HTTP/2 connection. A plain
// "host:port" target makes a channel without xDS over the addresses the
// name resolves to (round_robin).
//
//   auto pool = XdsClientPool::Create(loop, *Bootstrap::FromEnvironment());
//   ChannelOptions options;
//   options.xds_client_pool = *pool;
//   auto channel = Channel::Create(loop, "xds:///greeter", options);
//   StatusOr<UnaryResponse> reply = co_await (*channel)->UnaryCall(
//       "/helloworld.Greeter/SayHello", request_bytes,
//       {.metadata = {{"x-user", "alice"}}, .timeout = std::chrono::seconds(1)});
//   ...
//   // Streaming (client-, server- or bidirectional): one pick per call.
//   StatusOr<std::unique_ptr<ClientStream>> stream = co_await (*channel)->StartStream(
//       "/grpc.testing.TestService/FullDuplexCall", {.timeout = std::chrono::seconds(5)});
//   co_await (*stream)->Write(request_bytes);
//   co_await (*stream)->WritesDone();
//   while (std::optional<std::string> reply = co_await (*stream)->Read()) { ... }
//   Status status = co_await (*stream)->Finish();
//   ...
//   co_await (*channel)->Shutdown();
//
// Threads: a channel lives on one Loop (the XdsClient's control thread);
// create it, call it and shut it down there. Threads that run loops of
// their own call it from there through a LoopChannel (OnLoop(loop)), on
// their loop and their own connections. Other threads call it through
// UnaryCallAsync / StartStreamAsync, which run the call on that loop:
//
//   auto reply = std::make_shared<std::promise<uxds::StatusOr<uxds::UnaryResponse>>>();
//   auto result = reply->get_future();                          // any thread
//   channel->UnaryCallAsync("/helloworld.Greeter/SayHello", request, {},
//       [reply](uxds::StatusOr<uxds::UnaryResponse> r) { reply->set_value(std::move(r)); });
//   auto r = result.get();
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "uxds/channel_credentials.h"
#include "uxds/load_reporting.h"
#include "uxds/loop.h"
#include "uxds/status.h"
#include "uxds/task.h"
#include "uxds/xds_client_pool.h"

namespace uxds {

struct ChannelOptions {
  // Where an "xds:" channel gets its XdsClient (the pool's loop must be the
  // channel's). Not needed for "host:port" targets.
  std::shared_ptr<XdsClientPool> xds_client_pool;
  // How connections to endpoints are secured (see channel_credentials.h):
  // plaintext unless set; ChannelCredentials::Xds(fallback) lets each
  // cluster's xDS security config (A29) decide.
  ChannelCredentials credentials;
  // The local cap on ring_hash ring sizes (A42; gRPC's default).
  uint64_t ring_size_cap = 4096;
  // gRPC connection backoff and connect timeout of the channel's
  // connections (doc/connection-backoff.md); tests shorten them.
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{120000};
  std::chrono::milliseconds min_connect_timeout{20000};
  // A56: the priority failover timer.
  std::chrono::milliseconds priority_failover_timeout{10000};
  // How a LOGICAL_DNS cluster's name is resolved (A37): host and port to
  // "ip:port" / "[v6]:port" addresses, in the order to try them. Runs on a
  // resolver thread, never on a loop. Unset: the system's resolver
  // (getaddrinfo). Embedders with their own DNS, and tests, set it.
  std::function<StatusOr<std::vector<std::string>>(const std::string& host,
                                                   const std::string& port)>
      resolve_host;
  // gRPC's DNS resolver: a LOGICAL_DNS name is resolved again (when its
  // pick_first asks) at most this often; tests shorten it.
  std::chrono::milliseconds min_time_between_resolutions{30000};
  // Load reporting (LRS) to a Cluster's lrs_server: bounds of the report
  // interval the server sets, reconnection backoff; tests shorten them.
  LoadReportingOptions load_reporting;
  // A LoopChannel closes its connection to an endpoint once no call has
  // used it for between one and two of these (gRPC's channel idle timeout
  // is 30 minutes; a loop's share of a channel goes idle the same way).
  std::chrono::milliseconds loop_connection_idle_timeout{std::chrono::minutes(30)};
};

struct CallOptions {
  // Request metadata, lower-case names; route header matchers and hash
  // policies read it (A28, A42).
  std::vector<std::pair<std::string, std::string>> metadata;
  // No deadline when unset. A call that waits for a config or an endpoint
  // waits at most this long (DEADLINE_EXCEEDED).
  std::optional<std::chrono::milliseconds> timeout;
  // gRPC's wait_for_ready: a call that finds no usable endpoint waits for
  // one instead of failing UNAVAILABLE (drops still fail at once).
  bool wait_for_ready = false;
};

struct UnaryResponse {
  std::string message;  // the serialized response
  std::string peer;     // the endpoint that answered, "10.0.0.1:443"
};

// One streaming call on the endpoint its pick chose: Write() messages,
// WritesDone() to half-close, Read() until nullopt, then Finish() for the
// status. One Read() and one Write() may be pending at the same time (from
// two tasks on the channel's loop). Destroying a stream that has not
// finished cancels it (RST_STREAM CANCEL).
class ClientStream {
 public:
  ~ClientStream();
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  // Sends one message; waits while the peer's flow-control window is full.
  // Not OK once the call has ended (its status if that is an error) or
  // after WritesDone().
  Task<Status> Write(std::string_view message);
  // Half-closes: the server sees the end of the requests.
  Task<Status> WritesDone();
  // The next response message; nullopt once the responses have ended.
  Task<std::optional<std::string>> Read();
  // The call's final status: the server's, or DEADLINE_EXCEEDED, CANCELLED,
  // UNAVAILABLE (connection lost). Unread responses are discarded.
  Task<Status> Finish();
  // Ends the call with CANCELLED; no-op once it has finished.
  void Cancel();
  // The endpoint the call runs on, "10.0.0.1:443".
  const std::string& peer() const;

  struct Impl;
  explicit ClientStream(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

class Channel;

// A Channel's handle on another loop: calls made through it run entirely
// on that loop. Route, hash and pick happen on the calling thread against
// what the channel's loop last published (one atomic swap per update);
// each call runs on this loop's own HTTP/2 connection to the picked
// endpoint, opened when a call first needs it and closed when the endpoint
// leaves the config. The LB policies stay on the channel's loop, and an
// endpoint is READY for every loop when the channel's own connection to it
// is. A call whose pick is READY takes no lock, makes no cross-thread hop
// and allocates nothing beyond its stream; a queued call waits on this
// loop and is woken here when the channel publishes a change.
//
//   // On a worker loop's thread (one handle per loop):
//   std::unique_ptr<uxds::LoopChannel> here = channel->OnLoop(worker_loop);
//   auto reply = co_await here->UnaryCall("/helloworld.Greeter/SayHello", request);
//   ...
//   co_await here->Shutdown();  // before the worker loop ends
//
// Create it on any thread while the channel exists; call, shut down and
// destroy it on its loop. It may outlive the channel (its calls then fail
// UNAVAILABLE), not its loop.
class LoopChannel {
 public:
  // After Shutdown().
  ~LoopChannel();
  LoopChannel(const LoopChannel&) = delete;
  LoopChannel& operator=(const LoopChannel&) = delete;

  // As Channel::UnaryCall / StartStream, on this loop. A stream is used
  // and destroyed on this loop too; it may outlive the handle.
  Task<StatusOr<UnaryResponse>> UnaryCall(std::string method, std::string request,
                                          CallOptions options = {});
  Task<StatusOr<std::unique_ptr<ClientStream>>> StartStream(std::string method,
                                                            CallOptions options = {});
  // Fails the calls waiting here, closes this loop's connections (calls and
  // streams on them end UNAVAILABLE) and returns once every call made here
  // has returned. Any number of callers; after it, the loop may end (once
  // its streams are destroyed).
  Task<void> Shutdown();
  Loop& loop() const;
  // This loop's open connections (tests).
  size_t connections() const;

  struct Impl;
  explicit LoopChannel(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;
};

namespace client_internal {
// Tests: how many pickers the tree of cluster `cluster` has published (-1:
// the channel has no tree for it). On the channel's loop.
int64_t PickersPublished(const Channel& channel, std::string_view cluster);
// Benchmarks: reaches the call path's parts (bench/call_pick_bench.cc).
struct ChannelProbe;
}  // namespace client_internal

class Channel {
 public:
  static StatusOr<std::unique_ptr<Channel>> Create(Loop& loop, std::string_view target,
                                                   ChannelOptions options = {});
  // After Shutdown().
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // One request, one response. Statuses follow A54/A88: uxds itself fails
  // calls with UNAVAILABLE (no config, no route, no endpoint; the message
  // carries the cluster's resolution note), DEADLINE_EXCEEDED or the
  // server's status, never NOT_FOUND or INVALID_ARGUMENT of its own.
  Task<StatusOr<UnaryResponse>> UnaryCall(std::string method, std::string request,
                                          CallOptions options = {});

  // A streaming call, routed, hashed and picked exactly as a unary call
  // (one pick, when the call starts; A28 header matchers and A42 hash
  // policies read options.metadata). Fails with the statuses UnaryCall
  // fails with before any message is sent; once started, the stream's own
  // status comes from Finish(). options.timeout bounds the whole call.
  Task<StatusOr<std::unique_ptr<ClientStream>>> StartStream(std::string method,
                                                            CallOptions options = {});

  // The same calls for threads that run no uxds loop (a std::thread pool):
  // callable from any thread while the channel exists (every such call
  // must have returned before the channel is destroyed; overlapping
  // Shutdown() is fine). The call runs on the channel's loop, and `done`
  // runs there too, exactly once: with the call's result; CANCELLED for a
  // call still running when Shutdown() starts; UNAVAILABLE for one that
  // reaches the loop after Shutdown() was called (even once the channel is
  // gone). The one exception: if the loop itself ends first, `done` is
  // destroyed without running (hold a promise in a shared_ptr to see it).
  // `done` must not block, throw, destroy the channel or RunSync on the
  // loop: hand the result to your own thread (a std::promise, a queue). An
  // empty `done` is logged and the call dropped. A stream from
  // StartStreamAsync is a ClientStream like any other: use and destroy it
  // on the channel's loop.
  void UnaryCallAsync(std::string method, std::string request, CallOptions options,
                      std::function<void(StatusOr<UnaryResponse>)> done);
  void StartStreamAsync(std::string method, CallOptions options,
                        std::function<void(StatusOr<std::unique_ptr<ClientStream>>)> done);

  // A handle for calls from `loop` (see LoopChannel). Any thread.
  std::unique_ptr<LoopChannel> OnLoop(Loop& loop);

  // Stops watching, closes every connection, fails waiting calls. Any
  // number of callers: one teardown, each returns once it has ended (at
  // once after that), and the first to return may destroy the channel.
  Task<void> Shutdown();

  struct Impl;

 private:
  friend int64_t client_internal::PickersPublished(const Channel& channel,
                                                   std::string_view cluster);
  friend struct client_internal::ChannelProbe;
  explicit Channel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uxds
