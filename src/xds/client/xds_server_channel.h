// XdsServerChannel: the ADS stream to one xDS server (A47 shares it between
// every authority that names the server), carrying every resource type.
//
// Run() connects, opens the stream, sends the subscriptions, answers each
// response with an ACK or NACK, and retries a failed stream with exponential
// backoff (A57). It idles, without a connection, while nothing is
// subscribed: unsubscribing the last name closes the stream.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/config/core/v3/base.pb.h"
#include "http2/client_call.h"
#include "http2/client_connection.h"
#include "runtime/host_resolver.h"
#include "tls/tls_context.h"
#include "uxds/bootstrap.h"
#include "uxds/loop.h"
#include "uxds/task.h"
#include "uxds/xds_client.h"
#include "xds/client/ads_protocol.h"
#include "xds/client/exponential_backoff.h"
#include "xds/client/watcher_notification_queue.h"
#include "xds/client/xds_resource_cache.h"
#include "xds/client/xds_server_connect.h"

namespace uxds::xds_internal {

// What a channel reports about its server's connectivity (A57); the client
// decides there about fallback and switching back (A71).
class XdsServerEvents {
 public:
  // The server could not be reached, or its stream closed before any
  // response.
  virtual void OnServerFailure(XdsServerState& server, const Status& error) = 0;
  // A stream got its first response, before the response is applied.
  virtual void OnServerResponding(XdsServerState& server) = 0;

 protected:
  ~XdsServerEvents() = default;
};

class XdsServerChannel {
 public:
  // What the channel uses of its client; outlives the channel.
  struct Environment {
    Loop& loop;
    const Bootstrap& bootstrap;
    const XdsClientOptions& options;
    const envoy::config::core::v3::Node& node;  // with user agent and client features
    XdsResourceCache& cache;
    WatcherNotificationQueue& notifications;
    XdsServerEvents& events;
  };

  XdsServerChannel(const Environment& environment, XdsServerState& server);
  ~XdsServerChannel();
  XdsServerChannel(const XdsServerChannel&) = delete;
  XdsServerChannel& operator=(const XdsServerChannel&) = delete;

  // `key` is the resource name as sent (XdsResourceName::key).
  void Subscribe(const XdsResourceType& type, const std::string& key);
  void Unsubscribe(const XdsResourceType& type, const std::string& key);
  bool HasSubscriptions() const;
  // Starts the timers of the subscribed names the current stream has sent
  // (A57), for entries this server is in use for: when it is in use again
  // after a fallback (A71).
  void StartResourceTimers();

  // The channel's life: runs until its task is cancelled.
  Task<void> Run();
  // Closes the connection once Run() has ended.
  Task<void> CloseConnection();

  XdsServerState& server() const { return server_; }

 private:
  // Per resource type, across streams.
  // Resources decoded between two yields to the loop (about 1 ms of work).
  static constexpr size_t kResourcesPerSlice = 256;
  // Names looked up (or written into a request) between two yields.
  static constexpr size_t kNamesPerSlice = 2048;
  // Fields of a response checked between two yields (about 0.3 ms).
  static constexpr size_t kFieldsPerSlice = 4096;
  struct TypeState {
    const XdsResourceType* type = nullptr;
    SubscribedNames names;  // with the serial of each one's subscription
    // Counts (un)subscriptions: a request whose names are written a slice
    // at a time starts over if they changed meanwhile.
    uint64_t changes = 0;
    // NOTES: "The accepted version is kept per type across stream restarts;
    // the nonce is per type per stream and starts empty on a new stream."
    std::string version;
    std::string nonce;
    Status pending_nack;  // error_detail of the next request, once
    // Names were subscribed since the last request was built, or a new
    // stream started: the next request's names may need their resource
    // timers started (A57). An ACK naming the same names does not, and so
    // does not look 10 000 names up again.
    bool start_timers = false;
    // The last request on the wire on the current stream named the names
    // subscribed then: those of `names` with a serial up to this (0: none).
    uint64_t serial_on_wire = 0;
    // Responses whose ACK/NACK is not on the wire yet: each holds back
    // watcher notifications until it is (WatcherNotificationQueue::Pause).
    // The notification pauses of the responses no request has answered yet.
    std::vector<uint64_t> unanswered_responses;
  };
  // One ADS call.
  struct Stream {
    explicit Stream(Loop& loop) : wake_writer(loop) {}
    std::unique_ptr<http2::ClientCall> call;
    TaskGroup* tasks = nullptr;             // reader and writer
    std::deque<std::string> pending_types;  // type URLs to send a request for
    std::set<std::string> requested_types;  // type URLs with a request written
    AsyncQueue<bool> wake_writer;
    bool node_sent = false;
    bool seen_response = false;
    bool resource_exhausted = false;  // ended RESOURCE_EXHAUSTED
    bool ended = false;
  };

  // One stream attempt, connecting first if needed. True if it saw a
  // response (A57: backoff is reset then) and did not end RESOURCE_EXHAUSTED.
  Task<bool> RunStream(CancelState* cancel);
  Task<StatusOr<std::unique_ptr<http2::ClientConnection>>> Connect();
  Task<void> ReadResponses(Stream& stream);
  Task<void> WriteRequests(Stream& stream);
  Task<void> HandleResponse(Stream& stream, std::string serialized);
  // The request for `type_url`'s names, written a slice at a time (names
  // first: fields may come in any order); nullopt if the stream ended.
  // `serial` is set to the last subscription serial the request names.
  Task<std::optional<std::string>> SerializeNames(Stream& stream, TypeState& state,
                                                  uint64_t& serial);
  // Starts the resource timers of the names the last request on the wire
  // of `state`'s type named, a slice at a time; false if the stream ended.
  Task<bool> StartTimersOfNamesOnWire(Stream& stream, TypeState& state);
  // Queues a request for `type_url` on the current stream, if any.
  void SendRequestFor(const std::string& type_url);
  // A transient error for every watcher of this server (A57, A88).
  void ReportFailure(std::string_view what, const Status& status);

  Environment env_;
  XdsServerState& server_;
  std::map<std::string, TypeState, std::less<>> types_;  // by type URL
  ExponentialBackoff backoff_;
  std::unique_ptr<http2::ClientConnection> connection_;
  XdsServerTls tls_;
  Stream* stream_ = nullptr;  // the stream being run, if any
  uint64_t last_subscription_serial_ = 0;
  // Set when the stream was closed because nothing is subscribed any more:
  // not a failure, and no backoff.
  bool closed_idle_ = false;
  bool started_stream_ = false;
  AsyncQueue<bool> wake_idle_;  // a subscription arrived while idle
  HostResolver resolver_;       // server_uri host names, off the loop
};

}  // namespace uxds::xds_internal
