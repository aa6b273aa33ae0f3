// The XdsClient fuzzer's control plane: an ADS server on uxds's own HTTP/2
// server, on the fuzzer's loop (no thread of its own), driven step by step.
//
// Each StreamAggregatedResources call is one AdsStream: its requests are
// recorded and checked against the DiscoveryRequest rules
// (tests/support/ads_request_rules.h); the fuzzer sends responses on it and
// closes it. The call's handler does every read and write of the call, so
// nothing touches a ServerCall after its handler returned.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "http2/server.h"
#include "support/ads_request_rules.h"
#include "uxds/async_condition.h"
#include "uxds/loop.h"
#include "uxds/service_registry.h"

namespace uxds::fuzz {

struct ReceivedRequest {
  std::string type_url;
  std::string version_info;
  std::vector<std::string> resource_names;
  std::string response_nonce;
  bool nack = false;  // error_detail set
};

struct AdsStream {
  explicit AdsStream(Loop& loop, int64_t i) : id(i), wake(loop) {}
  const int64_t id;
  bool close_requested = false;  // the fuzzer ends it (UNAVAILABLE)
  bool client_done = false;      // the client half-closed or cancelled
  bool finished = false;         // the handler returned
  std::deque<std::string> outbox;
  std::vector<ReceivedRequest> requests;
  AsyncCondition wake;  // outbox, close_requested, client_done

  bool live() const { return !close_requested && !client_done && !finished; }
  // The last request of `type_url` on this stream, or nullptr.
  const ReceivedRequest* LastRequest(const std::string& type_url) const;
  // The request that answered `nonce` of `type_url`, or nullptr.
  const ReceivedRequest* AnswerTo(const std::string& type_url, const std::string& nonce) const;
};

class FuzzAdsServer {
 public:
  // Listens on 127.0.0.1 (any port) and serves on `loop` until Shutdown().
  static std::unique_ptr<FuzzAdsServer> Start(Loop& loop);
  uint16_t port() const { return server_->port(); }
  size_t connection_count() const { return server_->connection_count(); }

  // The newest stream still live, or nullptr.
  AdsStream* Current();
  bool AllStreamsFinished() const;
  // Forgets finished streams and the rules' records: a new client starts.
  void Reset();

  // Sends `response` (its nonce set here) on `stream`; returns the nonce.
  std::string Send(AdsStream& stream, envoy::service::discovery::v3::DiscoveryResponse response);
  void Close(AdsStream& stream);

  // Rule violations of the requests received since the last call.
  std::vector<std::string> TakeViolations();

 private:
  explicit FuzzAdsServer(Loop& loop) : loop_(loop) {}
  Task<Status> Serve(ServerCall& call);
  Task<void> ReadRequests(ServerCall& call, std::shared_ptr<AdsStream> stream);

  Loop& loop_;
  std::unique_ptr<http2::Server> server_;
  std::map<int64_t, std::shared_ptr<AdsStream>> streams_;
  int64_t next_stream_ = 1;
  int64_t next_nonce_ = 1;
  testing::AdsRequestRules rules_;
  std::vector<std::string> violations_;
};

}  // namespace uxds::fuzz
