// A scripted xDS control plane for tests: a real grpcio ADS server
// (tests/peers/fake_control_plane.py, run by /usr/bin/python3) on loopback,
// driven from C++ through JSON lines.
//
// The control plane serves
// envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources
// (state of the world). Clients connect to port(); in front of grpcio sits a
// small TCP forwarder, so the test can refuse new connections
// (StopListening) or cut every connection without any HTTP/2 goodbye
// (DropAllConnections, a control plane crash) and come back on the same port.
//
// Two ways to answer:
//  - scripted: read what the client asks with NextRequest() and answer with
//    SendResponse() (any content, including invalid resources, wrong type
//    URLs, TP3 resource_errors, wrapped resources, raw garbage);
//  - automatic: SetResources(type_url, {name: Any}, version) stores
//    resources; every request of that type is then answered with every
//    requested name the store holds (for LDS/CDS that is the full set the
//    client must see: a name left out reads as deleted), and every change to
//    the store is pushed to the streams subscribed to that type. A request
//    that changes nothing (an ACK or NACK: no store change since the last
//    answer on that stream, same names) is not answered again; a request
//    with no names is not answered.
//
// Every request, stream open and stream close is recorded as an event; the
// Wait / Next methods read them with a timeout (generous upper bounds only).
//
// The control plane checks every request against the protocol's rules
// (tests/peers/ads_request_checker.py: node only first, no wildcard as the
// first request of a type, nonce and version echo what was sent, no
// repeated names). A violation fails the test when the FakeControlPlane is
// destroyed, so no test can pass while the client breaks one; a test that
// sends bad requests on purpose reads them with TakeViolations().
// Command methods fail the current test (ADD_FAILURE) when the control plane
// rejects the command, and return false / an empty nonce then.
//
// Not thread-safe: use one FakeControlPlane from the test's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/test_support.h"

namespace uxds::testing {

std::string Base64Encode(std::string_view bytes);
// nullopt if `text` is not padded standard base64.
std::optional<std::string> Base64Decode(std::string_view text);

// A peer process that takes commands as lines on a socket and reports on
// stdout. Subprocess captures only stdout, so the command channel is one end
// of a socket pair, passed to the child as `--command-fd N`. The child must
// exit when that socket reaches end of file: the test ending (or crashing)
// closes it.
class CommandedSubprocess {
 public:
  // Starts argv + {"--command-fd", N}. Fails the test and returns nullopt if
  // it cannot be started.
  static std::optional<CommandedSubprocess> Start(std::vector<std::string> argv);
  CommandedSubprocess(CommandedSubprocess&& other) noexcept;
  CommandedSubprocess& operator=(CommandedSubprocess&& other) noexcept;
  // Closes the command socket, reads what the child still prints and waits
  // (up to 10 s) for it to exit; then Subprocess kills it.
  ~CommandedSubprocess();

  Subprocess& process() { return process_; }
  // Writes `line` + '\n'; false if the child is gone.
  bool WriteLine(std::string_view line);
  // End of file for the child.
  void CloseCommands();

 private:
  CommandedSubprocess(Subprocess process, int command_fd);
  Subprocess process_;
  int command_fd_ = -1;
};

struct FakeControlPlaneOptions {
  uint16_t port = 0;  // 0: pick a free one
  // PEM files; both set: serve TLS.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM file; set (with TLS): require and verify client certificates.
  std::string client_ca_file;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(60);
  // Fail the test, when destroyed, for each request that broke a rule and
  // was not taken by TakeViolations().
  bool fail_on_request_violations = true;
};

// One entry of DiscoveryResponse.resources.
struct ResponseResource {
  // A serialized google.protobuf.Any, placed into the response verbatim
  // (so it may also be bytes that do not parse as an Any at all).
  // Implicit on purpose: `resources = {any.SerializeAsString()}` reads well.
  ResponseResource(std::string serialized_any)  // NOLINT(google-explicit-constructor)
      : serialized_any(std::move(serialized_any)) {}
  // An Any built by the control plane from a type URL and message bytes
  // (e.g. a wrong type URL, or a value that is not a valid message).
  ResponseResource(std::string any_type_url, std::string value)
      : any_type_url(std::move(any_type_url)), value(std::move(value)) {}

