#include "xds_fuzz_ads_server.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/socket_address.h"

namespace uxds::fuzz {
namespace {

constexpr char kAdsMethod[] =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

}  // namespace

const ReceivedRequest* AdsStream::LastRequest(const std::string& type_url) const {
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
    if (it->type_url == type_url) return &*it;
  }
  return nullptr;
}

const ReceivedRequest* AdsStream::AnswerTo(const std::string& type_url,
                                           const std::string& nonce) const {
  for (const ReceivedRequest& request : requests) {
    if (request.type_url == type_url && request.response_nonce == nonce) return &request;
  }
  return nullptr;
}

std::unique_ptr<FuzzAdsServer> FuzzAdsServer::Start(Loop& loop) {
  std::unique_ptr<FuzzAdsServer> server(new FuzzAdsServer(loop));
  auto registry = std::make_shared<ServiceRegistry>();
  FuzzAdsServer* self = server.get();
  registry->Register(kAdsMethod, [self](ServerCall& call) { return self->Serve(call); });
  auto listening = http2::Server::Listen(loop, SocketAddress::Loopback4(0), registry, {});
  if (!listening.ok()) return nullptr;
  server->server_ = *std::move(listening);
  loop.Spawn(server->server_->Serve());
  return server;
}

AdsStream* FuzzAdsServer::Current() {
  for (auto it = streams_.rbegin(); it != streams_.rend(); ++it) {
    if (it->second->live()) return it->second.get();
  }
  return nullptr;
}

bool FuzzAdsServer::AllStreamsFinished() const {
  for (const auto& [id, stream] : streams_) {
    if (!stream->finished) return false;
  }
  return true;
}

void FuzzAdsServer::Reset() {
  for (auto it = streams_.begin(); it != streams_.end();) {
    it = it->second->finished ? streams_.erase(it) : std::next(it);
  }
  rules_ = testing::AdsRequestRules();
  violations_.clear();
}

std::string FuzzAdsServer::Send(AdsStream& stream,
                                envoy::service::discovery::v3::DiscoveryResponse response) {
  std::string nonce = "n" + std::to_string(next_nonce_++);
  response.set_nonce(nonce);
  // Recorded before the client can answer it.
  rules_.ResponseSent(stream.id, response.type_url(), response.version_info(), nonce);
  stream.outbox.push_back(response.SerializeAsString());
  stream.wake.NotifyAll();
  return nonce;
}

void FuzzAdsServer::Close(AdsStream& stream) {
  stream.close_requested = true;
  stream.wake.NotifyAll();
}

std::vector<std::string> FuzzAdsServer::TakeViolations() { return std::exchange(violations_, {}); }

Task<void> FuzzAdsServer::ReadRequests(ServerCall& call, std::shared_ptr<AdsStream> stream) {
  for (;;) {
    std::optional<std::string> message = co_await call.Read();
    if (!message.has_value()) break;
    envoy::service::discovery::v3::DiscoveryRequest parsed;
    if (!parsed.ParseFromString(*message)) {
      violations_.push_back("stream " + std::to_string(stream->id) +
                            ": a request that is no DiscoveryRequest");
      continue;
    }
    testing::AdsRequestFacts facts;
    facts.type_url = parsed.type_url();
    facts.version_info = parsed.version_info();
    facts.resource_names.assign(parsed.resource_names().begin(), parsed.resource_names().end());
    facts.response_nonce = parsed.response_nonce();
    facts.has_node = parsed.has_node();
    for (std::string& violation : rules_.Check(stream->id, facts)) {
      violations_.push_back(std::move(violation));
    }
    stream->requests.push_back(ReceivedRequest{facts.type_url, facts.version_info,
                                               std::move(facts.resource_names),
                                               facts.response_nonce, parsed.has_error_detail()});
  }
  stream->client_done = true;
  stream->wake.NotifyAll();
}

Task<Status> FuzzAdsServer::Serve(ServerCall& call) {
  auto stream = std::make_shared<AdsStream>(loop_, next_stream_++);
  streams_[stream->id] = stream;
  // The reader runs under the call's cancellation and is joined before the
  // handler returns (the call is freed after that).
  TaskGroup reader(loop_, &call.cancel_state());
  reader.Spawn(ReadRequests(call, stream));
  bool write_failed = false;
  while (!write_failed) {
    while (!stream->outbox.empty() && !stream->close_requested) {
      std::string message = std::move(stream->outbox.front());
      stream->outbox.pop_front();
      if (!(co_await call.Write(message)).ok()) {
        write_failed = true;
        break;
      }
    }
    if (write_failed || stream->close_requested || stream->client_done) break;
    if (!(co_await stream->wake.Wait()).ok()) break;
  }
  co_await reader.CancelAndJoin();
  stream->finished = true;
  if (stream->close_requested) co_return UnavailableError("stream closed by the fuzzer");
  co_return OkStatus();
}

}  // namespace uxds::fuzz