  std::string serialized_any;
  std::string any_type_url;  // non-empty: build the Any from any_type_url + value
  std::string value;
  // When the response wraps resources in envoy.service.discovery.v3.Resource:
  // the wrapper's `name` (field 3) and `version` (field 1); may stay empty.
  std::string wrapper_name;
  std::string wrapper_version;
};

// A TP3 DiscoveryResponse.resource_errors entry.
struct ResourceErrorToSend {
  std::string name;  // ResourceName.name
  int code = 0;      // google.rpc.Status code (gRPC status code)
  std::string message;
};

struct ScriptedResponse {
  std::optional<int64_t> stream;  // nullopt: the most recently opened stream still open
  std::string type_url;
  std::string version_info;
  std::string nonce;  // empty: the control plane makes a unique one
  std::vector<ResponseResource> resources;
  // Wrap every resource in an Any of envoy.service.discovery.v3.Resource.
  bool wrap_in_resource = false;
  std::vector<ResourceErrorToSend> resource_errors;
  // DiscoveryResponse.control_plane.identifier; empty: field not set.
  std::string control_plane_identifier;
};

struct ObservedNode {
  std::string id;
  std::string cluster;
  std::string user_agent_name;
  std::string user_agent_version;
  std::vector<std::string> client_features;
  std::string locality_region;
  std::string locality_zone;
  std::string locality_sub_zone;
  std::string metadata_json;  // Node.metadata (a Struct) as JSON; "{}" when unset
};

struct ObservedErrorDetail {
  int code = 0;
  std::string message;
};

// One DiscoveryRequest as the control plane received it.
struct ObservedRequest {
  int64_t stream = 0;
  std::string type_url;
  std::string version_info;
  std::vector<std::string> resource_names;  // in the order the client sent them
  std::string response_nonce;
  std::optional<ObservedErrorDetail> error_detail;  // set on a NACK
  std::optional<ObservedNode> node;                 // set only if the request carried a node
};

// Any line the control plane reported on its own.
struct ObservedEvent {
  // "stream_opened", "request", "response_sent", "stream_closed".
  std::string kind;
  int64_t stream = 0;
  std::optional<ObservedRequest> request;  // kind == "request"
  // kind == "response_sent" (scripted or automatic answers alike). It is
  // recorded before the response can reach the client, so once the request
  // that ACKs / NACKs a response has been seen, its response_sent event has too.
  std::string type_url;
  std::string version_info;
  std::string nonce;
  bool automatic = false;   // sent by the resource store, not by SendResponse
  std::string json;         // the whole event line
  std::string lrs_request;  // kind == "lrs_request": the LoadStatsRequest bytes
};

// One LoadStatsRequest an LRS stream carried (bytes, for the test to parse).
struct ObservedLrsRequest {
  int64_t stream = 0;
  std::string bytes;
};

class FakeControlPlane {
 public:
  // Starts the control plane and waits until it listens. Fails the test and
  // returns nullptr if it does not come up within options.start_timeout.
  static std::unique_ptr<FakeControlPlane> Start(const FakeControlPlaneOptions& options = {});
  // Closes the command channel (the process exits on that) and reaps it.
  ~FakeControlPlane();
  FakeControlPlane(const FakeControlPlane&) = delete;
  FakeControlPlane& operator=(const FakeControlPlane&) = delete;

  uint16_t port() const { return port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

  // --- Commands ---------------------------------------------------------

  // Sends a DiscoveryResponse; returns the nonce used ("" on failure).
  std::string SendResponse(const ScriptedResponse& response);
  // Writes arbitrary bytes as one gRPC message on the stream (a response
  // that does not parse as a DiscoveryResponse).
  bool SendRawMessage(const std::string& bytes, std::optional<int64_t> stream = std::nullopt);
  // Ends the stream with a gRPC status (the server's trailers).
  bool CloseStream(int code, const std::string& message,
                   std::optional<int64_t> stream = std::nullopt);
  bool CloseAllStreams(int code, const std::string& message);
  // New connections are refused (the port stays reserved for us);
  // established connections and streams carry on.
  bool StopListening();
  // Accepts connections on the same port again.
  bool RestartListening();
  // Cuts every TCP connection at once, without GOAWAY or RST_STREAM: what a
  // client sees when the control plane crashes. Combine with StopListening()
  // to keep it down.
  bool DropAllConnections();
  // Established connections stay open but carry nothing more, either way: a
  // control plane that hangs, or a path that silently drops everything.
  // New connections are relayed as usual.
  bool FreezeConnections();

  // Automatic answers (see the top of the file). An empty map is a valid
  // state (every name of this type reads as absent). resource_errors are
  // sent, like resources, for the requested names they name.
  bool SetResources(const std::string& type_url,
                    const std::map<std::string, ResponseResource>& resources,
                    const std::string& version,
                    const std::vector<ResourceErrorToSend>& resource_errors = {});
  // Stops answering this type automatically (stored resources are dropped).
  bool ClearResources(const std::string& type_url);
  // Automatic answers for type_url ("" = every type) are not sent while
  // ignoring (requests are still recorded); a timer-expiry test's server.
  bool IgnoreRequests(bool ignore, const std::string& type_url = "");
  // Automatic answers go out this long after the request that caused them.
  bool DelayResponses(std::chrono::milliseconds delay);
  // Ids of the streams open now, oldest first.
  std::vector<int64_t> OpenStreams();

  // Sends one JSON command line (without "id") and returns the reply line,
  // or nullopt if the control plane did not answer. For commands the
  // methods above do not cover and for testing errors of the protocol.
  std::optional<std::string> RawCommand(const std::string& json_command);

  // --- Observation ------------------------------------------------------

  // The oldest request not yet returned by NextRequest whose type_url
  // matches (any type if empty); requests of other types stay queued.
  std::optional<ObservedRequest> NextRequest(std::chrono::milliseconds timeout,
                                             const std::string& type_url = "");
  // The oldest not-yet-returned request for which `match` is true; others
  // stay queued. E.g. waiting for the ACK of a nonce.
  template <typename Predicate>
  std::optional<ObservedRequest> NextRequestMatching(std::chrono::milliseconds timeout,
                                                     Predicate match);
  // The next stream_opened / stream_closed event not yet returned by these;
  // returns its stream id. WaitForStreamClosed with a stream waits for that one.
  std::optional<int64_t> WaitForStreamOpened(std::chrono::milliseconds timeout);
  std::optional<int64_t> WaitForStreamClosed(std::chrono::milliseconds timeout,
                                             std::optional<int64_t> stream = std::nullopt);
  // --- Load reporting (LRS) ---------------------------------------------
  // The control plane also serves LoadReportingService/StreamLoadStats on
  // the same port. LRS stream ids are not ADS stream ids: the methods
  // above never name an LRS stream, these only LRS streams.
  std::optional<ObservedLrsRequest> NextLrsRequest(std::chrono::milliseconds timeout,
                                                   std::optional<int64_t> stream = std::nullopt);
  std::optional<int64_t> WaitForLrsStreamOpened(std::chrono::milliseconds timeout);
  std::optional<int64_t> WaitForLrsStreamClosed(std::chrono::milliseconds timeout,
                                                std::optional<int64_t> stream = std::nullopt);
  // One LoadStatsResponse (any bytes) on the LRS stream (nullopt: the most
  // recently opened one still open).
  bool SendLrsResponse(const std::string& bytes, std::optional<int64_t> stream = std::nullopt);
  bool CloseLrsStream(int code, const std::string& message,
                      std::optional<int64_t> stream = std::nullopt);

  // Every event seen so far, in order (reads what has arrived without waiting).
  const std::vector<ObservedEvent>& events();
  // Requests seen so far (returned by NextRequest or not), in order.
  std::vector<ObservedRequest> AllRequests();
  // The rule violations reported for every request received so far (the
  // control plane is asked first, so none is still on its way); they no
  // longer fail the test.
  std::vector<std::string> TakeViolations();

 private:
  FakeControlPlane(CommandedSubprocess peer, uint16_t port, bool fail_on_request_violations);

  enum class LineKind { kTimeout, kClosed, kEvent, kReply };
  // Reads one stdout line within `timeout`: an event is recorded and queued,
  // a command reply is stored in *reply.
  LineKind ReadLineAndDispatch(std::chrono::milliseconds timeout, std::string* reply);
  // Records the events that have arrived, without waiting.
  void DrainAvailable();
  // Sends the JSON object `command` with an "id" added and waits for the
  // reply with that id, recording the events that arrive meanwhile.
  std::optional<std::string> SendCommand(const std::string& command);
  // SendCommand, and a test failure (returning nullopt) unless the reply is ok.
  std::optional<std::string> Command(const std::string& command);
  std::optional<ObservedRequest> TakeRequest(std::chrono::milliseconds timeout,
                                             bool (*match)(const ObservedRequest&, const void*),
                                             const void* context);
  std::optional<int64_t> TakeStreamEvent(std::vector<size_t>& pending,
                                         std::chrono::milliseconds timeout,
                                         std::optional<int64_t> stream);
  // The index into events_ of the oldest pending event (of `stream`, if
  // set), taken off `pending`.
  std::optional<size_t> TakeEvent(std::vector<size_t>& pending, std::chrono::milliseconds timeout,
                                  std::optional<int64_t> stream);

  CommandedSubprocess peer_;
  uint16_t port_ = 0;
  bool output_closed_ = false;
  int64_t next_command_id_ = 1;
  std::vector<ObservedEvent> events_;
  bool fail_on_request_violations_;
  std::vector<std::string> violations_;  // not yet taken
  // Indices into events_ of events not yet returned by the Next/Wait methods.
  std::vector<size_t> pending_requests_;
  std::vector<size_t> pending_opened_;
  std::vector<size_t> pending_closed_;
  std::vector<size_t> pending_lrs_requests_;
  std::vector<size_t> pending_lrs_opened_;
  std::vector<size_t> pending_lrs_closed_;
};

template <typename Predicate>
std::optional<ObservedRequest> FakeControlPlane::NextRequestMatching(
    std::chrono::milliseconds timeout, Predicate match) {
  return TakeRequest(
      timeout,
      [](const ObservedRequest& request, const void* context) {
        return (*static_cast<const Predicate*>(context))(request);
      },
      &match);
}

}  // namespace uxds::testing
